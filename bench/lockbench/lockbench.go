// Package lockbench is the measuring and reporting that the lock driver
// benchmarks (bench/cmd/redislockbench, bench/cmd/pglockbench) share:
// acquire+release cycles from n goroutines on distinct keys or on one shared
// key, release-to-waiter handoffs, and Markdown tables of medians over runs
// whose ratios are computed within each run first, so that a noisy machine
// moves every contender of a run alike.
//
// A driver's own figures (commands or statements per acquisition, server
// time) are the caller's: it reads its counters around [Cycles] and puts the
// per-acquisition values in [Cell.Metrics].
package lockbench

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// A Contender is one lock implementation. Lock takes key, waiting as the
// implementation is meant to wait when the key is held, and returns the
// release.
type Contender struct {
	Lock  func(ctx context.Context, key string) (release func(context.Context) error, err error)
	Close func()
}

// WaitFor is the contender of an ndigo driver: locks.Wait with a one-minute
// budget and the given TTL, and release by the lease. close ends the
// driver.
func WaitFor(d locks.Driver, ttl time.Duration, close func()) *Contender {
	return &Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l, err := locks.Wait(ctx, d, key, ttl, locks.WaitOptions{Budget: time.Minute})
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		Close: close,
	}
}

// Select returns the contenders of all whose names, given by name, hold
// one of the comma-separated parts of only: the -only flag of the
// commands, where empty selects every contender.
func Select[T any](all []T, name func(T) string, only string) []T {
	if only == "" {
		return all
	}
	var out []T
	for _, c := range all {
		for _, o := range strings.Split(only, ",") {
			if strings.Contains(name(c), strings.TrimSpace(o)) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// A Cell is one contender's figures in one scenario of one run.
type Cell struct {
	PerSec     float64 // acquire+release cycles completed within the measured time, per second
	P50, P99   time.Duration
	Acquired   int64     // successful acquisitions during the run (warm-up excluded)
	OwnerMoves float64   // share of acquisitions by another goroutine than the previous one
	Metrics    []float64 // the caller's per-acquisition figures, in the order of Table.Metrics
}

// Keys returns the key of each of n goroutines: its own, or one shared by
// all.
func Keys(n int, shared bool) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
		if shared {
			keys[i] = "shared"
		}
	}
	return keys
}

// Scenario names the cycle scenario of n goroutines, as the tables head it.
func Scenario(n int, shared bool) string {
	if shared {
		return fmt.Sprintf("one shared key, %d goroutines", n)
	}
	return fmt.Sprintf("distinct keys, %d goroutines", n)
}

// Warm takes and releases every key once, so that scripts, statements and
// connections are ready before the measured time.
func Warm(ctx context.Context, c *Contender, keys []string) error {
	for _, k := range keys {
		rel, err := c.Lock(ctx, k)
		if err != nil {
			return err
		}
		if err := rel(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Cycles runs one goroutine per key, each acquiring and releasing its key
// in a loop for d, and returns the cycles per second and latencies of the
// cycles that ended within d.
func Cycles(ctx context.Context, c *Contender, keys []string, d time.Duration) (Cell, error) {
	var (
		stop     atomic.Bool
		lastOwn  atomic.Int64
		moves    atomic.Int64
		total    atomic.Int64
		mu       sync.Mutex // protects lats and firstErr
		lats     []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	lastOwn.Store(-1)
	wctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stop.Store(true)
	}
	start := time.Now()
	end := start.Add(d)
	for i, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() { mu.Lock(); lats = append(lats, mine...); mu.Unlock() }()
			for !stop.Load() {
				t0 := time.Now()
				rel, err := c.Lock(wctx, key)
				if err != nil {
					fail(err)
					return
				}
				total.Add(1)
				if lastOwn.Swap(int64(i)) != int64(i) {
					moves.Add(1)
				}
				if err := rel(wctx); err != nil {
					fail(err)
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
		return Cell{}, firstErr
	}
	slices.Sort(lats)
	return Cell{
		PerSec:     float64(len(lats)) / d.Seconds(),
		P50:        Quantile(lats, 0.50),
		P99:        Quantile(lats, 0.99),
		Acquired:   total.Load(),
		OwnerMoves: float64(moves.Load()) / float64(max(total.Load(), 1)),
	}, nil
}

// Handoff measures n handoffs of one key: a holder takes it, a waiter
// starts to wait for it, and the figure is from the holder starting its
// release to the waiter holding the key.
func Handoff(ctx context.Context, c *Contender, n int) (Cell, error) {
	lats := make([]time.Duration, 0, n)
	for range n {
		rel, err := c.Lock(ctx, "handoff")
		if err != nil {
			return Cell{}, err
		}
		got := make(chan error, 1)
		var at time.Time
		go func() {
			r, err := c.Lock(ctx, "handoff")
			at = time.Now()
			if err == nil {
				err = r(ctx)
			}
			got <- err
		}()
		// Let the waiter reach its wait: a watch that is warm after the
		// first round, a retry sleep, or a statement blocked in the server.
		time.Sleep(3 * time.Millisecond)
		t0 := time.Now()
		if err := rel(ctx); err != nil {
			return Cell{}, err
		}
		if err := <-got; err != nil {
			return Cell{}, err
		}
		lats = append(lats, at.Sub(t0))
	}
	slices.Sort(lats)
	return Cell{P50: Quantile(lats, 0.5), P99: Quantile(lats, 0.99)}, nil
}

// Quantile returns the q quantile of sorted, or zero for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// ParseGoroutines parses a comma-separated list of goroutine counts, the
// -goroutines flag of the commands.
func ParseGoroutines(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("lockbench: goroutine count %q in %q must be a positive integer", f, s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// A Plan is what Run measures.
type Plan struct {
	Runs       int
	Goroutines []int
	// Modes holds "distinct", "shared" or both.
	Modes string
	// Names lists the contenders in table order; each run starts the
	// list at another place, so that no contender always runs first.
	Names []string
	// Handoffs lists the contenders whose handoff Run measures, after
	// each run's cycles.
	Handoffs []string
	// Metrics heads the figures of Cell.Metrics in the progress log.
	Metrics []Metric
	// Cycles measures one contender in one cycle scenario.
	Cycles func(ctx context.Context, name string, n int, shared bool) (Cell, error)
	// Handoff measures one contender's handoffs.
	Handoff func(ctx context.Context, name string) (Cell, error)
}

// Run measures every scenario of p, logging each cell as it comes, and
// returns the results. It stops at the first error, or when ctx ends.
func Run(ctx context.Context, p Plan) (*Results, error) {
	r := &Results{}
	for run := range p.Runs {
		for _, shared := range []bool{false, true} {
			if !strings.Contains(p.Modes, map[bool]string{false: "distinct", true: "shared"}[shared]) {
				continue
			}
			for _, n := range p.Goroutines {
				sc := Scenario(n, shared)
				names := append(slices.Clone(p.Names[run%len(p.Names):]), p.Names[:run%len(p.Names)]...)
				for _, name := range names {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					c, err := p.Cycles(ctx, name, n, shared)
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", name, sc, err)
					}
					var extra strings.Builder
					for i, m := range p.Metrics {
						if i < len(c.Metrics) {
							fmt.Fprintf(&extra, " %s "+m.Format, m.Header, c.Metrics[i])
						}
					}
					log.Printf("run %d %-32s %-28s %8.0f/s p50 %-10v p99 %-10v moves %.2f%s",
						run+1, sc, name, c.PerSec, c.P50, c.P99, c.OwnerMoves, extra.String())
					r.Add(sc, name, c)
				}
			}
		}
		for _, name := range p.Handoffs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			c, err := p.Handoff(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("%s handoff: %w", name, err)
			}
			log.Printf("run %d handoff %-28s p50 %-10v p99 %v", run+1, name, c.P50, c.P99)
			r.Add(HandoffScenario, name, c)
		}
	}
	return r, nil
}

// Interrupted reports whether err is Run's answer to an interrupt, after
// which a command prints nothing.
func Interrupted(err error) bool { return errors.Is(err, context.Canceled) }
