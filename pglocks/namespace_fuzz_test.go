package pglocks_test

import (
	"testing"

	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
)

// FuzzNamespace: pglocks.CheckNamespace states the rule of
// redislocks.CheckNamespace, so one namespace setting suits both drivers:
// they accept exactly the same namespaces.
func FuzzNamespace(f *testing.F) {
	for _, s := range []string{"", "prod", "prod:eu", "a{b}", "a b", "ünïcode", "x.y-z_1", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ns string) {
		pg, redis := pglocks.CheckNamespace(ns), redislocks.CheckNamespace(ns)
		if (pg == nil) != (redis == nil) {
			t.Fatalf("namespace %q: pglocks says %v, redislocks says %v", ns, pg, redis)
		}
	})
}
