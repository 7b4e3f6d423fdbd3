package pglocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
)

// The database still holds a lease past its local deadline (its clock is
// real), but the holder was told to stop: Guard refuses it. (When Done
// closes and how Extend moves it is internal/remotelease's, tested there.)
func TestGuardAfterLocalDeadline(t *testing.T) {
	p := pool(t)
	fc := clockwork.NewFakeClock()
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "done", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	const ttl = 10 * time.Second
	l, err := d.Acquire(ctx, unique("k"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	fc.Advance(ttl - ttl/100 - 2*time.Millisecond)
	lockstest.Closes(t, l.Done(), "Done at the local deadline")
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, l); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard after the local deadline = %v, want ErrLeaseLost", err)
	}
}

// On the real clock, Done closes while the database still holds the key:
// the holder stops before anyone else could acquire.
func TestDoneBeforeDatabaseExpiry(t *testing.T) {
	p := pool(t)
	// A wide margin keeps the test independent of scheduling delays.
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "done", MinDrift: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	key := unique("k")
	l, err := d.Acquire(ctx, key, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, l.Done(), "Done")
	var left time.Duration
	err = p.QueryRow(ctx, "SELECT expires_at - clock_timestamp() FROM ndigo_locks WHERE ns = 'done' AND key = $1", key).Scan(&left)
	if err != nil || left <= 0 {
		t.Fatalf("when Done closed the row had %v left, %v; want the key still held", left, err)
	}
	// The database still holds it, so Release frees it at once.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the local deadline, before the database's expiry: %v", err)
	}
	if _, err := d.Acquire(ctx, key, time.Minute); err != nil {
		t.Fatalf("Acquire after that Release: %v", err)
	}
}
