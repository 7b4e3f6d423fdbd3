// Command benchreport runs the benchmarks of bench/ and of package locks and
// rewrites the generated parts of BENCHMARKS.md with their medians and
// ratios: the scheduler against gocron v2 and robfig/cron, the in-process
// driver against a map-plus-mutex table and a lean one, the Redis driver
// report of redislockbench, the PostgreSQL driver report of pglockbench,
// the etcd driver beside etcd's Mutex, Redis and PostgreSQL of
// etcdlockbench, the first builds of buildbench, and the
// 3-node run of clusterbench, and the scale benchmark of scalebench
// (node processes beside gocron v2, the kill, graceful and PostgreSQL
// modes). It is what `make bench` runs:
//
//	cd bench && go run ./cmd/benchreport -o ../BENCHMARKS.md
//
// Each generated part sits between "<!-- make bench: NAME -->" and
// "<!-- end NAME -->" lines; text outside them is kept as written.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	out       = flag.String("o", "../BENCHMARKS.md", "the file whose generated parts are rewritten")
	schedRuns = flag.Int("scheduler-runs", 7, "invocations of the scheduler benchmarks (bench/scheduler)")
	benchtime = flag.String("scheduler-benchtime", "5x", "-benchtime of the scheduler benchmarks")
	lockRuns  = flag.Int("locks-count", 5, "-count of the in-process driver benchmarks (package locks)")
	redisRuns = flag.Int("redis-runs", 5, "-runs of redislockbench")
	redisDur  = flag.Duration("redis-duration", 2*time.Second, "-duration of redislockbench")
	pgRuns    = flag.Int("postgres-runs", 5, "-runs of pglockbench")
	pgDur     = flag.Duration("postgres-duration", 2*time.Second, "-duration of pglockbench")
	etcdRuns  = flag.Int("etcd-runs", 5, "-runs of etcdlockbench")
	buildRuns = flag.Int("build-runs", 3, "-runs of buildbench")
	etcdDur   = flag.Duration("etcd-duration", 2*time.Second, "-duration of etcdlockbench")
	only      = flag.String("parts", "machine,scheduler,inprocess,redis,postgres,etcd,cluster,scale,build", "the parts to regenerate; the others are kept as they are")
	clRuns    = flag.Int("cluster-runs", 3, "-runs of clusterbench")
	clDur     = flag.Duration("cluster-duration", time.Minute, "-duration of clusterbench")
	scRuns    = flag.Int("scale-runs", 3, "-runs of scalebench's tables of nodes × tasks (its kill, graceful and PostgreSQL modes run once)")
	scDur     = flag.Duration("scale-duration", 20*time.Second, "-duration of scalebench")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	doc, err := os.ReadFile(*out)
	if err != nil {
		log.Fatal(err)
	}
	makers := map[string]func() string{
		"machine":   machine,
		"scheduler": scheduler,
		"inprocess": inprocess,
		"redis": func() string {
			return run(".", "go", "run", "./cmd/redislockbench", "-runs", strconv.Itoa(*redisRuns), "-duration", redisDur.String())
		},
		"postgres": func() string {
			return run(".", "go", "run", "./cmd/pglockbench", "-runs", strconv.Itoa(*pgRuns), "-duration", pgDur.String())
		},
		"build": func() string {
			return run(".", "go", "run", "./cmd/buildbench", "-runs", strconv.Itoa(*buildRuns))
		},
		"etcd": func() string {
			return run(".", "go", "run", "./cmd/etcdlockbench", "-runs", strconv.Itoa(*etcdRuns), "-duration", etcdDur.String())
		},
		"cluster": func() string {
			var out []string
			for _, nodes := range []string{"3", "10"} {
				for _, spread := range []string{"false", "true"} {
					out = append(out, run(".", "go", "run", "./cmd/clusterbench", "-runs", strconv.Itoa(*clRuns),
						"-duration", clDur.String(), "-nodes", nodes, "-spread="+spread))
				}
			}
			return strings.Join(out, "\n")
		},
		"scale": func() string {
			sc := func(runs int, args ...string) string {
				return run(".", "go", append([]string{"run", "./cmd/scalebench", "-runs", strconv.Itoa(runs), "-duration", scDur.String()}, args...)...)
			}
			return strings.Join([]string{
				sc(*scRuns, "-nodes", "1,3,10,30", "-tasks", "100", "-breakdown"),
				sc(*scRuns, "-nodes", "10,30", "-tasks", "1000", "-breakdown"),
				sc(1, "-kill", "-postgres"),
				sc(1, "-graceful"),
				sc(1, "-postgres", "-breakdown"),
			}, "\n")
		},
	}
	parts := map[string]string{}
	for _, name := range strings.Split(*only, ",") {
		mk, ok := makers[strings.TrimSpace(name)]
		if !ok {
			log.Fatalf("benchreport: unknown part %q", name)
		}
		parts[strings.TrimSpace(name)] = mk()
	}
	s := string(doc)
	for name, body := range parts {
		if s, err = replace(s, name, body); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(*out, []byte(s), 0o644); err != nil {
		log.Fatal(err)
	}
}

// replace puts body between the markers of part name in doc.
func replace(doc, name, body string) (string, error) {
	start, end := "<!-- make bench: "+name+" -->\n", "<!-- end "+name+" -->\n"
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("benchreport: %s lacks the lines %q and %q", *out, strings.TrimSpace(start), strings.TrimSpace(end))
	}
	return doc[:i+len(start)] + "\n" + strings.TrimSpace(body) + "\n\n" + doc[j:], nil
}

