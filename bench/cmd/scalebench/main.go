// Command scalebench is the scale benchmark of issue 21: N nodes × T tasks,
// every task every second (cron "* * * * * *", whole seconds) and locked,
// on one private redis-server, side by side in one invocation:
//
//   - ndigo: scheduling.Scheduler with Spread, the redislocks driver and
//     task-state store, LockTTL 10s (-ttl);
//   - gocron-locker: gocron v2 with a per-job locker on bsm/redislock
//     (gocron.WithDistributedJobLocker, lock TTL 10s);
//   - gocron-elector: gocron v2 with leader election
//     (gocron.WithDistributedElector) on a bsm/redislock lease of 10s,
//     extended every second.
//
// Each node is an OS process (this binary re-executed with -child-system),
// with its own client, that counts its client round trips with a go-redis
// hook (one per command, one per pipeline; pub/sub not counted) or a pgx
// tracer (one per query, exec or batch). Each row-run starts a fresh
// redis-server; after -warmup, the window opens at a half second, so that
// the fires it measures are the whole seconds strictly inside it, and every
// node and INFO commandstats are read at both ends. Fires that start within
// -grace after the window still count as run.
//
//	cd bench && go run ./cmd/scalebench -nodes 1,3,10,30 -tasks 100,1000 -duration 20s -runs 3
//	cd bench && go run ./cmd/scalebench -kill             # SIGKILL 5 of 10 ndigo nodes mid-run
//	cd bench && go run ./cmd/scalebench -graceful         # SIGTERM 5 of 10 ndigo nodes mid-run
//	cd bench && go run ./cmd/scalebench -postgres         # ndigo on pglocks, 10 nodes × 100 tasks
//	cd bench && go run ./cmd/scalebench -postgres -kill   # the kill test on Redis and on PostgreSQL
//
// -failover runs the failover benchmark of issue 36 (see failover.go): an
// owner's SIGKILL, its SIGSTOP past its lease, a rolling restart of every
// node, each in the window of a row-run of its own, with ndigo on Redis
// (ndigo), PostgreSQL (ndigo-pg) and etcd (ndigo-etcd) beside
// gocron-elector, on 3 and 10 nodes × 100 tasks, lock TTL 5s (-ttl):
//
//	cd bench && go run ./cmd/scalebench -failover kill,stop,rolling
//	cd bench && go run ./cmd/scalebench -failover kill,stop,rolling -nodes 3 -systems ndigo,gocron-elector
//
// -breakdown adds, per row, the client round trips and the Redis commands
// per fire by kind (scripts by SHA prefix and first key).
//
// -cron sets the cron spec of every ndigo task (ndigo's syntax, H
// included), for schedules other than every second:
//
//	cd bench && go run ./cmd/scalebench -systems ndigo -nodes 3 -tasks 1000 -cron '0 * * * * *' -duration 120s -breakdown
//	cd bench && go run ./cmd/scalebench -systems ndigo -nodes 3 -tasks 1000 -cron 'H * * * * *' -duration 120s -breakdown
//
// The fires a window expects are those of each task's schedule, as ndigo
// computes them (H resolved from the task's name): an unlocked twin of
// every task on a scheduler with a fake clock, stepped a second at a time.
// The window still opens at a half second, but not before every task has
// fired once after the warm-up's start (a first fire finds a cold client),
// and not within 5s of a herd of fires (see chooseOpen), so that a herd's
// work does not straddle an end. The gocron peers take no H: with -cron
// other than the default, the systems are ndigo and ndigo-pg only.
package main

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/etcdproc"
	"github.com/ndigo/ndigo/internal/pgproc"
	"github.com/ndigo/ndigo/internal/redisproc"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

const (
	everySecond = "* * * * * *"
	// edgeMargin is how far from a window's ends the window's choice of its
	// opening second keeps fires, where it can.
	edgeMargin = 5 // seconds
	// alignSearch is how many opening seconds the window chooses among.
	alignSearch = 60
)

