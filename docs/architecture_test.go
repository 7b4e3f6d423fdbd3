package docs_test

import (
	"os"
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
	const etcd = "go.etcd.io/etcd/client/v3"
	observers := ndigo("admin", "metrics", "tracing")
	rules := []struct {
		pkg    string
		forbid []string
	}{
		{"locks", append(ndigo("config", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "admin", "metrics", "tracing", "app"),
			goRedis, etcd, "github.com/prometheus/client_golang/prometheus", "go.opentelemetry.io/otel")},
		{"taskstate", append(ndigo("locks", "config", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "admin", "metrics", "tracing", "app"), goRedis, etcd)},
		{"config", append(ndigo("locks", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "admin", "metrics", "tracing", "app"), goRedis, etcd)},
		{"notify", append(ndigo("locks", "taskstate", "config", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "admin", "metrics", "tracing", "app"), goRedis, etcd)},
		{"scheduling", append(ndigo("config", "annotations", "redislocks", "etcdlocks", "pglocks", "app"), append(observers, goRedis, etcd)...)},
		{"annotations", append(ndigo("config", "redislocks", "etcdlocks", "pglocks", "app"), append(observers, goRedis, etcd)...)},
		{"admin", append(ndigo("config", "redislocks", "etcdlocks", "pglocks", "annotations", "metrics", "tracing", "app"), goRedis, etcd)},
		{"metrics", append(ndigo("config", "redislocks", "etcdlocks", "pglocks", "annotations", "admin", "tracing", "app"), goRedis, etcd)},
		// The outside heartbeat knows nothing of the framework: app wires it, metrics reads it.
		{"ping", append(ndigo("locks", "taskstate", "config", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "admin", "metrics", "tracing", "app"),
			goRedis, etcd, "github.com/prometheus/client_golang/prometheus")},
		{"tracing", append(ndigo("config", "redislocks", "etcdlocks", "pglocks", "annotations", "admin", "metrics", "app"), goRedis, etcd)},
		{"redislocks", append(ndigo("config", "scheduling", "annotations", "app", "pglocks", "etcdlocks"), append(observers, etcd)...)},
		{"pglocks", append(ndigo("config", "scheduling", "annotations", "app", "redislocks", "etcdlocks"), append(observers, goRedis, etcd)...)},
		{"etcdlocks", append(ndigo("config", "scheduling", "annotations", "app", "redislocks", "pglocks"), append(observers, goRedis)...)},
		// An application without etcd does not link its client: app hands etcdlocks its section (internal/etcdconf).
		{"app", []string{mod + "etcdlocks", etcd}},
		// The CLI speaks HTTP to a node: no framework code, so go run @latest builds it quickly.
		{"cmd/ndigo", append(ndigo("config", "locks", "scheduling", "annotations", "redislocks", "etcdlocks", "pglocks", "app"), append(observers, goRedis, etcd)...)},
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

// TestLayoutIsDescribed checks that docs/PACKAGES.md's "Packages" table names every
// package of the module, and docs/ARCHITECTURE.md every internal one, so
// that neither falls behind the layout.
func TestLayoutIsDescribed(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "github.com/ndigo/ndigo/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	readme, err := os.ReadFile("PACKAGES.md")
	if err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(string(readme[strings.Index(string(readme), "\n## Packages"):]), "\n## Testing")
	arch, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		p = strings.TrimPrefix(p, "github.com/ndigo/ndigo/")
		if !strings.Contains(table, "`"+p+"`") && !strings.Contains(table, "`"+p+"/...`") {
			t.Errorf("docs/PACKAGES.md's Packages table does not name package %s", p)
		}
		if rest, ok := strings.CutPrefix(p, "internal/"); ok && !strings.Contains(string(arch), "`"+rest+"`") && !strings.Contains(string(arch), "`"+p+"`") {
			t.Errorf("docs/ARCHITECTURE.md does not name internal package %s", p)
		}
	}
}
