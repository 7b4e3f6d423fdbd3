// Command pglockbench measures the ndigo PostgreSQL lock driver (pglocks)
// side by side with bare advisory-lock loops, on one private PostgreSQL
// server started for the run
// (internal/pgproc: fsync off, a free loopback port), and prints a Markdown
// table of medians over several runs with ratios computed within each run.
//
//	cd bench && go run ./cmd/pglockbench -runs 5
//
// Scenarios: acquire+release cycles on distinct keys (one per goroutine) and
// on one shared key, at 1, 16 and 64 goroutines; and release-to-waiter
// handoff latency with one holder and one waiter. Every contender gets a
// pgx pool of the same size (-pool). pglocks waits with locks.Wait, woken
// by its LISTEN/NOTIFY Watcher; again with one more watcher held for the
// whole run, so that its listening connection never idles out; and as its
// bare Acquire in a retry loop; the advisory try-lock loop retries every
// -retry; pg_advisory_lock waits in the server. Two write floors, which
// are not locks, show what a cycle that keeps its state in a row costs at
// least on the same server: an UPDATE of the key's row, then a second
// UPDATE of it or SELECT 1, each an unnamed statement. (The "same SQL loop", the
// driver's .sql files sent as statements, was retired when Acquire became a
// PL/pgSQL block, which cannot be sent as one: BENCHMARKS.md keeps its last
// figures.)
//
// No Go PostgreSQL lock library is measured: cirello.io/pglock, the one
// the issue names, is refused by the Go module proxy (403, "not
// available"), and none other is available offline.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/internal/pgproc"
	"github.com/ndigo/ndigo/pglocks"
)

var (
	duration   = flag.Duration("duration", 2*time.Second, "measured time per cycle scenario")
	warmup     = flag.Duration("warmup", 300*time.Millisecond, "unmeasured cycles before each scenario, at its concurrency (opens the pool's connections)")
	runs       = flag.Int("runs", 5, "runs; the table shows medians")
	retry      = flag.Duration("retry", time.Millisecond, "the loops' retry interval on a held key")
	handoffs   = flag.Int("handoffs", 1000, "handoffs measured per contender and run")
	concs      = flag.String("goroutines", "1,16,64", "goroutine counts")
	poolSize   = flag.Int("pool", 64, "pgx pool size (MaxConns) of every contender")
	syncCommit = flag.String("synchronous-commit", "on", "the server's synchronous_commit")
	only       = flag.String("only", "", "comma-separated parts of the names of the contenders to run (default all)")
	modes      = flag.String("keys", "distinct,shared", "key modes to run: distinct, shared")
	statements = flag.Bool("statements", false, "log each statement's calls and mean server time per scenario")
)

const (
	ours  = "ndigo pglocks"
	floor = "advisory try-lock loop"
)

type factory struct {
	name    string
	make    func(*pgxpool.Pool) (*lockbench.Contender, error)
	handoff bool // measured in the handoff scenario too
}

func factories() []factory {
	prepared := pgx.QueryExecModeCacheStatement
	all := []factory{
		{name: ours, make: ndigo, handoff: true},
		{name: ours + " (listener kept)", make: ndigoListening, handoff: true},
		{name: ours + " (Acquire loop)", make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return ndigoLoop(p, *retry)
		}},
		{name: floor, make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return advisoryTry(p, pgx.QueryExecModeExec, *retry), nil
		}, handoff: true},
		{name: floor + " (prepared)", make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return advisoryTry(p, prepared, *retry), nil
		}},
		{name: "pg_advisory_lock (blocking)", make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return advisoryBlocking(p, pgx.QueryExecModeExec), nil
		}, handoff: true},
		{name: "write floor: 2 UPDATEs", make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return writeFloor(p, 2), nil
		}},
		{name: "write floor: UPDATE + SELECT 1", make: func(p *pgxpool.Pool) (*lockbench.Contender, error) {
			return writeFloor(p, 1), nil
		}},
	}
	return lockbench.Select(all, func(f factory) string { return f.name }, *only)
}