var (
	nodesFlag   = flag.String("nodes", "1,3,10,30", "node counts (with -kill, -graceful or -postgres: 10 unless set)")
	tasksFlag   = flag.String("tasks", "100,1000", "task counts (with -kill, -graceful or -postgres: 100 unless set)")
	systemsFlag = flag.String("systems", "ndigo,gocron-locker,gocron-elector", "systems: ndigo, gocron-locker, gocron-elector, ndigo-pg, ndigo-etcd (its round trips not counted)")
	duration    = flag.Duration("duration", 20*time.Second, "measured window of each row-run (whole seconds)")
	runsFlag    = flag.Int("runs", 3, "runs of each row; the table shows medians")
	warmup      = flag.Duration("warmup", 5*time.Second, "time between the nodes' start and the window")
	grace       = flag.Duration("grace", 3*time.Second, "time after the window in which a late fire of the window still counts as run")
	killMode    = flag.Bool("kill", false, "kill mode: SIGKILL half the ndigo nodes a quarter into the window")
	graceful    = flag.Bool("graceful", false, "graceful mode: SIGTERM half the ndigo nodes in the middle of the window")
	ttlFlag     = flag.Duration("ttl", 10*time.Second, "the lock TTL of every ndigo task, and of gocron's locks and lease (with -failover: 5s unless set)")
	failover    = flag.String("failover", "", "failover mode: the events, comma-separated: kill (SIGKILL of an owner), stop (SIGSTOP of an owner past the lock TTL, then SIGCONT), rolling (SIGTERM, exit, start and ready of every node in turn); see failover.go")
	postgres    = flag.Bool("postgres", false, "ndigo on pglocks (system ndigo-pg) on a private PostgreSQL; with -kill or -graceful, beside Redis")
	breakdown   = flag.Bool("breakdown", false, "list the client round trips and Redis commands per fire by kind")
	cronFlag    = flag.String("cron", everySecond, "the cron spec of every ndigo task, in ndigo's syntax with H (a value hashed from the task's name): "+
		"'0 * * * * *' (every minute at :00), 'H * * * * *' (every minute at a second of each task's own); the gocron peers take no H, so "+
		"with another spec than the default the systems are ndigo and ndigo-pg only (-systems defaults to ndigo)")

	childSystem = flag.String("child-system", "", "internal: run as a node of this system")
	childNode   = flag.String("child-node", "", "internal: the node's name")
	childAddr   = flag.String("child-addr", "", "internal: the redis-server's address")
	childPG     = flag.String("child-pg", "", "internal: the PostgreSQL URL")
	childTasks  = flag.Int("child-tasks", 0, "internal: the number of tasks")
	childCron   = flag.String("child-cron", everySecond, "internal: the cron spec of the ndigo tasks")
	childEtcd   = flag.String("child-etcd", "", "internal: the etcd endpoints, comma-separated")
	childTTL    = flag.Duration("child-ttl", 10*time.Second, "internal: the lock TTL")
	childFlush  = flag.Bool("child-flush", false, "internal: write every run as it starts")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *childSystem != "" {
		runChild()
		return
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *failover != "" {
		runFailover(set)
		return
	}
	special := *killMode || *graceful || *postgres
	if special && !set["nodes"] {
		*nodesFlag = "10"
	}
	if special && !set["tasks"] {
		*tasksFlag = "100"
	}
	mode := ""
	switch {
	case *killMode && *graceful:
		log.Fatal("scalebench: -kill and -graceful are separate runs")
	case *killMode:
		mode = "kill"
	case *graceful:
		mode = "graceful"
	}
	systems := strings.Split(*systemsFlag, ",")
	switch {
	case mode != "":
		systems = []string{"ndigo"}
		if *postgres {
			systems = append(systems, "ndigo-pg")
		}
	case *postgres:
		systems = []string{"ndigo-pg"}
	}
	if *cronFlag != everySecond {
		if !set["systems"] && mode == "" && !*postgres {
			systems = []string{"ndigo"}
		}
		for _, sys := range systems {
			if sys != "ndigo" && sys != "ndigo-pg" {
				log.Fatalf("scalebench: -cron %q: the gocron peers take no H and run every second only; -systems may name ndigo and ndigo-pg", *cronFlag)
			}
		}
	}
	if err := scheduling.Validate(scheduling.NewTask(func(context.Context) error { return nil },
		scheduling.Name(taskName(0)), scheduling.Cron(*cronFlag))); err != nil {
		log.Fatalf("scalebench: -cron: %v", err)
	}
	nodes, tasks := ints(*nodesFlag), ints(*tasksFlag)
	if *duration < 4*time.Second || *duration%time.Second != 0 {
		log.Fatal("scalebench: -duration must be whole seconds, at least 4s")
	}

	pg := postgresFor(systems)
	if pg != nil {
		defer pg.Stop()
	}

	type key struct {
		nodes, tasks int
		system       string
	}
	results := map[key][]result{}
	var order []key
	for r := range *runsFlag {
		for _, n := range nodes {
			for _, t := range tasks {
				for _, sys := range systems {
					k := key{n, t, sys}
					if r == 0 {
						order = append(order, k)
					}
					res, err := measure(sys, n, t, mode, pg)
					if err != nil {
						log.Fatalf("scalebench: %d × %d %s: %v", n, t, sys, err)
					}
					log.Printf("run %d: %d × %d %s: %s", r+1, n, t, sys, res.summary())
					results[k] = append(results[k], res)
				}
			}
		}
	}

	fmt.Printf("Command: `cd bench && go run ./cmd/scalebench %s`\n\n", shellJoin(os.Args[1:]))
	switch mode {
	case "":
		fmt.Printf("Every node is a process of its own with its own client, on one redis-server (a fresh one per row and run)%s; every task "+
			"`%s` with its own lock (TTL %v); %v windows after a %v warm-up%s; medians of %d runs. "+
			"Round trips are counted on the client (go-redis hook: 1 per command, 1 per pipeline; pgx tracer: 1 per query, exec or batch; "+
			"pub/sub not counted) and include every call a node makes (heartbeats, polls, records); Redis commands and µs are INFO commandstats' "+
			"deltas (inside scripts too, `info` excluded); lateness is a run's start minus its fire instant (gocron gives a job no instant: "+
			"the whole second at or before the start stands for it, so its lateness cannot show above a second); CPU is the nodes' user+system "+
			"time in the window in cores (the machine has %d); the busiest second is the most fires due at one second of the window, by the "+
			"schedule; load is /proc/loadavg's 1-minute figure at the window's end.\n\n",
			pgNote(systems), *cronFlag, *ttlFlag, *duration, *warmup, alignNote(), *runsFlag, numCPU())
		fmt.Println("| nodes × tasks | system | fires run / expected | fires run twice | fires missed | busiest second's fires | client round trips per fire | Redis commands per fire | Redis µs per fire | p50 lateness | p99 lateness | nodes' CPU | load |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, k := range order {
			m := medians(results[k])
			rt, cmds, usec := perFire(m.rtPerFire), perFire(m.cmdsPerFire), fmt.Sprintf("%.1f", m.usecPerFire)
			switch k.system {
			case "ndigo-pg":
				cmds, usec = "–", "–"
			case "ndigo-etcd": // its client's round trips are not counted
				rt, cmds, usec = "–", "–", "–"
			}
			fmt.Printf("| %d × %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n",
				k.nodes, thousands(k.tasks), label(k.system), thousands(int(m.fires)), thousands(int(m.expected)),
				thousands(int(m.doubles)), thousands(int(m.missed)), thousands(int(m.busiest)), rt, cmds, usec,
				ms(m.p50), ms(m.p99), m.cpu, m.load)
		}
	case "kill":
		fmt.Printf("%d ndigo nodes (processes, Spread, LockTTL %v, every task `%s`) × %s tasks; %v into the %v window "+
			"(after a %v warm-up%s) the first half of the nodes get SIGKILL. For the tasks those nodes owned just before (TaskInfo.Owner, by the "+
			"majority of the nodes' views): the largest gap between the kill and a task's first run after it, against the bound lock TTL + one "+
			"period (the longest gap between a task's fires); fires missed outside (kill, kill + bound]; doubles over every task; medians of %d runs.\n\n",
			nodes[0], *ttlFlag, *cronFlag, thousands(tasks[0]), killAt(), *duration, *warmup, alignNote(), *runsFlag)
		fmt.Println("| driver | nodes × tasks | tasks moved | largest gap kill → first run | bound | fires missed after the bound | fires missed within it (tasks moved) | fires missed (other tasks) | fires run twice | fires run / expected | load |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, k := range order {
			m := medians(results[k])
			fmt.Printf("| %s | %d × %s | %.0f | %s | %v | %.0f | %.0f | %.0f | %.0f | %s / %s | %.2f |\n",
				driverName(k.system), k.nodes, thousands(k.tasks), m.moved, sec(m.maxGap), time.Duration(m.bound)*time.Second, m.missedAfter, m.missedWithin, m.missedOthers,
				m.doubles, thousands(int(m.fires)), thousands(int(m.expected)), m.load)
		}
	case "graceful":
		fmt.Printf("%d ndigo nodes (processes, Spread, LockTTL %v, every task `%s`) × %s tasks; in the middle of the %v window "+
			"(after a %v warm-up%s) the first half of the nodes get SIGTERM (Scheduler.Stop: they leave their group and the others take "+
			"their tasks); medians of %d runs.\n\n", nodes[0], *ttlFlag, *cronFlag, thousands(tasks[0]), *duration, *warmup, alignNote(), *runsFlag)
		fmt.Println("| driver | nodes × tasks | fires run / expected | fires missed | fires run twice | p99 lateness | load |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|")
		for _, k := range order {
			m := medians(results[k])
			fmt.Printf("| %s | %d × %s | %s / %s | %.0f | %.0f | %s | %.2f |\n", driverName(k.system), k.nodes, thousands(k.tasks),
				thousands(int(m.fires)), thousands(int(m.expected)), m.missed, m.doubles, ms(m.p99), m.load)
		}
	}
	if *breakdown {
		fmt.Println()
		fmt.Println("Per fire by kind, over all runs of each row (client: the nodes' round trips; server: INFO commandstats' calls):")
		fmt.Println()
		for _, k := range order {
			printBreakdown(fmt.Sprintf("%d × %s %s", k.nodes, thousands(k.tasks), label(k.system)), results[k])
		}
	}
}

// alignNote describes the choice of the window's opening second, when the
// schedule is not every second (where every second is alike).
func alignNote() string {
	if *cronFlag == everySecond {
		return ""
	}
	return fmt.Sprintf(", opening at a half second at least %ds after every task's first fire, and the first of the next %d whose ends are "+
		"not within %ds of a herd (a second with more than twice the mean fires due per second)", edgeMargin, alignSearch, edgeMargin)
}

// perFire formats a count per fire with 2 decimals, or 3 below 0.1.
func perFire(v float64) string {
	if v != 0 && v < 0.1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// shellJoin joins args for a shell, quoting those that need it.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t'\"*?$`\\|&;<>()[]{}!#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

func pgNote(systems []string) string {
	if slices.Contains(systems, "ndigo-pg") {
		return " (ndigo-pg: on one private PostgreSQL, started once, instead)"
	}
	return ""
}

func label(system string) string {
	switch system {
	case "ndigo":
		return "ndigo (Redis)"
	case "ndigo-pg":
		return "ndigo (PostgreSQL)"
	case "ndigo-etcd":
		return "ndigo (etcd)"
	case "gocron-locker":
		return "gocron v2 + per-job locker"
	case "gocron-elector":
		return "gocron v2 + leader election"
	}
	return system
}

func driverName(system string) string {
	if system == "ndigo-pg" {
		return "PostgreSQL"
	}
	return "Redis"
}

func killAt() time.Duration { return (*duration / 4).Truncate(time.Second) }

func ints(s string) []int {
	var xs []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("scalebench: bad count %q in %q", f, s)
		}
		xs = append(xs, n)
	}
	return xs
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(d float64) string {
	if d >= 1000 {
		return fmt.Sprintf("%.2f s", d/1000)
	}
	return fmt.Sprintf("%.1f ms", d)
}

func sec(d float64) string {
	if math.IsInf(d, 1) {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d)
}

func numCPU() int { return runtime.NumCPU() }

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}

