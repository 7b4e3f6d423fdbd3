// Command redislockbench measures the ndigo Redis lock driver side by side
// with bsm/redislock, redsync v4 and a raw go-redis script loop, on one
// private redis-server started for the run, and prints a Markdown table of
// medians over several runs with ratios computed within each run.
//
//	cd bench && go run ./cmd/redislockbench -runs 5
//
// Scenarios: acquire+release cycles on distinct keys (one per goroutine) and
// on one shared key, at 1, 16 and 64 goroutines; and release-to-waiter
// handoff latency with one holder and one waiter. Contenders wait as they
// are meant to: ndigo with locks.Wait (woken by the release notification),
// the peers with their own retry loops, at -retry and at their own
// default or recommended interval (bsm/redislock's README: linear 100ms;
// redsync: random 50-250ms).
//
// With -callgrind the server runs under valgrind's callgrind, and each cell
// also reports the instructions it ran per acquisition: a figure that a busy
// machine does not move, where throughput and latency are then meaningless
// (everything is about 50 times slower; use -duration 2s or more).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/internal/redisproc"
)

var (
	duration = flag.Duration("duration", 2*time.Second, "measured time per cycle scenario")
	runs     = flag.Int("runs", 5, "runs; the table shows medians")
	retry    = flag.Duration("retry", time.Millisecond, "peers' retry interval on a held key")
	handoffs = flag.Int("handoffs", 1000, "handoffs measured per contender and run")
	concs    = flag.String("goroutines", "1,16,64", "goroutine counts")
	scripts  = flag.String("scripts", "../redislocks", "directory of the driver's .lua scripts, for the raw same-Lua loop")
	only     = flag.String("only", "", "comma-separated parts of the names of the contenders to run (default all)")
	modes    = flag.String("keys", "distinct,shared", "key modes to run: distinct, shared")
	cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the bench process to this file")
	cgrind   = flag.Bool("callgrind", false, "run redis-server under valgrind's callgrind and add the instructions it runs per acquisition (server kinstr/acq), which other load on the machine does not move; throughput is then meaningless")
)

// cg is the server under callgrind, with -callgrind.
var cg *callgrindServer

type factory struct {
	name string
	make func(*redis.Client) (*lockbench.Contender, error)
	// slowRetry marks a peer at its own default retry interval: the
	// handoff scenario, which waits for each of its 1000 retries, skips it.
	slowRetry bool
}

func factories() []factory {
	all := []factory{
		{name: ours, make: ndigo},
		{name: "bsm/redislock", make: func(c *redis.Client) (*lockbench.Contender, error) { return bsm(c, *retry), nil }},
		{name: "bsm/redislock, retry 100ms", make: func(c *redis.Client) (*lockbench.Contender, error) { return bsm(c, bsmRecommendedRetry), nil }, slowRetry: true},
		{name: "redsync v4", make: func(c *redis.Client) (*lockbench.Contender, error) { return redsyncV4(c, *retry), nil }},
		{name: "redsync v4, default retry", make: func(c *redis.Client) (*lockbench.Contender, error) { return redsyncV4(c, 0), nil }, slowRetry: true},
		{name: "raw script, INCR token", make: func(c *redis.Client) (*lockbench.Contender, error) { return raw(c, *retry), nil }},
		{name: "raw script, same Lua", make: func(c *redis.Client) (*lockbench.Contender, error) { return rawSame(c, *retry, *scripts) }},
	}
	return lockbench.Select(all, func(f factory) string { return f.name }, *only)
}

