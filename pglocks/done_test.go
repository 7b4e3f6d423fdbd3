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

// Done closes exactly at send time + TTL - (1% of TTL + 2ms), and a
// successful Extend moves that deadline; Guard past it is refused.
func TestDoneDeadlineOnFakeClock(t *testing.T) {
	p := pool(t)
	fc := clockwork.NewFakeClock()
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "done", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	const ttl = 10 * time.Second
	margin := ttl/100 + 2*time.Millisecond
	l, err := d.Acquire(ctx, unique("k"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	fc.Advance(ttl - margin - time.Nanosecond)
	// Advancing the fake clock runs expired timers' functions in
	// goroutines; an Extend is ordered after any such run by the lease's
	// lock, and this one finds the lease live.
	if err := l.Extend(ctx, ttl); err != nil {
		t.Fatalf("Extend just before the local deadline: %v", err)
	}
	if !lockstest.IsOpen(done) {
		t.Fatal("Done closed before the local deadline")
	}
	fc.Advance(ttl - margin - time.Nanosecond)
	if !lockstest.IsOpen(done) {
		t.Fatal("Done closed before the extended deadline")
	}
	fc.Advance(time.Nanosecond)
	lockstest.Closes(t, done, "Done at the extended deadline")
	// The database still holds the lease (its clock is real), but the
	// holder was told to stop: Guard refuses it.
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, l); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard after the local deadline = %v, want ErrLeaseLost", err)
	}
	if err := l.Extend(ctx, ttl); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend after the local deadline = %v, want ErrLeaseLost", err)
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