// result is one row-run's figures.
type result struct {
	expected, fires, doubles, missed float64
	busiest, extra                   float64 // the most fires due in one second; runs of no fire due
	bound                            float64 // kill mode: lock TTL + the longest gap between a task's fires, in seconds
	rtPerFire, cmdsPerFire           float64
	usecPerFire, p50, p99            float64 // p50, p99 in ms
	cpu, load                        float64
	// kill mode
	moved, maxGap, missedAfter, missedWithin, missedOthers float64

	rt, calls    map[string]int64 // window deltas: client round trips by kind, server calls by command
	clientScript int64            // client evalsha+eval, for the sanity check
}

func (r result) summary() string {
	s := fmt.Sprintf("fires %.0f/%.0f, doubles %.0f, missed %.0f, busiest second %.0f, rt/fire %s, cmds/fire %s, µs/fire %.1f, p50 %s, p99 %s, cpu %.2f, load %.2f",
		r.fires, r.expected, r.doubles, r.missed, r.busiest, perFire(r.rtPerFire), perFire(r.cmdsPerFire), r.usecPerFire, ms(r.p50), ms(r.p99), r.cpu, r.load)
	if r.extra > 0 {
		s += fmt.Sprintf("; %.0f runs of no fire due", r.extra)
	}
	if r.calls != nil {
		s += fmt.Sprintf("; scripts: client %d, server %d", r.clientScript, r.calls["evalsha"]+r.calls["eval"])
	}
	if r.moved > 0 {
		s += fmt.Sprintf("; moved %.0f, max gap %s, missed after bound %.0f, within %.0f, others %.0f", r.moved, sec(r.maxGap), r.missedAfter, r.missedWithin, r.missedOthers)
	}
	return s
}

