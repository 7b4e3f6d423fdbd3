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
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
)

var (
	duration = flag.Duration("duration", 2*time.Second, "measured time per cycle scenario")
	runs     = flag.Int("runs", 5, "runs; the table shows medians")
	retry    = flag.Duration("retry", time.Millisecond, "peers' retry interval on a held key")
	handoffs = flag.Int("handoffs", 1000, "handoffs measured per contender and run")
	concs    = flag.String("goroutines", "1,16,64", "goroutine counts")
	scripts  = flag.String("scripts", "../redislocks", "directory of the driver's .lua scripts, for the raw same-Lua loop")
	only     = flag.String("only", "", "comma-separated contender names to run (default all)")
	modes    = flag.String("keys", "distinct,shared", "key modes to run: distinct, shared")
	cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the bench process to this file")
)

type factory struct {
	name string
	make func(*redis.Client) (*contender, error)
	// slowRetry marks a peer at its own default retry interval: the
	// handoff scenario, which waits for each of its 1000 retries, skips it.
	slowRetry bool
}

func factories() []factory {
	all := []factory{
		{name: "ndigo redislocks", make: ndigo},
		{name: "bsm/redislock", make: func(c *redis.Client) (*contender, error) { return bsm(c, *retry), nil }},
		{name: "bsm/redislock, retry 100ms", make: func(c *redis.Client) (*contender, error) { return bsm(c, bsmRecommendedRetry), nil }, slowRetry: true},
		{name: "redsync v4", make: func(c *redis.Client) (*contender, error) { return redsyncV4(c, *retry), nil }},
		{name: "redsync v4, default retry", make: func(c *redis.Client) (*contender, error) { return redsyncV4(c, 0), nil }, slowRetry: true},
		{name: "raw script, INCR token", make: func(c *redis.Client) (*contender, error) { return raw(c, *retry), nil }},
		{name: "raw script, same Lua", make: func(c *redis.Client) (*contender, error) { return rawSame(c, *retry, *scripts) }},
	}
	if *only == "" {
		return all
	}
	var out []factory
	for _, f := range all {
		for _, o := range strings.Split(*only, ",") {
			if strings.Contains(f.name, strings.TrimSpace(o)) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// cell is one contender's figures in one scenario of one run.
type cell struct {
	perSec     float64 // successful acquire+release cycles per second
	p50, p99   time.Duration
	roundTrips float64 // client commands per successful acquisition
	serverCmds float64 // server-side commands (scripts' inner calls too) per acquisition
	ownerMoves float64 // share of acquisitions by a different goroutine than the last
	serverUsec float64 // Redis CPU time (commandstats usec) per acquisition
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
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	fatalf := func(format string, args ...any) {
		srv.Stop()
		log.Fatalf(format, args...)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	info, _ := admin.InfoMap(ctx, "server").Result()
	version := info["Server"]

	var ns []int
	for _, s := range strings.Split(*concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("bad -goroutines %q", *concs)
		}
		ns = append(ns, n)
	}
	// results[scenario][contender] holds one cell per run.
	results := map[string]map[string][]cell{}
	var scenarios []string
	add := func(sc, name string, c cell) {
		if results[sc] == nil {
			results[sc] = map[string][]cell{}
			scenarios = append(scenarios, sc)
		}
		results[sc][name] = append(results[sc][name], c)
	}
	for run := range *runs {
		for _, shared := range []bool{false, true} {
			if !strings.Contains(*modes, map[bool]string{false: "distinct", true: "shared"}[shared]) {
				continue
			}
			for _, n := range ns {
				sc := fmt.Sprintf("%s, %d goroutines", map[bool]string{false: "distinct keys", true: "one shared key"}[shared], n)
				// Rotate the order per run, so no contender always runs
				// first after the flush.
				fs := factories()
				fs = append(fs[run%len(fs):], fs[:run%len(fs)]...)
				for _, f := range fs {
					if ctx.Err() != nil {
						return
					}
					c, err := cycles(ctx, srv.Addr(), admin, f, n, shared)
					if err != nil {
						fatalf("%s %s: %v", f.name, sc, err)
					}
					log.Printf("run %d %-32s %-20s %8.0f/s p50 %-10v p99 %-10v rt/acq %.2f srv/acq %.2f srv µs/acq %.1f moves %.2f",
						run+1, sc, f.name, c.perSec, c.p50, c.p99, c.roundTrips, c.serverCmds, c.serverUsec, c.ownerMoves)
					add(sc, f.name, c)
				}
			}
		}
		for _, f := range factories() {
			if f.slowRetry {
				continue
			}
			c, err := handoff(ctx, srv.Addr(), admin, f)
			if err != nil {
				fatalf("%s handoff: %v", f.name, err)
			}
			log.Printf("run %d handoff %-20s p50 %-10v p99 %v", run+1, f.name, c.p50, c.p99)
			add("handoff", f.name, c)
		}
	}
	report(os.Stdout, scenarios, results, version)
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
func setup(ctx context.Context, addr string, admin *redis.Client, f factory) (*redis.Client, *counter, *contender, error) {
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

func cycles(ctx context.Context, addr string, admin *redis.Client, f factory, n int, shared bool) (cell, error) {
	c, cnt, con, err := setup(ctx, addr, admin, f)
	if err != nil {
		return cell{}, err
	}
	defer c.Close()
	defer con.close()
	key := func(i int) string {
		if shared {
			return "shared"
		}
		return "key-" + strconv.Itoa(i)
	}
	// Warm up: load scripts and open connections.
	for i := range n {
		rel, err := con.lock(ctx, key(i))
		if err != nil {
			return cell{}, err
		}
		if err := rel(ctx); err != nil {
			return cell{}, err
		}
	}
	cnt.n.Store(0)
	before, beforeUsec, err := serverCalls(ctx, admin)
	if err != nil {
		return cell{}, err
	}
	var (
		stop     atomic.Bool
		lastOwn  atomic.Int64
		moves    atomic.Int64
		total    atomic.Int64
		mu       sync.Mutex
		lats     []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	lastOwn.Store(-1)
	wctx, cancel := context.WithTimeout(ctx, *duration+time.Minute)
	defer cancel()
	start := time.Now()
	end := start.Add(*duration)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() { mu.Lock(); lats = append(lats, mine...); mu.Unlock() }()
			for !stop.Load() {
				t0 := time.Now()
				rel, err := con.lock(wctx, key(i))
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					stop.Store(true)
					return
				}
				total.Add(1)
				if lastOwn.Swap(int64(i)) != int64(i) {
					moves.Add(1)
				}
				if err := rel(wctx); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					stop.Store(true)
					return
				}
				if t1 := time.Now(); !t1.After(end) {
					mine = append(mine, t1.Sub(t0))
				}
			}
		}()
	}
	time.Sleep(time.Until(end))
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		return cell{}, firstErr
	}
	after, afterUsec, err := serverCalls(ctx, admin)
	if err != nil {
		return cell{}, err
	}
	acq := float64(total.Load())
	slices.Sort(lats)
	return cell{
		perSec:     float64(len(lats)) / duration.Seconds(),
		p50:        quantile(lats, 0.50),
		p99:        quantile(lats, 0.99),
		roundTrips: float64(cnt.n.Load()) / acq,
		serverCmds: float64(after-before) / acq,
		ownerMoves: float64(moves.Load()) / acq,
		serverUsec: float64(afterUsec-beforeUsec) / acq,
	}, nil
}

// handoff measures from the holder starting Release to a waiting goroutine
// holding the lock.
func handoff(ctx context.Context, addr string, admin *redis.Client, f factory) (cell, error) {
	c, _, con, err := setup(ctx, addr, admin, f)
	if err != nil {
		return cell{}, err
	}
	defer c.Close()
	defer con.close()
	lats := make([]time.Duration, 0, *handoffs)
	for range *handoffs {
		rel, err := con.lock(ctx, "handoff")
		if err != nil {
			return cell{}, err
		}
		got := make(chan error, 1)
		var at time.Time
		go func() {
			r, err := con.lock(ctx, "handoff")
			at = time.Now()
			if err == nil {
				err = r(ctx)
			}
			got <- err
		}()
		// Let the waiter reach its wait (ndigo: the subscription is warm
		// after the first round; peers: a retry sleep).
		time.Sleep(3 * time.Millisecond)
		t0 := time.Now()
		if err := rel(ctx); err != nil {
			return cell{}, err
		}
		if err := <-got; err != nil {
			return cell{}, err
		}
		lats = append(lats, at.Sub(t0))
	}
	slices.Sort(lats)
	return cell{p50: quantile(lats, 0.5), p99: quantile(lats, 0.99)}, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
