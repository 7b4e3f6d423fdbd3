package pglocks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

// TestReleaseAgainAfterUnknownOutcome: a Release whose reply was lost (its
// handle still held) can be called again and answers nil while no successor
// acquired; once one did, it answers ErrLeaseLost and leaves the successor
// alone.
func TestReleaseAgainAfterUnknownOutcome(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	d := newDriver(t, p, "again")
	key := unique("again")
	l, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	pglocks.ForgetRelease(l)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release again, no successor: %v, want nil", err)
	}
	next, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pglocks.ForgetRelease(l)
	if err := l.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Release again after a successor acquired: %v, want ErrLeaseLost", err)
	}
	notAcquired(t, d, key)
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNoPreparedStatements: the driver and the task state store prepare no
// named statement on the server, whatever the pool's default exec mode, so
// that they work through PgBouncer in transaction mode.
func TestNoPreparedStatements(t *testing.T) {
	pool(t) // the schema
	cfg, err := pgxpool.ParseConfig(shared.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every operation on the one session that is checked
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	d := newDriver(t, p, "protocol")
	key := unique("k")
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error { return pglocks.Guard(ctx, tx, l) }); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Claim(ctx, key, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	storeCalls(t, p)
	var n int
	err = p.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d prepared statements on the session, want 0", n)
	}
}

// storeCalls makes every call of a task state store on p once, each
// succeeding.
func storeCalls(t *testing.T, p *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	s, err := pglocks.NewStore(pglocks.StoreOptions{Pool: p, Namespace: unique("protocol")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, paused := range []bool{true, false} {
		want := taskstate.Pause{Paused: paused, Note: "protocol", By: "cli", At: at}
		if err := s.SetPaused(ctx, "Payroll.Close", want); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Paused(ctx, "Payroll.Close"); err != nil || got != want {
			t.Fatalf("Paused = %+v, %v; want %+v", got, err, want)
		}
	}
	if err := s.RequestRun(ctx, "Payroll.Close", at); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Poll(ctx); err != nil || len(p.Requests) != 1 || p.Pauses == 0 {
		t.Fatalf("Poll = %+v, %v; want the one request and the pauses counted", p, err)
	}
	if _, ok, err := s.TakeRequest(ctx, "Payroll.Close", "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true", ok, err)
	}
	if err := s.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Fire: at, Manual: true, Node: "node-a", Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.Runs(ctx, "Payroll.Close", 1); err != nil || len(runs) != 1 {
		t.Fatalf("Runs = %+v, %v; want the one run", runs, err)
	}
}

// TestConformanceThroughPgBouncer runs the conformance suites of the driver
// and of the task state store with the pool behind a real PgBouncer in
// transaction pooling mode (two server sessions shared by all of the pool's
// connections; the pool's default exec mode caches prepared statements,
// which that mode breaks), the listener on PostgreSQL directly, as the
// package documentation says to deploy it; and a guarded transaction
// through the bouncer.
func TestConformanceThroughPgBouncer(t *testing.T) {
	pool(t)                         // the schema
	p, bouncer := bouncedPool(t, 8) // more client connections than the bouncer's two server sessions
	direct, err := pgx.ParseConfig(shared.URL())
	if err != nil {
		t.Fatal(err)
	}
	newBounced := func(t *testing.T) *pglocks.Driver {
		d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "bouncer", Listen: direct})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(t *testing.T) locks.Driver { return newBounced(t) },
		TTL:        conformanceTTL,
		NewDrivers: lossyDrivers(bouncer, p),
	})
	t.Run("Store", func(t *testing.T) {
		taskstatetest.Run(t, lossyStores(bouncer, p, "bouncer"))
	})
	t.Run("Guard", func(t *testing.T) {
		ctx := context.Background()
		d := newBounced(t)
		key := unique("guarded")
		l, err := d.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if err := pglocks.Guard(ctx, tx, l); err != nil {
				return err
			}
			// While the guarded transaction holds its server session, the
			// key stays the holder's even for an Acquire on the other one.
			if _, err := d.Acquire(ctx, key, time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
				return fmt.Errorf("Acquire during the guarded transaction: %v, want ErrNotAcquired", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// bouncedPool starts a PgBouncer in transaction mode before the shared
// server and returns a pool of at most maxConns connections through it
// (0: pgx's default) whose default exec mode caches prepared statements,
// which that mode breaks: what runs on it prepares nothing. It returns the
// bouncer's URL too.
func bouncedPool(t *testing.T, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	b, err := shared.StartBouncer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	cfg, err := pgxpool.ParseConfig(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, b.URL()
}