func medians(rs []result) result {
	med := func(get func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	return result{
		expected: med(func(r result) float64 { return r.expected }), fires: med(func(r result) float64 { return r.fires }),
		doubles: med(func(r result) float64 { return r.doubles }), missed: med(func(r result) float64 { return r.missed }),
		busiest: med(func(r result) float64 { return r.busiest }), extra: med(func(r result) float64 { return r.extra }),
		bound: med(func(r result) float64 { return r.bound }), maxGap: med(func(r result) float64 { return r.maxGap }),
		rtPerFire: med(func(r result) float64 { return r.rtPerFire }), cmdsPerFire: med(func(r result) float64 { return r.cmdsPerFire }),
		usecPerFire: med(func(r result) float64 { return r.usecPerFire }), p50: med(func(r result) float64 { return r.p50 }),
		p99: med(func(r result) float64 { return r.p99 }), cpu: med(func(r result) float64 { return r.cpu }),
		load: med(func(r result) float64 { return r.load }), moved: med(func(r result) float64 { return r.moved }),
		missedAfter:  med(func(r result) float64 { return r.missedAfter }),
		missedWithin: med(func(r result) float64 { return r.missedWithin }), missedOthers: med(func(r result) float64 { return r.missedOthers }),
	}
}

func printBreakdown(name string, rs []result) {
	var fires float64
	rt, calls := map[string]int64{}, map[string]int64{}
	for _, r := range rs {
		fires += r.fires
		for k, v := range r.rt {
			rt[k] += v
		}
		for k, v := range r.calls {
			calls[k] += v
		}
	}
	if fires == 0 {
		return
	}
	list := func(m map[string]int64) string {
		type kv struct {
			k string
			v int64
		}
		var kvs []kv
		for k, v := range m {
			if v > 0 {
				kvs = append(kvs, kv{k, v})
			}
		}
		sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k })
		var parts []string
		for _, e := range kvs {
			parts = append(parts, fmt.Sprintf("`%s` %.3f", e.k, float64(e.v)/fires))
		}
		return strings.Join(parts, ", ")
	}
	named := map[string]int64{}
	for k, v := range rt {
		named[nameScript(k)] += v
	}
	fmt.Printf("- %s: client: %s\n", name, list(named))
	if len(calls) > 0 {
		fmt.Printf("  - server: %s\n", list(calls))
	}
}

