package pglocks_test

import (
	"context"
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

var dayFires = flag.Int("pg.fires", 3600, "fires of the every-second task in TestDayOfFiresLeavesBoundedRows (make chaos: 86400, a day)")

// nodeDrivers returns n drivers of namespace ns on p, one per node, on clock
// c (nil: the real clock).
func nodeDrivers(t *testing.T, p *pgxpool.Pool, ns string, n int, c clockwork.Clock) []locks.Driver {
	t.Helper()
	var ds []locks.Driver
	for range n {
		d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		ds = append(ds, d)
	}
	return ds
}

// Two nodes on PostgreSQL, every 400ms, runs of 700ms, a 3s lock wait: the
// node that waits gets the lock after the winner's run, and finds the fire
// claimed instead of running it again.
func TestWaitersDoNotRerunAFireOnPostgres(t *testing.T) {
	p := pool(t)
	c, err := schedulingtest.StartCluster(scheduling.Config{Logger: slog.New(slog.DiscardHandler), Location: time.UTC},
		nodeDrivers(t, p, unique("rerun"), 2, nil), func() []scheduling.Task {
			return []scheduling.Task{scheduling.NewTask(func(ctx context.Context) error {
				select {
				case <-time.After(700 * time.Millisecond):
				case <-ctx.Done():
				}
				return nil
			}, scheduling.Name("job"), scheduling.Cron("@every 400ms"), scheduling.Lock("job"),
				scheduling.LockWait(3*time.Second), scheduling.LockTTL(10*time.Second))}
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitErr := c.WaitRuns(ctx, 6)
	if err := c.Stop(context.Background()); err != nil {
		t.Error(err)
	}
	if err := c.AtMostOnce(); err != nil {
		t.Fatal(err)
	}
	if waitErr != nil {
		t.Fatal(waitErr)
	}
}

// A task every second on two nodes, for -pg.fires simulated seconds on a
// fake clock (an hour by default, a day in make chaos): every fire runs
// exactly once, and the tables hold one lock row and one claim row for the
// task, checked after every simulated minute, whose token counts at least
// every run. The row count does not depend on the number of fires, so an
// hour shows the bound that a day has.
func TestDayOfFiresLeavesBoundedRows(t *testing.T) {
	p := pool(t)
	ns := unique("day")
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := schedulingtest.StartCluster(scheduling.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), Location: time.UTC},
		nodeDrivers(t, p, ns, 2, fc), func() []scheduling.Task {
			return []scheduling.Task{scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Name("tick"), scheduling.Cron("@every 1s"), scheduling.Lock("tick"), scheduling.LockTTL(30*time.Second))}
		})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	rows := func() (lockRows, claimRows int, token int64) {
		t.Helper()
		err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM ndigo_locks WHERE ns = $1),
			(SELECT count(*) FROM ndigo_locks_claims WHERE ns = $1),
			(SELECT coalesce(max(token), 0) FROM ndigo_locks WHERE ns = $1)`, ns).Scan(&lockRows, &claimRows, &token)
		if err != nil {
			t.Fatal(err)
		}
		return lockRows, claimRows, token
	}
	fires, began := *dayFires, time.Now()
	for done, step := 0, 60; done < fires; done += step {
		step = min(step, fires-done)
		if err := schedulingtest.Step(ctx, fc, time.Duration(step)*time.Second, time.Second, c.Schedulers...); err != nil {
			t.Fatal(err)
		}
		// A node may take the lock before it claims, then find the fire
		// claimed: a token per run at least.
		if l, cl, token := rows(); l != 1 || cl != 1 || token < int64(len(c.Runs())) {
			t.Fatalf("after %d fires (%d ran): %d lock rows, %d claim rows, token %d; want 1, 1 and at least a token per run",
				done+step, len(c.Runs()), l, cl, token)
		}
	}
	if err := c.AtMostOnce(); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Runs()); n != fires {
		t.Fatalf("%d of %d fires ran", n, fires)
	}
	l, cl, token := rows()
	t.Logf("%d fires in %v: %d lock row (token %d), %d claim row", fires, time.Since(began).Round(time.Second), l, token, cl)
}
