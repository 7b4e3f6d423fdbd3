package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/ndigo/ndigo/bench/lockbench"
)

func report(w io.Writer, results *lockbench.Results, names []string, server string) {
	fmt.Fprintf(w, "Command: `cd bench && go run ./cmd/pglockbench %s`\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "PostgreSQL %s, fsync off, Go %s, GOMAXPROCS %d, pgx pool of %d connections per contender, %d runs of %v per scenario, loops retry every %v; medians over runs.\n",
		server, runtime.Version(), runtime.GOMAXPROCS(0), *poolSize, *runs, *duration, *retry)
	fmt.Fprintf(w, "Ratios are ndigo/this throughput computed within each run, then the median. ")
	fmt.Fprintf(w, "client stmts/acq: statements the client sent per successful acquisition, failed attempts included (a pgx tracer); ")
	fmt.Fprintf(w, "server exec µs/acq and plan µs/acq: pg_stat_statements execution and planning time of those statements (commit and parse not included; a blocking pg_advisory_lock's execution time includes its wait); ")
	fmt.Fprintf(w, "owner changes: share of acquisitions by another goroutine than the previous one, and those per second (handoffs). ")
	fmt.Fprintf(w, "The advisory loops hold a pool connection from lock to unlock, which a session lock needs; the (prepared) rows use pgx's default cached prepared statements, the others the unnamed statement of every pglocks call (pgx.QueryExecModeExec).\n\n")
	lockbench.Table{Ours: ours, Names: names, Metrics: metrics, Handoffs: *handoffs}.Write(w, results)
}