// scriptNames maps the first 8 digits of the SHA-1 of each of redislocks'
// scripts to its file name, read from the ndigo module's source (the
// replace directive's ../ from bench/); empty if it is not there.
var scriptNames = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	dir := "../redislocks"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ndigo/ndigo" && d.Replace != nil {
				dir = filepath.Join(d.Replace.Path, "redislocks")
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	src := map[string]string{}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			src[filepath.Base(f)] = string(b)
		}
	}
	// Two scripts are made of several files (redislocks/scripts.go).
	src["claim.lua"] = src["claimable.lua"] + src["claim.lua"]
	src["acquireclaim.lua"] = src["claimable.lua"] + "local function acquire(KEYS, ARGV)\n" + src["acquire.lua"] + "\nend\n" + src["acquireclaim.lua"]
	for name, text := range src {
		m[fmt.Sprintf("%x", sha1.Sum([]byte(text)))[:8]] = "redislocks/" + name
	}
	return m
})

// nameScript puts the script's file name beside its SHA in a kind.
func nameScript(kind string) string {
	f := strings.Fields(kind)
	if len(f) >= 2 && strings.HasPrefix(f[0], "evalsha") {
		if n, ok := scriptNames()[f[1]]; ok {
			return f[0] + " " + f[1] + " (" + n + ")" + strings.TrimPrefix(kind, f[0]+" "+f[1])
		}
	}
	return kind
}

// startPostgres starts the private PostgreSQL and creates pglocks' tables.
// postgresFor starts the private PostgreSQL server if systems include
// ndigo-pg, and returns nil otherwise; it exits the program if the server
// does not start.
func postgresFor(systems []string) *pgproc.Server {
	if !slices.Contains(systems, "ndigo-pg") {
		return nil
	}
	pg, err := startPostgres()
	if err != nil {
		log.Fatal(err)
	}
	return pg
}

func startPostgres() (*pgproc.Server, error) {
	srv, err := pgproc.Start()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		srv.Stop()
		return nil, err
	}
	defer pool.Close()
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
	if err == nil {
		err = d.CreateSchema(ctx)
		_ = d.Close()
	}
	if err == nil {
		var st *pglocks.Store
		if st, err = pglocks.NewStore(pglocks.StoreOptions{Pool: pool, Namespace: "bench"}); err == nil {
			err = st.CreateSchema(ctx)
		}
	}
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// A proc is one node's process, seen from the parent.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	msgs  chan message
	done  chan struct{} // closed when its stdout ends

	mu   sync.Mutex // protects runs
	runs []runRec
}

// A runRec is one run of a task reported by a node.
type runRec struct {
	task   int
	fire   int64 // Unix seconds
	lateUs int64
}

func (r runRec) start() time.Time {
	return time.Unix(r.fire, 0).Add(time.Duration(r.lateUs) * time.Microsecond)
}

// A store is where a row-run's nodes keep their locks and state: a fresh
// redis-server (ndigo, and the gocron peers' locks and lease), the private
// PostgreSQL emptied (ndigo-pg) or a fresh one-member etcd (ndigo-etcd).
type store struct {
	addr  string        // the redis-server's address
	admin *redis.Client // a client of it, for INFO
	pgURL string
	etcd  string // the etcd endpoints, comma-separated
	close func()
}

// openStore prepares the store of a row-run of system; the caller closes it.
func openStore(ctx context.Context, system string, pg *pgproc.Server) (*store, error) {
	switch system {
	case "ndigo-pg":
		if pg == nil {
			return nil, errors.New("ndigo-pg: no PostgreSQL started")
		}
		if err := resetPostgres(ctx, pg.URL()); err != nil {
			return nil, err
		}
		return &store{pgURL: pg.URL(), close: func() {}}, nil
	case "ndigo-etcd":
		c, err := etcdproc.StartCluster(etcdproc.Options{})
		if err != nil {
			return nil, err
		}
		return &store{etcd: strings.Join(c.Endpoints(), ","), close: c.Stop}, nil
	}
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		return nil, err
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	return &store{addr: srv.Addr(), admin: admin, close: func() { _ = admin.Close(); srv.Stop() }}, nil
}

// spawn starts a node of system named name, with tasks tasks, on st.
func spawn(system, name string, tasks int, st *store) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-child-system", system, "-child-node", name, "-child-tasks", strconv.Itoa(tasks),
		"-child-addr", st.addr, "-child-pg", st.pgURL, "-child-etcd", st.etcd, "-child-cron", *cronFlag,
		"-child-ttl", ttlFlag.String(), "-child-flush="+strconv.FormatBool(*failover != ""))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, msgs: make(chan message, 16), done: make(chan struct{})}
	go p.read(stdout)
	return p, nil
}

