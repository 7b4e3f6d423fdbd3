// Command buildbench measures what a first build costs a new user: the
// payroll example's `go run` (with and without the tag etcd) and the
// packages the README's first program compiles (app and annotations),
// each built with an empty build cache (the module cache stays: downloads
// are not counted), and prints Markdown tables: packages compiled, wall
// and CPU seconds (medians over runs, the load average beside them), and
// the CPU seconds of each module the payroll example compiles, with what
// the module brings. CPU time is the compiler's and linker's user plus
// system time (go build -debug-actiongraph), which a loaded machine
// changes less than wall time.
//
//	cd bench && go run ./cmd/buildbench -runs 3
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

var runs = flag.Int("runs", 3, "cold builds of each target; the table shows medians")

// A target is one build a new user makes.
type target struct {
	label string
	args  []string // after go build
}

var targets = []target{
	{"`go run ./examples/payroll` (the first command of the README)", []string{"-o", os.DevNull, "./examples/payroll"}},
	{"`go run -tags etcd ./examples/payroll` (the example with --etcd)", []string{"-tags", "etcd", "-o", os.DevNull, "./examples/payroll"}},
	{"the README's first program (packages app and annotations)", []string{"./app", "./annotations"}},
}

// brings says what each heavy module is in the graph for.
var brings = map[string]string{
	"std":                                    "the standard library (net/http, crypto/tls, encoding/json, …)",
	"github.com/ndigo/ndigo":                 "ndigo itself",
	"github.com/redis/go-redis/v9":           "the Redis driver (design dependency), chosen by redis.url at run time",
	"github.com/jackc/pgx/v5":                "the PostgreSQL driver, chosen by postgres.url at run time",
	"github.com/prometheus/client_golang":    "/metrics (admin.metrics) in Prometheus's format",
	"google.golang.org/protobuf":             "Prometheus's client (its data model); with etcd, gRPC too",
	"github.com/prometheus/common":           "Prometheus's client",
	"github.com/prometheus/procfs":           "Prometheus's process collector",
	"golang.org/x/text":                      "validator/v10's translations and pgx's",
	"go.uber.org/zap":                        "fx's event logger (fxevent.ZapLogger), and etcd's client",
	"go.uber.org/fx":                         "the application framework (design dependency)",
	"go.uber.org/dig":                        "fx's container (design dependency)",
	"github.com/go-playground/validator/v10": "configuration validation (design dependency)",
	"github.com/gabriel-vasile/mimetype":     "validator/v10's mime rules",
	"go.etcd.io/etcd/client/v3":              "the etcd driver (-tags etcd only)",
	"go.etcd.io/etcd/api/v3":                 "the etcd driver's API types (-tags etcd only)",
	"google.golang.org/grpc":                 "etcd's client transport (-tags etcd only)",
	"golang.org/x/net":                       "gRPC's HTTP/2 (-tags etcd only)",
	"go.yaml.in/yaml/v3":                     "the configuration file",
	"github.com/robfig/cron/v3":              "cron parsing (design dependency)",
}

type action struct {
	Mode, Package string
	Cmd           []string
	CmdUser       int64
	CmdSys        int64
}

type result struct {
	wall, cpu float64 // seconds
	load      string
	packages  int
	byModule  map[string]float64
	pkgs      map[string]int
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	root, err := filepath.Abs("..")
	if err != nil {
		log.Fatal(err)
	}
	all := make([][]result, len(targets))
	for run := range *runs {
		for i, t := range targets {
			r, err := build(root, t)
			if err != nil {
				log.Fatal(err)
			}
			log.Printf("run %d %s: %d packages, %.1f s wall, %.1f s CPU, load %s", run+1, t.label, r.packages, r.wall, r.cpu, r.load)
			all[i] = append(all[i], r)
		}
	}
	fmt.Printf("Command: `cd bench && go run ./cmd/buildbench %s` (%d cold builds of each, an empty build cache each time, "+
		"the module cache kept; medians).\n\n", strings.Join(os.Args[1:], " "), *runs)
	fmt.Println("| build | packages compiled | wall | CPU (compile + link) | load average at the start of each |")
	fmt.Println("|---|---:|---:|---:|---|")
	for i, t := range targets {
		rs := all[i]
		var loads []string
		for _, r := range rs {
			loads = append(loads, r.load)
		}
		fmt.Printf("| %s | %d | %.0f s | %.0f s | %s |\n", t.label, rs[0].packages,
			median(rs, func(r result) float64 { return r.wall }), median(rs, func(r result) float64 { return r.cpu }), strings.Join(loads, ", "))
	}
	fmt.Printf("\nCPU seconds by module, `go run ./examples/payroll` (median over runs):\n\n")
	fmt.Println("| module | packages | CPU | share | what it brings |")
	fmt.Println("|---|---:|---:|---:|---|")
	rs := all[0]
	total := median(rs, func(r result) float64 { return r.cpu })
	var mods []string
	for m := range rs[0].byModule {
		mods = append(mods, m)
	}
	cpu := func(m string) float64 { return median(rs, func(r result) float64 { return r.byModule[m] }) }
	slices.SortFunc(mods, func(a, b string) int { return int(1000 * (cpu(b) - cpu(a))) })
	for _, m := range mods {
		if c := cpu(m); c >= 0.5 {
			fmt.Printf("| %s | %d | %.1f s | %.0f%% | %s |\n", m, rs[0].pkgs[m], c, 100*c/total, brings[m])
		}
	}
}

// build builds t with an empty build cache and reads its action graph.
func build(root string, t target) (result, error) {
	cache, err := os.MkdirTemp("", "buildbench-cache")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(cache)
	graph := filepath.Join(cache, "actions.json")
	load, _ := os.ReadFile("/proc/loadavg")
	cmd := exec.Command("go", append([]string{"build", "-debug-actiongraph=" + graph}, t.args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOCACHE="+cache)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("go build %s: %w\n%s", strings.Join(t.args, " "), err, out)
	}
	r := result{wall: time.Since(start).Seconds(), byModule: map[string]float64{}, pkgs: map[string]int{}}
	if f := strings.Fields(string(load)); len(f) > 0 {
		r.load = f[0]
	}
	data, err := os.ReadFile(graph)
	if err != nil {
		return result{}, err
	}
	var actions []action
	if err := json.Unmarshal(data, &actions); err != nil {
		return result{}, err
	}
	mods, err := modules(root, t)
	if err != nil {
		return result{}, err
	}
	for _, a := range actions {
		if len(a.Cmd) == 0 || (a.Mode != "build" && a.Mode != "link") {
			continue
		}
		s := float64(a.CmdUser+a.CmdSys) / 1e9
		r.cpu += s
		m := "link"
		if a.Mode == "build" {
			r.packages++
			m = mods[a.Package]
			r.pkgs[m]++
		}
		r.byModule[m] += s
	}
	return r, nil
}

// modules maps each package t compiles to its module, "std" for the
// standard library's.
func modules(root string, t target) (map[string]string, error) {
	var args []string
	for i := 0; i < len(t.args); i++ {
		switch t.args[i] {
		case "-o":
			i++
		case "-tags":
			args = append(args, "-tags", t.args[i+1])
			i++
		default:
			args = append(args, t.args[i])
		}
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{if .Module}}{{.Module.Path}}{{else}}std{{end}}"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, mod, ok := strings.Cut(line, " "); ok {
			m[p] = mod
		}
	}
	return m, nil
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
