package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCitedTestsExist checks that every test a document cites as the
// proof of what it says (`TestName`, `file_test.go: TestName`) is a test
// of the module, and every test file it names exists: a guarantee whose
// test was renamed or removed is a claim nothing checks.
func TestCitedTestsExist(t *testing.T) {
	// Peers' tests that the documents compare with: robfig/cron's
	// spec_test.go and gorhill/cronexpr's TestDST.
	defined := map[string]bool{"TestDST": true}
	files := map[string]bool{"spec_test.go": true}
	funcs := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && path != "..":
			return filepath.SkipDir // bench/ is a module of its own
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(strings.TrimPrefix(path, "../"))] = true
		files[filepath.Base(path)] = true // named alone beside its package
		for _, m := range funcs.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`(?:([\\w./-]+_test\\.go): )?(Test[A-Z]\\w*)`")
	named := regexp.MustCompile("`([\\w./-]+_test\\.go)(?::|`)")
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "../README.md", "../BENCHMARKS.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			if !defined[m[2]] {
				t.Errorf("%s cites %s, which no test file of the module defines", doc, m[2])
			}
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			if !files[m[1]] {
				t.Errorf("%s names %s, which is not a test file of the module", doc, m[1])
			}
		}
	}
}
