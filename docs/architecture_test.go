package docs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesPointDown checks the forbidden arrows of ARCHITECTURE.md
// with go list -deps: no package imports, directly or not, what it must not.
func TestDependenciesPointDown(t *testing.T) {
	const mod = "github.com/ndigo/ndigo/"
	ndigo := func(pkgs ...string) []string {
		out := make([]string, len(pkgs))
		for i, p := range pkgs {
			out[i] = mod + p
		}
		return out
	}
	const goRedis = "github.com/redis/go-redis/v9"
	observers := ndigo("admin", "metrics", "tracing")
	rules := []struct {
		pkg    string
		forbid []string
	}{
		{"locks", append(ndigo("config", "scheduling", "annotations", "redislocks", "pglocks", "admin", "metrics", "tracing", "app"),
			goRedis, "github.com/prometheus/client_golang/prometheus", "go.opentelemetry.io/otel")},
		{"taskstate", append(ndigo("locks", "config", "scheduling", "annotations", "redislocks", "pglocks", "admin", "metrics", "tracing", "app"), goRedis)},
		{"config", append(ndigo("locks", "scheduling", "annotations", "redislocks", "pglocks", "admin", "metrics", "tracing", "app"), goRedis)},
		{"scheduling", append(ndigo("config", "annotations", "redislocks", "pglocks", "app"), append(observers, goRedis)...)},
		{"annotations", append(ndigo("config", "redislocks", "pglocks", "app"), append(observers, goRedis)...)},
		{"admin", append(ndigo("config", "redislocks", "pglocks", "annotations", "metrics", "tracing", "app"), goRedis)},
		{"metrics", append(ndigo("config", "redislocks", "pglocks", "annotations", "admin", "tracing", "app"), goRedis)},
		{"tracing", append(ndigo("config", "redislocks", "pglocks", "annotations", "admin", "metrics", "app"), goRedis)},
		{"redislocks", append(ndigo("config", "scheduling", "annotations", "app", "pglocks"), observers...)},
		{"pglocks", append(ndigo("config", "scheduling", "annotations", "app", "redislocks"), append(observers, goRedis)...)},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", mod+r.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", r.pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range r.forbid {
			if deps[f] {
				t.Errorf("%s imports %s (directly or not): a forbidden arrow, see docs/ARCHITECTURE.md", r.pkg, f)
			}
		}
	}
}
