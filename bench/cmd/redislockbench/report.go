package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

const ours = "ndigo redislocks"

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		var zero T
		return zero
	}
	return s[len(s)/2]
}

func field[T any](cs []cell, f func(cell) T) []T {
	out := make([]T, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return out
}

func report(w io.Writer, scenarios []string, results map[string]map[string][]cell, server map[string]string) {
	fmt.Fprintf(w, "Command: `cd bench && go run ./cmd/redislockbench %s`\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "redis-server %s, Go %s, GOMAXPROCS %d, %d runs of %v per scenario, peers retry every %v; medians over runs.\n",
		server["redis_version"], runtime.Version(), runtime.GOMAXPROCS(0), *runs, *duration, *retry)
	fmt.Fprintf(w, "Ratios are ndigo/peer throughput computed within each run, then the median. ")
	fmt.Fprintf(w, "client cmds/acq: commands the client sent (round trips) per successful acquisition, failed attempts included; ")
	fmt.Fprintf(w, "server cmds/acq: INFO commandstats calls, commands run inside scripts included; server µs/acq: commandstats time of the top-level commands; ")
	fmt.Fprintf(w, "owner changes: share of acquisitions by another goroutine than the previous one, and those per second (handoffs). ")
	fmt.Fprintf(w, "Peers run at -retry and at their own default or recommended retry (bsm/redislock: linear 100ms, from its README; redsync: random 50-250ms); the raw loops at -retry.\n\n")
	names := []string{}
	for _, f := range factories() {
		names = append(names, f.name)
	}
	for _, sc := range scenarios {
		if sc == "handoff" {
			continue
		}
		fmt.Fprintf(w, "### %s\n\n", sc)
		fmt.Fprintln(w, "| contender | cycles/s | p50 | p99 | client cmds/acq | server cmds/acq | server µs/acq | owner changes | owner changes/s | ndigo ÷ this |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, name := range names {
			cs := results[sc][name]
			ratio := "—"
			if name != ours {
				var rs []float64
				for i, c := range cs {
					if i < len(results[sc][ours]) && c.perSec > 0 {
						rs = append(rs, results[sc][ours][i].perSec/c.perSec)
					}
				}
				ratio = fmt.Sprintf("%.2f×", median(rs))
			}
			moves, movesPerSec := "—", "—"
			if strings.HasPrefix(sc, "one shared key") {
				moves = fmt.Sprintf("%.0f%%", 100*median(field(cs, func(c cell) float64 { return c.ownerMoves })))
				movesPerSec = fmt.Sprintf("%.0f", median(field(cs, func(c cell) float64 { return c.ownerMoves * c.perSec })))
			}
			fmt.Fprintf(w, "| %s | %.0f | %v | %v | %.2f | %.2f | %.1f | %s | %s | %s |\n", name,
				median(field(cs, func(c cell) float64 { return c.perSec })),
				round(median(field(cs, func(c cell) time.Duration { return c.p50 }))),
				round(median(field(cs, func(c cell) time.Duration { return c.p99 }))),
				median(field(cs, func(c cell) float64 { return c.roundTrips })),
				median(field(cs, func(c cell) float64 { return c.serverCmds })),
				median(field(cs, func(c cell) float64 { return c.serverUsec })),
				moves, movesPerSec, ratio)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "### Handoff: holder starts Release → waiter holds the lock (1 holder, 1 waiter, %d handoffs per run)\n\n", *handoffs)
	fmt.Fprintln(w, "| contender | p50 | p99 |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, name := range names {
		cs, ok := results["handoff"][name]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s | %v | %v |\n", name,
			round(median(field(cs, func(c cell) time.Duration { return c.p50 }))),
			round(median(field(cs, func(c cell) time.Duration { return c.p99 }))))
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