// metrics are the PostgreSQL figures of a cell, per successful
// acquisition: statements the client sent, and the server's execution and
// planning time of the top-level statements (pg_stat_statements).
var metrics = []lockbench.Metric{
	{Header: "client stmts/acq", Format: "%.2f"},
	{Header: "server exec µs/acq", Format: "%.1f"},
	{Header: "server plan µs/acq", Format: "%.1f"},
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ns, err := lockbench.ParseGoroutines(*concs)
	if err != nil {
		log.Fatal(err)
	}
	switch *syncCommit {
	case "on", "off", "local", "remote_write", "remote_apply":
	default:
		log.Fatalf("-synchronous-commit %q must be on, off, local, remote_write or remote_apply", *syncCommit)
	}
	if *poolSize < 1 || *poolSize > 90 {
		log.Fatalf("-pool %d must be in [1, 90]: the server allows 100 connections, and the driver listens on one more", *poolSize)
	}
	srv, err := pgproc.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	fatalf := func(format string, args ...any) {
		srv.Stop()
		log.Fatalf(format, args...)
	}
	b, err := prepare(ctx, srv)
	if err != nil {
		fatalf("pglockbench: preparing the server: %v", err)
	}
	defer b.admin.Close()

	byName := map[string]factory{}
	var names, hos []string
	for _, f := range factories() {
		byName[f.name] = f
		names = append(names, f.name)
		if f.handoff {
			hos = append(hos, f.name)
		}
	}
	results, err := lockbench.Run(ctx, lockbench.Plan{
		Runs: *runs, Goroutines: ns, Modes: *modes, Names: names, Handoffs: hos, Metrics: metrics,
		Cycles: func(ctx context.Context, name string, n int, shared bool) (lockbench.Cell, error) {
			return b.cycles(ctx, byName[name], n, shared)
		},
		Handoff: func(ctx context.Context, name string) (lockbench.Cell, error) {
			return b.handoff(ctx, byName[name])
		},
	})
	if lockbench.Interrupted(err) {
		return
	}
	if err != nil {
		fatalf("%v", err)
	}
	report(os.Stdout, results, names, b.version)
}

// bench is the server the contenders run on.
type bench struct {
	url     string
	admin   *pgxpool.Pool // resets tables and statistics; not measured
	version string
}

// prepare loads pg_stat_statements with planning times (restarts: the
// library must be preloaded, and only then are its settings known), sets
// synchronous_commit, and creates the driver's tables.
func prepare(ctx context.Context, srv *pgproc.Server) (*bench, error) {
	for _, step := range [][]string{
		{"ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'", "ALTER SYSTEM SET synchronous_commit = '" + *syncCommit + "'"},
		{"ALTER SYSTEM SET pg_stat_statements.track_planning = on"},
	} {
		c, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			return nil, err
		}
		for _, s := range step {
			if _, err := c.Exec(ctx, s); err != nil {
				_ = c.Close(ctx)
				return nil, fmt.Errorf("%s: %w", s, err)
			}
		}
		_ = c.Close(ctx)
		if err := srv.Restart(); err != nil {
			return nil, err
		}
	}
	admin, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		return nil, err
	}
	b := &bench{url: srv.URL(), admin: admin}
	if _, err := admin.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		admin.Close()
		return nil, err
	}
	var sc string
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit')").Scan(&b.version, &sc); err != nil {
		admin.Close()
		return nil, err
	}
	b.version += ", synchronous_commit " + sc
	d, err := pglocks.New(pglocks.Options{Pool: admin, Namespace: "bench"})
	if err != nil {
		admin.Close()
		return nil, err
	}
	if err := d.CreateSchema(ctx); err != nil {
		admin.Close()
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE TABLE "+floorTable+" (key text PRIMARY KEY, n bigint NOT NULL, at timestamptz NOT NULL)"); err != nil {
		admin.Close()
		return nil, err
	}
	return b, nil
}