// run runs a command in dir, echoing it, and returns its standard output.
func run(dir string, name string, args ...string) string {
	log.Printf("benchreport: (cd %s && %s %s)", dir, name, strings.Join(args, " "))
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		log.Fatalf("benchreport: %s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("Generated by `make bench` on %s: %s, %d cores, %s, load average %s when it started.",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), cpu, runtime.NumCPU(), runtime.Version(), load)
}

// A result is one benchmark line: its metrics by unit.
type result map[string]float64

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse returns every benchmark line of output in order, by name.
func parse(output string) map[string][]result {
	m := map[string][]result{}
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		g := benchLine.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		r := result{}
		f := strings.Fields(g[2])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r[f[i+1]] = v
			}
		}
		m[g[1]] = append(m[g[1]], r)
	}
	return m
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figures returns, for a metric of benchmark bench, each engine's values
// across invocations.
func figures(runs []map[string][]result, bench, engine, unit string) []float64 {
	var xs []float64
	for _, r := range runs {
		for _, res := range r[bench+"/"+engine] {
			if v, ok := res[unit]; ok {
				xs = append(xs, v)
			}
		}
	}
	return xs
}

// ratios returns ours[i]/theirs[i] for each invocation i.
func ratios(ours, theirs []float64) []float64 {
	var rs []float64
	for i := range min(len(ours), len(theirs)) {
		if theirs[i] != 0 {
			rs = append(rs, ours[i]/theirs[i])
		}
	}
	return rs
}

func scheduler() string {
	var runs []map[string][]result
	for range *schedRuns {
		runs = append(runs, parse(run(".", "go", "test", "-run", "XXX", "-bench", ".", "-benchtime", *benchtime, "./scheduler/")))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Command (%d invocations, each measuring all three engines back to back; medians, ratios are medians of the per-invocation ratios):\n\n", *schedRuns)
	fmt.Fprintf(&b, "    cd bench && for i in $(seq %d); do go test -run XXX -bench . -benchtime %s ./scheduler/; done\n\n", *schedRuns, *benchtime)
	b.WriteString("| Workload | ndigo | gocron v2 | robfig/cron | ndigo ÷ gocron | ndigo ÷ robfig | Goal |\n|---|---|---|---|---|---|---|\n")
	rows := []struct {
		label, bench, unit, goal string
		format                   func(float64) string
		ratio                    bool
	}{
		{"10,000 idle tasks: heap per task (`BenchmarkIdleHeap`)", "IdleHeap", "B/task", "≤ robfig/cron (issue 26)", func(v float64) string { return fmt.Sprintf("%.0f B", v) }, true},
		{"10,000 idle tasks: goroutines added", "IdleHeap", "goroutines", "none per task", func(v float64) string { return fmt.Sprintf("%.0f", v) }, false},
		{"register 10,000 tasks and start (`BenchmarkRegister`)", "Register", "ns/op", "≤ robfig/cron, validation included (issue 26)", func(v float64) string { return fmt.Sprintf("%.0f ms", v/1e6) }, true},
		{"1,000 tasks due on the same second: p50 lateness (`BenchmarkLateness`)", "Lateness", "p50-ms", "", func(v float64) string { return fmt.Sprintf("%.1f ms", v) }, true},
		{"1,000 tasks due on the same second: p99 lateness", "Lateness", "p99-ms", "≤ 0.5× robfig/cron (issue 26)", func(v float64) string { return fmt.Sprintf("%.1f ms", v) }, true},
	}
	for _, r := range rows {
		nd, gc, rf := figures(runs, r.bench, "ndigo", r.unit), figures(runs, r.bench, "gocron", r.unit), figures(runs, r.bench, "robfig", r.unit)
		rg, rr := "", ""
		if r.ratio {
			rg, rr = fmt.Sprintf("%.2f", median(ratios(nd, gc))), fmt.Sprintf("%.2f", median(ratios(nd, rf)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.label, r.format(median(nd)), r.format(median(gc)), r.format(median(rf)), rg, rr, r.goal)
	}
	return b.String()
}

func inprocess() string {
	args := []string{"test", "-run", "XXX", "-bench", "AcquireRelease", "-benchmem", "-count", strconv.Itoa(*lockRuns), "./locks"}
	res := parse(run("..", "go", args...))
	runs := []map[string][]result{res}
	ours := figures(runs, "AcquireRelease", "driver=inprocess", "ns/op")
	mm := figures(runs, "AcquireRelease", "driver=map-mutex", "ns/op")
	lean := figures(runs, "AcquireRelease", "driver=lean", "ns/op")
	allocs := func(c string) float64 { return median(figures(runs, "AcquireRelease", "driver="+c, "allocs/op")) }
	var b bytes.Buffer
	fmt.Fprintf(&b, "Command: `go %s` (from the module root; medians of %d, the ratios the medians of the per-run ratios).\n\n", strings.Join(args, " "), *lockRuns)
	b.WriteString("| Workload | ndigo in-process | map + mutex | lean map + mutex | ndigo ÷ map | ndigo ÷ lean | Goal |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| uncontended acquire + release (`BenchmarkAcquireRelease`) | %.0f ns, %.0f allocs | %.0f ns, %.0f allocs | %.0f ns, %.0f allocs | %.2f | %.2f | ≤ 1.5 × lean |\n",
		median(ours), allocs("inprocess"), median(mm), allocs("map-mutex"), median(lean), allocs("lean"),
		median(ratios(ours, mm)), median(ratios(ours, lean)))
	return b.String()
}
