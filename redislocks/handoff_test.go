package redislocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// A key released while a caller of locks.Wait waited goes to a caller that
// waited: the releaser's own next Wait, and plain Acquire calls, are
// refused until the waiter takes it.
func TestReleaseHandsOffToWaiter(t *testing.T) {
	redislocks.LongHandoff(t) // the steps below, in the reservation
	c := redistest.Start(t).Client()
	ctx := context.Background()
	releaser := newDriver(t, c, "fair")
	waiter := newDriver(t, c, "fair")
	held, err := releaser.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Acquire(locks.WithWaiting(ctx, false), "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("waiter's first attempt while held = %v, want ErrNotAcquired", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "ndigo:{fair:k}:lock").Result(); err != nil || v != "~" {
		t.Fatalf("lock value after the release = %q, %v; want the reservation %q", v, err, "~")
	}
	if _, err := releaser.Acquire(locks.WithWaiting(ctx, false), "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("the releaser's next Wait attempt = %v, want ErrNotAcquired while a waiter waits", err)
	}
	if _, err := releaser.Acquire(ctx, "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("a plain Acquire during the reservation = %v, want ErrNotAcquired", err)
	}
	l, err := waiter.Acquire(locks.WithWaiting(ctx, true), "k", time.Minute)
	if err != nil {
		t.Fatalf("the waiter's attempt after waiting = %v, want the lease", err)
	}
	if l.Token() <= held.Token() {
		t.Fatalf("waiter's token %d not above the releaser's %d", l.Token(), held.Token())
	}
	// The releaser was refused during the reservation: the waiter's lease
	// carries the mark, so its release hands the key on in turn.
	if v, err := c.Get(ctx, "ndigo:{fair:k}:lock").Result(); err != nil || v[len(v)-1] != '*' {
		t.Fatalf("the waiter's lock value = %q, %v; want the '*' mark of the refused Wait caller", v, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A release nobody waited for in locks.Wait frees the key at once, even if a
// plain Acquire was refused during the lease.
func TestReleaseWithoutWaitersFreesTheKey(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fair")
	held, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Acquire while held = %v, want ErrNotAcquired", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(locks.WithWaiting(ctx, false), "k", time.Minute)
	if err != nil {
		t.Fatalf("a first Wait attempt after the release = %v, want the lease", err)
	}
	_ = l.Release(ctx)
}

// A reservation whose waiter gave up lapses after a few milliseconds, and a
// Wait it refused is woken then: it does not sleep until its poll step.
func TestUntakenReservationLapses(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fair")
	held, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A Wait caller that is refused, then gives up.
	if _, err := d.Acquire(locks.WithWaiting(ctx, false), "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Wait attempt while held = %v, want ErrNotAcquired", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, "ndigo:{fair:k}:lock").Result(); err != nil || ttl <= 0 || ttl > 10*time.Millisecond {
		t.Fatalf("reservation PTTL = %v, %v; want (0, 10ms]", ttl, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := locks.Wait(wctx, d, "k", time.Minute, locks.WaitOptions{Budget: time.Minute, Step: time.Hour})
	if err != nil {
		t.Fatalf("Wait refused by an untaken reservation = %v, want the lease once it lapses", err)
	}
	if l.Token() <= held.Token() {
		t.Fatalf("token %d not above %d", l.Token(), held.Token())
	}
	_ = l.Release(ctx)
}

// A lease a Wait caller was refused during stays the holder's: Extend and
// Release accept its marked value.
func TestMarkedLeaseExtends(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fair")
	held, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(locks.WithWaiting(ctx, false), "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("Wait attempt while held = %v, want ErrNotAcquired", err)
	}
	if err := held.Extend(ctx, time.Hour); err != nil {
		t.Fatalf("Extend of a lease a Wait caller was refused during = %v, want nil", err)
	}
	if ttl, err := c.PTTL(ctx, "ndigo:{fair:k}:lock").Result(); err != nil || ttl < 59*time.Minute {
		t.Fatalf("lock PTTL = %v, %v; want about an hour", ttl, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release of the marked lease = %v, want nil", err)
	}
}