// counter is a pgx tracer counting the statements a pool's connections
// send.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// setup empties the lock tables and returns a counted pool of -pool
// connections and the contender on it.
func (b *bench) setup(ctx context.Context, f factory) (*pgxpool.Pool, *counter, *lockbench.Contender, error) {
	if _, err := b.admin.Exec(ctx, "TRUNCATE "+table+", "+pgx.Identifier{"ndigo_locks_claims"}.Sanitize()+", "+floorTable); err != nil {
		return nil, nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.MaxConns = int32(*poolSize)
	cnt := &counter{}
	cfg.ConnConfig.Tracer = cnt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	con, err := f.make(pool)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return pool, cnt, con, nil
}

func (b *bench) cycles(ctx context.Context, f factory, n int, shared bool) (lockbench.Cell, error) {
	pool, cnt, con, err := b.setup(ctx, f)
	if err != nil {
		return lockbench.Cell{}, err
	}
	defer pool.Close()
	defer con.Close()
	keys := lockbench.Keys(n, shared)
	if err := lockbench.Warm(ctx, con, keys); err != nil {
		return lockbench.Cell{}, err
	}
	// At the scenario's concurrency, so that the pool has opened the
	// connections it will use and their backends have planned the
	// statements once.
	if _, err := lockbench.Cycles(ctx, con, keys, *warmup); err != nil {
		return lockbench.Cell{}, err
	}
	if _, err := b.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return lockbench.Cell{}, err
	}
	cnt.n.Store(0)
	cell, err := lockbench.Cycles(ctx, con, keys, *duration)
	if err != nil {
		return lockbench.Cell{}, err
	}
	stmts, err := b.serverTimes(ctx)
	if err != nil {
		return lockbench.Cell{}, err
	}
	var exec, plan float64
	for _, s := range stmts {
		exec += s.exec
		plan += s.plan
	}
	acq := float64(max(cell.Acquired, 1))
	cell.Metrics = []float64{float64(cnt.n.Load()) / acq, 1000 * exec / acq, 1000 * plan / acq}
	logStatements(fmt.Sprintf("%s, %s", f.name, lockbench.Scenario(n, shared)), stmts)
	return cell, nil
}

// logStatements logs each statement's calls and mean times under
// -statements.
func logStatements(label string, stmts []statement) {
	if !*statements {
		return
	}
	for _, s := range stmts {
		log.Printf("    %s: %8d calls, exec %6.1f µs, plan %6.1f µs each: %s",
			label, s.calls, 1000*s.exec/float64(max(s.calls, 1)), 1000*s.plan/float64(max(s.calls, 1)), s.query)
	}
}

// A statement is one pg_stat_statements row: total times in milliseconds.
type statement struct {
	query      string
	calls      int64
	exec, plan float64
}

// serverTimes returns the statements run since the last reset, leaving out
// the benchmark's own reads of pg_stat_statements.
func (b *bench) serverTimes(ctx context.Context) ([]statement, error) {
	rows, err := b.admin.Query(ctx, `SELECT query, calls, total_exec_time, total_plan_time FROM pg_stat_statements
		WHERE query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		return nil, err
	}
	var out []statement
	for rows.Next() {
		var s statement
		if err := rows.Scan(&s.query, &s.calls, &s.exec, &s.plan); err != nil {
			return nil, err
		}
		s.query = strings.Join(strings.Fields(s.query), " ")
		if len(s.query) > 80 {
			s.query = s.query[:80] + "…"
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].exec+out[i].plan > out[j].exec+out[j].plan })
	return out, rows.Err()
}

func (b *bench) handoff(ctx context.Context, f factory) (lockbench.Cell, error) {
	pool, _, con, err := b.setup(ctx, f)
	if err != nil {
		return lockbench.Cell{}, err
	}
	defer pool.Close()
	defer con.Close()
	// The first Watch opens the driver's listening connection; the
	// loops have their connections opened.
	if _, err := lockbench.Handoff(ctx, con, 10); err != nil {
		return lockbench.Cell{}, err
	}
	if _, err := b.admin.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return lockbench.Cell{}, err
	}
	cell, err := lockbench.Handoff(ctx, con, *handoffs)
	if err != nil {
		return lockbench.Cell{}, err
	}
	stmts, err := b.serverTimes(ctx)
	if err != nil {
		return lockbench.Cell{}, err
	}
	logStatements(f.name+", handoff", stmts)
	return cell, nil
}
