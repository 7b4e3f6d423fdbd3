package chaos

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// startPGNodes makes the ledger table on srv and starts a chaos node per
// name that locks on srv (pglocks) and writes its ledger there in guarded
// transactions. A node's connections carry the application_name
// chaos-<name>, so that a test can find its backends.
func startPGNodes(t *testing.T, p *nodetest.Procs, srv *pgtest.Server, names []string, env ...string) *pgxpool.Pool {
	t.Helper()
	pool := srv.Pool()
	if _, err := pool.Exec(context.Background(), pgLedgerSchema); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		startNode(p, n, "", append([]string{"CHAOS_POSTGRES=" + srv.URL() + "&application_name=chaos-" + n}, env...)...)
	}
	return pool
}

// pgLedgerEntries returns the PostgreSQL ledger's entries as the Redis
// ledger's fields: what, fire, node, token.
func pgLedgerEntries(t *testing.T, pool *pgxpool.Pool) [][]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT what, fire, node, token FROM chaos_ledger")
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var what, fire, node string
		var token int64
		if err := rows.Scan(&what, &fire, &node, &token); err != nil {
			t.Fatal(err)
		}
		out = append(out, []string{what, fire, node, strconv.FormatInt(token, 10)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFailedFires waits, after the first skip lines, until a node (the
// task's owner: the nodes spread their tasks) has logged a fire it did not
// run because the database failed, and every node in nodes has logged that
// its membership heartbeats fail.
func waitFailedFires(p *nodetest.Procs, nodes []string, skip int) {
	p.WaitLine("a failed fire", skip, 30*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "lock failed; fire not run" && strings.Contains(l.Err, "pglocks: database failed")
	})
	for _, node := range nodes {
		p.WaitLine(node+"'s failed heartbeat", skip, 30*time.Second, func(l nodetest.Line) bool {
			return l.Proc == node && strings.HasPrefix(l.Msg, "membership heartbeat failed") && strings.Contains(l.Err, "pglocks: database failed")
		})
	}
}

// checkRunsOnceWithRisingTokens fails t if any fire started more than once
// across the nodes, or if the tokens of the runs, in the order of their
// fires, do not strictly increase: the claims and the tokens are durable,
// so neither holds only outside a window.
func checkRunsOnceWithRisingTokens(t *testing.T, p *nodetest.Procs) {
	t.Helper()
	runs := p.Runs("run start", "")
	fires := make([]string, 0, len(runs))
	for f, ls := range runs {
		if len(ls) > 1 {
			t.Errorf("fire %s ran %d times: %+v", f, len(ls), ls)
		}
		fires = append(fires, f)
	}
	sort.Strings(fires)
	for i := 1; i < len(fires); i++ {
		a, b := runs[fires[i-1]][0], runs[fires[i]][0]
		if b.Token <= a.Token {
			t.Errorf("fire %s ran with token %d, not above the token %d of the earlier fire %s", b.Fire, b.Token, a.Token, a.Fire)
		}
	}
}

// firstFireAfter returns the first whole-second fire after at plus d.
func firstFireAfter(at time.Time, d time.Duration) string {
	return nodetest.FireString(at.Add(d).Truncate(time.Second).Add(time.Second))
}

var pgNodes = []string{"n0", "n1", "n2"}

// A store is where the chaos nodes of a test lock and keep their ledger.
type store struct {
	name string
	// start starts a server and a node per name on it, and returns what
	// reads the ledger.
	start func(t *testing.T, p *nodetest.Procs, names []string, env ...string) (ledger func() [][]string)
	// stale is what the error of a stale holder's refused ledger write
	// says.
	stale string
}

// stores are Redis, with the payroll example's fenced ledger, and
// PostgreSQL, with a ledger guarded by pglocks.Guard.
var stores = []store{
	{
		name: "redis",
		start: func(t *testing.T, p *nodetest.Procs, names []string, env ...string) func() [][]string {
			srv := redistest.Start(t)
			for _, n := range names {
				startNode(p, n, srv.Addr(), env...)
			}
			return func() [][]string { return ledgerEntries(t, srv.Client()) }
		},
		stale: errStale.Error(),
	},
	{
		name: "postgres",
		start: func(t *testing.T, p *nodetest.Procs, names []string, env ...string) func() [][]string {
			pool := startPGNodes(t, p, pgtest.Start(t), names, env...)
			return func() [][]string { return pgLedgerEntries(t, pool) }
		},
		stale: "locks: lease lost",
	},
}

// PostgreSQL crashes (SIGKILL of the server and every backend) in the
// middle of a run and restarts on the same data. Leases, tokens and fire
// claims are committed rows, so they survive: no fire runs twice, at any
// time, and the tokens go on rising with the fires. The window: while the
// server is down every fire fails with ErrDatabase and is not run (nor
// caught up), and until the lock TTL plus a period after the restart the
// key may stay held by a lease whose release failed in the outage. After
// it, every fire that finds the lock free runs once, its guarded ledger
// writes committed.
func TestPostgresRestartMidRun(t *testing.T) {
	srv := pgtest.Start(t)
	p := nodetest.New(t)
	pool := startPGNodes(t, p, srv, pgNodes, "CHAOS_TTL=3s", "CHAOS_WORK=1200ms")
	_, i := p.WaitLine("a completed run", 0, 60*time.Second, isRun("run end"))
	inflight, _ := p.WaitLine("a run starting", i+1, 10*time.Second, isRun("run start"))
	mark := len(p.All()) // before the kill: a node may log its failure at once
	srv.Kill()
	t.Logf("killed PostgreSQL during %s's run of fire %s (token %d)", inflight.Proc, inflight.Fire, inflight.Token)
	waitFailedFires(p, pgNodes, mark)
	srv.Restart()
	restarted := time.Now()
	for _, n := range pgNodes {
		if !p.Running(n) {
			t.Fatalf("%s exited while PostgreSQL was down", n)
		}
	}
	var before uint64
	for _, l := range p.All()[:mark] {
		before = max(before, l.Token)
	}
	// Runs of 1.2s every 1s: each run makes the nodes skip the next fire,
	// so a run every 2s is every fire that could run.
	fires := p.WaitFires("run start", firstFireAfter(restarted, 3*time.Second+time.Second), 4, 40*time.Second)[:4]
	p.CheckEveryFireOnce("run start", fires, 2*time.Second)
	if first := p.Runs("run start", fires[0])[fires[0]][0]; first.Token <= before {
		t.Errorf("token %d after the restart is not above %d, the highest before", first.Token, before)
	}
	checkRunsOnceWithRisingTokens(t, p)
	p.WaitFires("run end", fires[0], 3, 20*time.Second)
	entries := pgLedgerEntries(t, pool)
	for _, f := range fires[:3] {
		run := p.Runs("run end", f)[f][0]
		if run.StartLedger != "" || run.Ledger != "" || !hasEntry(entries, "start", f, run.Proc) || !hasEntry(entries, "end", f, run.Proc) {
			t.Errorf("fire %s after the restart: ledger writes %q, %q; entries %v", f, run.StartLedger, run.Ledger, entries)
		}
	}
}

// PostgreSQL hangs (SIGSTOP of the server and every backend: connections
// open, nothing answered) for several fires. Each fire fails with
// ErrDatabase within the scheduler's bound (the lock TTL) and is not run;
// no node exits; no fire runs twice; tokens rise with the fires. The
// window ends the lock TTL plus pgx's one-second cancellation delay plus a
// period after the resume (a statement that was queued in the hung server
// may take the lock for nobody when it resumes); after it every fire runs
// exactly once.
func TestPostgresPausedMidRun(t *testing.T) {
	srv := pgtest.Start(t)
	p := nodetest.New(t)
	startPGNodes(t, p, srv, pgNodes, "CHAOS_TTL=2s", "CHAOS_WORK=300ms")
	_, i := p.WaitLine("a completed run", 0, 60*time.Second, isRun("run end"))
	inflight, _ := p.WaitLine("a run starting", i+1, 10*time.Second, isRun("run start"))
	mark := len(p.All()) // before the pause: a node may log its failure at once
	srv.Pause()
	t.Logf("paused PostgreSQL during %s's run of fire %s (token %d)", inflight.Proc, inflight.Fire, inflight.Token)
	waitFailedFires(p, pgNodes, mark)
	srv.Resume()
	resumed := time.Now()
	for _, n := range pgNodes {
		if !p.Running(n) {
			t.Fatalf("%s exited while PostgreSQL was paused", n)
		}
	}
	fires := p.WaitFires("run start", firstFireAfter(resumed, 2*time.Second+time.Second+time.Second), 5, 40*time.Second)[:5]
	p.CheckEveryFireOnce("run start", fires, time.Second)
	checkRunsOnceWithRisingTokens(t, p)
}

// A holder's guarded transaction loses its connection: the test terminates
// (pg_terminate_backend) every backend of the holder's node while its run
// keeps a guarded ledger transaction open. The lease is a row, not a
// session's lock, so the key stays held: no other node runs until the
// holder's run ends. The terminated transaction's writes are gone and its
// last guarded write fails with ErrDatabase; tokens keep rising, fires
// resume, and no fire runs twice.
func TestPostgresBackendTerminated(t *testing.T) {
	srv := pgtest.Start(t)
	p := nodetest.New(t)
	pool := startPGNodes(t, p, srv, pgNodes, "CHAOS_TTL=5s", "CHAOS_WORK=2500ms", "CHAOS_HOLD_TX=1")
	_, i := p.WaitLine("a completed run", 0, 60*time.Second, isRun("run end"))
	victim, vi := p.WaitLine("a run starting", i+1, 10*time.Second, isRun("run start"))
	var inTx, terminated int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'idle in transaction'),
		count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		"chaos-"+victim.Proc).Scan(&inTx, &terminated)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("terminated %d backends of %s (%d in its guarded transaction) in its run of fire %s (token %d)",
		terminated, victim.Proc, inTx, victim.Fire, victim.Token)
	if inTx < 1 || terminated < inTx {
		t.Fatalf("%s: %d backends in a transaction, %d terminated; want its guarded transaction's backend terminated", victim.Proc, inTx, terminated)
	}
	end, ei := p.WaitLine("the holder's run end", vi+1, 15*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run end" && l.Proc == victim.Proc && l.Fire == victim.Fire
	})
	if !strings.Contains(end.Ledger, "pglocks: database failed") {
		t.Errorf("the holder's write in its terminated transaction = %q, want ErrDatabase", end.Ledger)
	}
	for _, l := range p.All()[vi+1 : ei] {
		if l.Msg == "run start" {
			t.Errorf("%s ran fire %s while %s still held the lock: the terminated connection freed the key", l.Proc, l.Fire, victim.Proc)
		}
	}
	fires := p.WaitFires("run end", victim.Fire, 4, 40*time.Second)[1:]
	for _, n := range pgNodes {
		if !p.Running(n) {
			t.Errorf("%s exited", n)
		}
	}
	checkRunsOnceWithRisingTokens(t, p)
	entries := pgLedgerEntries(t, pool)
	for _, e := range entries {
		if e[1] == victim.Fire {
			t.Errorf("the terminated transaction's entry %v was committed", e)
		}
	}
	for _, f := range fires {
		run := p.Runs("run end", f)[f][0]
		if run.Ledger != "" || !hasEntry(entries, "start", f, run.Proc) || !hasEntry(entries, "end", f, run.Proc) {
			t.Errorf("fire %s after the termination: ledger write %q; entries %v", f, run.Ledger, entries)
		}
	}
}