func (p *proc) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "R "):
			f := strings.Fields(line)
			if len(f) != 4 {
				continue
			}
			task, _ := strconv.Atoi(f[1])
			fire, _ := strconv.ParseInt(f[2], 10, 64)
			late, _ := strconv.ParseInt(f[3], 10, 64)
			p.mu.Lock()
			p.runs = append(p.runs, runRec{task, fire, late})
			p.mu.Unlock()
		case strings.HasPrefix(line, "J "):
			var m message
			if err := json.Unmarshal([]byte(line[2:]), &m); err == nil {
				p.msgs <- m
			}
		}
	}
}

// await returns the next message of type typ (an "error" fails it).
func (p *proc) await(typ string, timeout time.Duration) (message, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case m := <-p.msgs:
			if m.Type == "error" {
				return m, fmt.Errorf("node %s: %s", p.name, m.Error)
			}
			if m.Type == typ {
				return m, nil
			}
		case <-p.done:
			select {
			case m := <-p.msgs:
				if m.Type == typ {
					return m, nil
				}
			default:
			}
			return message{}, fmt.Errorf("node %s exited before its %q message", p.name, typ)
		case <-t.C:
			return message{}, fmt.Errorf("node %s: no %q message within %v", p.name, typ, timeout)
		}
	}
}

// ask sends cmd to every proc and returns their answers of type cmd.
func ask(ps []*proc, cmd string) ([]message, error) {
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
			return nil, fmt.Errorf("node %s: %w", p.name, err)
		}
	}
	var ms []message
	for _, p := range ps {
		m, err := p.await(cmd, 10*time.Second)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// terminate stops ps with SIGTERM, at once, and returns their final
// messages.
func terminate(ps []*proc) ([]message, error) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	var ms []message
	var errs []error
	for _, p := range ps {
		m, err := p.await("final", 30*time.Second)
		<-p.done
		_ = p.cmd.Wait()
		if err == nil && m.Error != "" {
			err = fmt.Errorf("node %s stopped with: %s", p.name, m.Error)
		}
		errs = append(errs, err)
		ms = append(ms, m)
	}
	return ms, errors.Join(errs...)
}