// metrics are the Redis figures of a cell, per successful acquisition:
// client commands (round trips), server commands (scripts' inner calls
// too), and Redis CPU time (commandstats usec).
var metrics = []lockbench.Metric{
	{Header: "client cmds/acq", Format: "%.2f"},
	{Header: "server cmds/acq", Format: "%.2f"},
	{Header: "server µs/acq", Format: "%.1f"},
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var addr string
	var stopServer func()
	if *cgrind {
		s, err := startCallgrind()
		if err != nil {
			log.Fatal(err)
		}
		cg, addr, stopServer = s, s.addr, s.stop
		metrics = append(metrics, lockbench.Metric{Header: "server kinstr/acq", Format: "%.1f"})
	} else {
		srv, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			log.Fatal(err)
		}
		addr, stopServer = srv.Addr(), srv.Stop
	}
	defer stopServer()
	fatalf := func(format string, args ...any) {
		stopServer()
		log.Fatalf(format, args...)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	info, _ := admin.InfoMap(ctx, "server").Result()
	version := info["Server"]

	ns, err := lockbench.ParseGoroutines(*concs)
	if err != nil {
		fatalf("bad -goroutines: %v", err)
	}
	byName := map[string]factory{}
	var names, handoffs []string
	for _, f := range factories() {
		byName[f.name] = f
		names = append(names, f.name)
		if !f.slowRetry {
			handoffs = append(handoffs, f.name)
		}
	}
	results, err := lockbench.Run(ctx, lockbench.Plan{
		Runs: *runs, Goroutines: ns, Modes: *modes, Names: names, Handoffs: handoffs, Metrics: metrics,
		Cycles: func(ctx context.Context, name string, n int, shared bool) (lockbench.Cell, error) {
			return cycles(ctx, addr, admin, byName[name], n, shared)
		},
		Handoff: func(ctx context.Context, name string) (lockbench.Cell, error) {
			return handoff(ctx, addr, admin, byName[name])
		},
	})
	if lockbench.Interrupted(err) {
		return
	}
	if err != nil {
		fatalf("%v", err)
	}
	report(os.Stdout, results, names, version)
}

// counter is a go-redis hook counting the commands a client sends.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// serverCalls sums INFO commandstats calls, leaving out the admin
// commands the benchmark itself sends.
func serverCalls(ctx context.Context, admin *redis.Client) (total, usec int64, err error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	// redsync sends SET NX directly; the others run scripts, whose inner
	// commands' time is already in the script's.
	scripted := strings.Contains(info, "cmdstat_eval")
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch name {
		case "cmdstat_info", "cmdstat_flushall", "cmdstat_script|flush", "cmdstat_ping":
			continue
		}
		v, rest, _ := strings.Cut(rest, ",usec=")
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		// Commands called by scripts count their time twice: in their own
		// line and in their script's. Only top-level commands add time.
		if strings.HasPrefix(name, "cmdstat_eval") || !scripted {
			u, _, _ := strings.Cut(rest, ",")
			m, _ := strconv.ParseInt(u, 10, 64)
			usec += m
		}
	}
	return total, usec, nil
}

// setup flushes the server and returns a counted client and its contender.
func setup(ctx context.Context, addr string, admin *redis.Client, f factory) (*redis.Client, *counter, *lockbench.Contender, error) {
	if err := admin.FlushAll(ctx).Err(); err != nil {
		return nil, nil, nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128})
	cnt := &counter{}
	c.AddHook(cnt)
	con, err := f.make(c)
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	return c, cnt, con, nil
}

func cycles(ctx context.Context, addr string, admin *redis.Client, f factory, n int, shared bool) (lockbench.Cell, error) {
	c, cnt, con, err := setup(ctx, addr, admin, f)
	if err != nil {
		return lockbench.Cell{}, err
	}
	defer c.Close()
	defer con.Close()
	keys := lockbench.Keys(n, shared)
	if err := lockbench.Warm(ctx, con, keys); err != nil {
		return lockbench.Cell{}, err
	}
	cnt.n.Store(0)
	before, beforeUsec, err := serverCalls(ctx, admin)
	if err != nil {
		return lockbench.Cell{}, err
	}
	if cg != nil {
		if err := cg.zero(); err != nil {
			return lockbench.Cell{}, err
		}
	}
	cell, err := lockbench.Cycles(ctx, con, keys, *duration)
	if err != nil {
		return lockbench.Cell{}, err
	}
	var instr int64
	if cg != nil {
		if instr, err = cg.dump(); err != nil {
			return lockbench.Cell{}, err
		}
	}
	after, afterUsec, err := serverCalls(ctx, admin)
	if err != nil {
		return lockbench.Cell{}, err
	}
	acq := float64(max(cell.Acquired, 1))
	cell.Metrics = []float64{float64(cnt.n.Load()) / acq, float64(after-before) / acq, float64(afterUsec-beforeUsec) / acq}
	if cg != nil {
		cell.Metrics = append(cell.Metrics, float64(instr)/acq/1000)
	}
	return cell, nil
}

func handoff(ctx context.Context, addr string, admin *redis.Client, f factory) (lockbench.Cell, error) {
	c, _, con, err := setup(ctx, addr, admin, f)
	if err != nil {
		return lockbench.Cell{}, err
	}
	defer c.Close()
	defer con.Close()
	return lockbench.Handoff(ctx, con, *handoffs)
}
