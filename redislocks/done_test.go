package redislocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

// Done closes exactly at send time + TTL - (1% of TTL + 2ms), and a
// successful Extend moves that deadline.
func TestDoneDeadlineOnFakeClock(t *testing.T) {
	c := redistest.Start(t).Client()
	fc := clockwork.NewFakeClock()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "done", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	const ttl = 10 * time.Second
	margin := ttl/100 + 2*time.Millisecond
	l, err := d.Acquire(ctx, "k", ttl)
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
	// The Extend was sent at the current fake time: the deadline moved.
	fc.Advance(ttl - margin - time.Nanosecond)
	if !lockstest.IsOpen(done) {
		t.Fatal("Done closed before the extended deadline")
	}
	fc.Advance(time.Nanosecond)
	lockstest.Closes(t, done, "Done at the extended deadline")
	if err := l.Extend(ctx, ttl); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend after the local deadline = %v, want ErrLeaseLost", err)
	}
}

// On the real clock, Done closes while Redis still holds the key: the holder
// stops before anyone else could acquire.
func TestDoneBeforeRedisExpiry(t *testing.T) {
	c := redistest.Start(t).Client()
	// A wide margin keeps the test independent of scheduling delays.
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "done", MinDrift: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	l, err := d.Acquire(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, l.Done(), "Done")
	ttl, err := c.PTTL(ctx, "ndigo:{done:k}:lock").Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("when Done closed Redis PTTL = %v, %v; want the key still held", ttl, err)
	}
	// Redis still holds it, so Release frees it at once.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the local deadline, before Redis expiry: %v", err)
	}
	if _, err := d.Acquire(ctx, "k", time.Minute); err != nil {
		t.Fatalf("Acquire after that Release: %v", err)
	}
}
