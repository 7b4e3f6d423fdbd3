package pglocks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
)

// TestGuardRefusedByDatabase: a holder whose own clock missed its stall
// (a fake clock that never moves, as a paused VM's may) still believes its
// lease live; the database refuses it inside the transaction. Guard
// answers ErrLeaseLost once the lease expired in the database, before any
// successor exists (no successor's write is needed, unlike a token fence),
// and after a successor acquired; the stale holder's write in that
// transaction is rolled back, its Extend and Release are refused, and its
// Done closes.
func TestGuardRefusedByDatabase(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	ns, key := unique("stale"), "k"
	holder, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Clock: clockwork.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	successor := newDriver(t, p, ns)
	if _, err := p.Exec(ctx, "CREATE TABLE IF NOT EXISTS stale_writes (ns text, token bigint)"); err != nil {
		t.Fatal(err)
	}
	stale, err := holder.Acquire(ctx, key, guardTTL)
	if err != nil {
		t.Fatal(err)
	}
	// guardedWrite writes a row as the stale holder would, after Guard, and
	// commits only if Guard passed.
	guardedWrite := func(what string) {
		t.Helper()
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := pglocks.Guard(ctx, tx, stale); !errors.Is(err, locks.ErrLeaseLost) {
			t.Fatalf("Guard of the stale holder %s = %v, want ErrLeaseLost", what, err)
		}
		// A caller that ignores Guard's answer writes on: the write is in
		// the transaction the caller must roll back.
		if _, err := tx.Exec(ctx, "INSERT INTO stale_writes VALUES ($1, $2)", ns, int64(stale.Token())); err != nil {
			t.Fatal(err)
		}
	}
	// asks makes the handle forget that it was found lost, so that its
	// next call asks the database again instead of answering locally.
	asks := func() { pglocks.ForgetRelease(stale) }
	expired(t, p, ns, stale)
	guardedWrite("with no successor yet")
	lockstest.Closes(t, stale.Done(), "after Guard found the lease lost in the database")
	next := acquireSoon(t, successor, key)
	asks()
	guardedWrite("after a successor acquired")
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM stale_writes WHERE ns = $1", ns).Scan(&n); err != nil || n != 0 {
		t.Errorf("stale writes committed: %d, %v", n, err)
	}
	asks()
	if err := stale.Extend(ctx, guardTTL); !errors.Is(err, locks.ErrLeaseLost) {
		t.Errorf("the stale holder's Extend = %v, want ErrLeaseLost", err)
	}
	asks()
	if err := stale.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Errorf("the stale holder's Release = %v, want ErrLeaseLost", err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, next); err != nil {
		t.Fatalf("the successor's Guard: %v", err)
	}
}
