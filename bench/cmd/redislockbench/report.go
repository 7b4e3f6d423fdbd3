package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/ndigo/ndigo/bench/lockbench"
)

const ours = "ndigo redislocks"

func report(w io.Writer, results *lockbench.Results, names []string, server map[string]string) {
	fmt.Fprintf(w, "Command: `cd bench && go run ./cmd/redislockbench %s`\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "redis-server %s, Go %s, GOMAXPROCS %d, %d runs of %v per scenario, peers retry every %v; medians over runs.\n",
		server["redis_version"], runtime.Version(), runtime.GOMAXPROCS(0), *runs, *duration, *retry)
	fmt.Fprintf(w, "Ratios are ndigo/peer throughput computed within each run, then the median. ")
	fmt.Fprintf(w, "client cmds/acq: commands the client sent (round trips) per successful acquisition, failed attempts included; ")
	fmt.Fprintf(w, "server cmds/acq: INFO commandstats calls, commands run inside scripts included; server µs/acq: commandstats time of the top-level commands; ")
	fmt.Fprintf(w, "owner changes: share of acquisitions by another goroutine than the previous one, and those per second (handoffs). ")
	fmt.Fprintf(w, "Peers run at -retry and at their own default or recommended retry (bsm/redislock: linear 100ms, from its README; redsync: random 50-250ms); the raw loops at -retry.")
	if cg != nil {
		fmt.Fprintf(w, " server kinstr/acq: thousands of instructions redis-server ran per acquisition, counted by valgrind's callgrind, under which the server runs: its throughput and latencies here are not comparable with other runs.")
	}
	fmt.Fprintf(w, "\n\n")
	lockbench.Table{Ours: ours, Names: names, Metrics: metrics, Handoffs: *handoffs}.Write(w, results)
}