func killAll(ps []*proc) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, p := range ps {
		<-p.done
		_ = p.cmd.Wait()
	}
}

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// measure runs one row-run.
func measure(system string, n, tasks int, mode string, pg *pgproc.Server) (result, error) {
	ctx := context.Background()
	st, err := openStore(ctx, system, pg)
	if err != nil {
		return result{}, err
	}
	defer st.close()
	admin := st.admin
	var ps []*proc
	for i := range n {
		p, err := spawn(system, "n"+strconv.Itoa(i), tasks, st)
		if err != nil {
			killAll(ps)
			return result{}, err
		}
		ps = append(ps, p)
	}
	alive := ps
	defer func() { killAll(alive) }() // after an error; a no-op once they exited
	for _, p := range ps {
		if _, err := p.await("ready", time.Minute); err != nil {
			return result{}, err
		}
	}
	// The schedule around the window, computed during the warm-up: the
	// fires due, and where the window had best open.
	spec := *cronFlag
	if !strings.HasPrefix(system, "ndigo") {
		spec = everySecond
	}
	search, warmSpan := alignSearch, alignSearch
	if spec == everySecond {
		search, warmSpan = 1, 0 // every second is alike
	}
	ready := time.Now().Truncate(time.Second)
	simFrom := ready.Add(-edgeMargin * time.Second)
	simTo := ready.Add(*warmup + *duration + time.Duration(warmSpan+search+2*edgeMargin+10)*time.Second)
	type simResult struct {
		due [][]int64
		err error
	}
	simc := make(chan simResult, 1)
	go func() {
		t := time.Now()
		due, err := dueFires(spec, tasks, simFrom, simTo)
		if err == nil && spec != everySecond {
			log.Printf("scalebench: the schedule of %d tasks over %v computed in %v", tasks, simTo.Sub(simFrom), time.Since(t).Round(time.Millisecond))
		}
		simc <- simResult{due, err}
	}()
	time.Sleep(*warmup)
	sim := <-simc
	if sim.err != nil {
		return result{}, fmt.Errorf("the schedule: %w", sim.err)
	}
	due := sim.due
	// The window opens at a half second: its fires are the whole seconds
	// after it, whose work starts half a second later.
	open, err := chooseOpen(due, simFrom, ready, time.Now(), search, simTo)
	if err != nil {
		return result{}, err
	}
	if spec != everySecond {
		log.Printf("scalebench: the window opens at %s, %v after the nodes were ready", open.Format("15:04:05.0"), open.Sub(ready).Round(time.Second))
	}
	sleepUntil(open)
	m0, err := ask(ps, "mark")
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	var s0, s1 stats
	if admin != nil {
		if s0, err = commandStats(ctx, admin); err != nil {
			return result{}, err
		}
	}
	closeAt := open.Add(*duration)

	var (
		victims  []*proc
		killTime time.Time
		moved    = map[int]bool{}
	)
	switch mode {
	case "kill", "graceful":
		at := open.Add(killAt())
		if mode == "graceful" {
			at = open.Add((*duration / 2).Truncate(time.Second))
		}
		victims, alive = ps[:n/2], ps[n/2:]
		sleepUntil(at.Add(-300 * time.Millisecond))
		owners, err := ask(ps, "owners")
		if err != nil {
			return result{}, err
		}
		killed := map[string]bool{}
		for _, p := range victims {
			killed[p.name] = true
		}
		for i := range tasks {
			votes := map[string]int{}
			for _, m := range owners {
				votes[m.Owners[taskName(i)]]++
			}
			best, most := "", 0
			for o, v := range votes {
				if v > most || v == most && o < best {
					best, most = o, v
				}
			}
			if killed[best] {
				moved[i] = true
			}
		}
		sleepUntil(at)
		killTime = time.Now()
		if mode == "kill" {
			killAll(victims)
		} else if _, err := terminate(victims); err != nil {
			return result{}, err
		}
	}

	sleepUntil(closeAt)
	m1, err := ask(alive, "mark")
	if err != nil {
		return result{}, err
	}
	t1 := time.Now()
	if admin != nil {
		if s1, err = commandStats(ctx, admin); err != nil {
			return result{}, err
		}
	}
	load := loadAvg()
	time.Sleep(*grace)
	if _, err := terminate(alive); err != nil {
		return result{}, err
	}
	alive = nil

	// The fires of the window: those due at the whole seconds strictly
	// inside it.
	first, last := t0.Unix()+1, t1.Unix()
	if time.Unix(last, 0).Equal(t1) {
		last--
	}
	if last > simTo.Unix() {
		return result{}, fmt.Errorf("the window ends at %v, after the schedule computed (to %v)", t1, simTo)
	}
	res := result{load: load, bound: (*ttlFlag + longestGap(due, simTo.Sub(simFrom))).Seconds()}
	dueIn := func(i int) []int64 {
		lo, _ := slices.BinarySearch(due[i], first)
		hi, _ := slices.BinarySearch(due[i], last+1)
		return due[i][lo:hi]
	}
	perSecond := map[int64]int{}
	expected := map[[2]int64]bool{}
	for i := range tasks {
		for _, s := range dueIn(i) {
			expected[[2]int64{int64(i), s}] = true
			perSecond[s]++
		}
	}
	res.expected = float64(len(expected))
	for _, c := range perSecond {
		res.busiest = max(res.busiest, float64(c))
	}
	if res.expected == 0 {
		return result{}, fmt.Errorf("no fire of %q is due in the %v window: lengthen -duration", spec, *duration)
	}
	ran := map[[2]int64]int{}
	var lates []float64
	firstAfter := map[int]time.Time{}
	for _, p := range ps {
		for _, r := range p.runs {
			if !killTime.IsZero() && moved[r.task] && r.start().After(killTime) {
				if f, ok := firstAfter[r.task]; !ok || r.start().Before(f) {
					firstAfter[r.task] = r.start()
				}
			}
			if r.fire < first || r.fire > last {
				continue
			}
			ran[[2]int64{int64(r.task), r.fire}]++
			lates = append(lates, float64(r.lateUs)/1000)
		}
	}
	for f, c := range ran {
		res.fires++
		if c > 1 {
			res.doubles++
		}
		if !expected[f] {
			res.extra++
			if os.Getenv("SCALEBENCH_LOG") == "info" {
				fmt.Fprintf(os.Stderr, "ran, not due: task%d fire=%s\n", f[0], time.Unix(f[1], 0).UTC().Format(time.RFC3339))
			}
		}
	}
	bound := time.Duration(res.bound * float64(time.Second))
	for i := range tasks {
		for _, s := range dueIn(i) {
			if ran[[2]int64{int64(i), s}] > 0 {
				continue
			}
			res.missed++
			if os.Getenv("SCALEBENCH_LOG") == "info" {
				fmt.Fprintf(os.Stderr, "missed: task%d fire=%s\n", i, time.Unix(s, 0).UTC().Format(time.RFC3339))
			}
			if mode != "kill" {
				continue
			}
			inWindow := time.Unix(s, 0).After(killTime) && !time.Unix(s, 0).After(killTime.Add(bound))
			switch {
			case !moved[i]:
				res.missedOthers++
			case inWindow:
				res.missedWithin++
			default:
				res.missedAfter++
			}
		}
	}
	if mode == "kill" {
		res.moved = float64(len(moved))
		for i := range moved {
			f, ok := firstAfter[i]
			if !ok {
				res.maxGap = math.Inf(1)
				break
			}
			res.maxGap = max(res.maxGap, f.Sub(killTime).Seconds())
		}
	}
	slices.Sort(lates)
	if len(lates) > 0 {
		res.p50 = lates[len(lates)/2]
		res.p99 = lates[min(len(lates)-1, len(lates)*99/100)]
	}

	// Round trips and CPU of the nodes alive at both ends of the window.
	res.rt = map[string]int64{}
	var cpu int64
	for _, m := range m1 {
		for _, b := range m0 {
			if b.Node != m.Node {
				continue
			}
			for k, v := range m.RT {
				res.rt[k] += v - b.RT[k]
			}
			cpu += m.CPU - b.CPU
		}
	}
	var rt int64
	for k, v := range res.rt {
		rt += v
		if strings.HasPrefix(k, "evalsha") || strings.HasPrefix(k, "eval ") || k == "eval" {
			res.clientScript += v
		}
	}
	window := t1.Sub(t0).Seconds()
	res.cpu = float64(cpu) / 1e6 / window
	if admin != nil {
		res.calls = map[string]int64{}
		var calls, usec int64
		for k, v := range s1.calls {
			if k == "info" {
				continue
			}
			res.calls[k] = v - s0.calls[k]
			calls += v - s0.calls[k]
			usec += s1.usec[k] - s0.usec[k]
		}
		if res.fires > 0 {
			res.cmdsPerFire = float64(calls) / res.fires
			res.usecPerFire = float64(usec) / res.fires
		}
	}
	if res.fires > 0 {
		res.rtPerFire = float64(rt) / res.fires
	}
	return res, nil
}

