package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// The example is code to copy: neither it nor anything it builds on
// imports one of ndigo's test kits (schedulingtest, lockstest, ...), in
// either build (with and without the tag etcd).
func TestExampleImportsNoTestKit(t *testing.T) {
	for _, tags := range []string{"", "etcd"} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").Output()
		if err != nil {
			t.Fatalf("go list -deps -tags %q: %v", tags, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "github.com/ndigo/ndigo/") && strings.HasSuffix(path.Base(pkg), "test") {
				t.Errorf("the example (tags %q) imports the test kit %s", tags, pkg)
			}
		}
	}
}
