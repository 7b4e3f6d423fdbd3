package pglocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
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

// TestNoPreparedStatements: the driver prepares no named statement on the
// server, whatever the pool's default exec mode, so that it works through
// PgBouncer in transaction mode.
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
	var n int
	err = p.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d prepared statements on the session, want 0", n)
	}
}