// dueFires returns, for each task i, the fires (Unix seconds, ascending) of
// spec in (from, to] as ndigo computes them, H resolved from the task's
// name: an unlocked twin of every task on a scheduler with a fake clock in
// the local zone (the nodes' zone), stepped a second at a time.
func dueFires(spec string, tasks int, from, to time.Time) ([][]int64, error) {
	ctx := context.Background()
	fc := clockwork.NewFakeClockAt(from)
	s := scheduling.New(scheduling.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler)})
	var mu sync.Mutex
	due := make([][]int64, tasks)
	for i := range tasks {
		err := s.Add(scheduling.NewTask(func(ctx context.Context) error {
			r, _ := scheduling.RunFromContext(ctx)
			mu.Lock()
			due[i] = append(due[i], r.Fire.Unix())
			mu.Unlock()
			return nil
		}, scheduling.Name(taskName(i)), scheduling.Cron(spec)))
		if err != nil {
			return nil, err
		}
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	err := schedulingtest.Step(ctx, fc, to.Sub(from), time.Second, s)
	if stopErr := s.Stop(ctx); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, err
	}
	for _, d := range due {
		slices.Sort(d)
	}
	return due, nil
}

// chooseOpen returns when the window opens, from the fires due in (from,
// known]: at a half second o+0.5s. o is after now, and at least edgeMargin
// seconds after every task's first fire after ready, so that the window
// sees no first fire of a node (a cold client: its pool grows, its scripts
// get loaded). Among the next search such seconds it is the first whose
// ends are not within edgeMargin seconds of a herd (a second with more than
// twice the mean fires due per second), so that a herd's work does not
// straddle an end; failing that, the one with the fewest fires due so near
// its ends. The schedule must be known to edgeMargin seconds after the
// window.
func chooseOpen(due [][]int64, from, ready, now time.Time, search int, known time.Time) (time.Time, error) {
	perSecond := map[int64]int{}
	total, warm := 0, ready.Unix()
	for _, d := range due {
		if i, _ := slices.BinarySearch(d, ready.Unix()+1); i < len(d) {
			warm = max(warm, d[i])
		}
		for _, s := range d {
			perSecond[s]++
		}
		total += len(d)
	}
	herd := 2 * float64(total) / known.Sub(from).Seconds()
	d := int64(*duration / time.Second)
	near := func(e int64) (n, peak int) {
		for s := e - edgeMargin + 1; s <= e+edgeMargin; s++ {
			n += perSecond[s]
			peak = max(peak, perSecond[s])
		}
		return n, peak
	}
	base := max(now.Truncate(time.Second).Unix()+1, warm+edgeMargin)
	best, bestCost := int64(-1), math.MaxInt
	for o := base; o < base+int64(search) && o+d+edgeMargin <= known.Unix(); o++ {
		n1, p1 := near(o)
		n2, p2 := near(o + d)
		if float64(max(p1, p2)) <= herd {
			best = o
			break
		}
		if n1+n2 < bestCost {
			best, bestCost = o, n1+n2
		}
	}
	if best < 0 {
		return time.Time{}, fmt.Errorf("the schedule was computed too late, to %v only: lengthen -warmup", known)
	}
	return time.Unix(best, 500*int64(time.Millisecond)), nil
}

// longestGap returns the longest gap between two fires of a task in due,
// or span if no task fires twice in it.
func longestGap(due [][]int64, span time.Duration) time.Duration {
	var gap int64
	for _, d := range due {
		for j := 1; j < len(d); j++ {
			gap = max(gap, d[j]-d[j-1])
		}
	}
	if gap == 0 {
		return span
	}
	return time.Duration(gap) * time.Second
}

// resetPostgres empties pglocks' tables between row-runs.
func resetPostgres(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'ndigo_%'`)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return err
		}
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(tables) == 0 {
		return nil
	}
	_, err = pool.Exec(ctx, "TRUNCATE "+strings.Join(tables, ", "))
	return err
}

// stats are INFO commandstats' calls and usec by command.
type stats struct{ calls, usec map[string]int64 }

func commandStats(ctx context.Context, c *redis.Client) (stats, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return stats{}, err
	}
	s := stats{calls: map[string]int64{}, usec: map[string]int64{}}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls[name] = n
			case "usec":
				s.usec[name] = n
			}
		}
	}
	return s, nil
}
