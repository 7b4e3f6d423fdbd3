package redislocks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

// checkRedisError fails t unless err reports a Redis failure for key: not
// ErrNotAcquired or ErrLeaseLost, and no lease.
func checkRedisError(t *testing.T, what, key string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s succeeded against an unavailable Redis", what)
	case errors.Is(err, locks.ErrNotAcquired) || errors.Is(err, locks.ErrLeaseLost):
		t.Fatalf("%s = %v; an unavailable Redis must not look like a held key or a lost lease", what, err)
	case !errors.Is(err, redislocks.ErrRedis):
		t.Fatalf("%s = %v, want ErrRedis", what, err)
	case !strings.Contains(err.Error(), key):
		t.Fatalf("%s = %v; the error must name the key %q", what, err, key)
	}
}

func TestKilledRedis(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	d := newDriver(t, c, "errs")
	ctx := context.Background()
	l, err := d.Acquire(ctx, "held", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()

	bounded, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := d.Acquire(bounded, "job", time.Minute)
	if got != nil {
		t.Fatal("Acquire against a killed Redis returned a lease")
	}
	checkRedisError(t, "Acquire", "job", err)
	checkRedisError(t, "Extend", "held", l.Extend(bounded, time.Minute))
	checkRedisError(t, "Release", "held", l.Release(bounded))
	if !lockstest.IsOpen(l.Done()) {
		t.Fatal("a failed Extend or Release closed Done: the lease's fate is unknown, not over")
	}
	s.Restart()
	if _, err := d.Acquire(ctx, "job", time.Minute); err != nil {
		t.Fatalf("Acquire after Redis came back: %v", err)
	}
}

// A hung server (SIGSTOP) answers nothing; the caller's context bounds the
// wait (the client has ContextTimeoutEnabled) and the error is not
// ErrNotAcquired.
func TestPausedRedisIsBoundedByContext(t *testing.T) {
	s := redistest.Start(t)
	d := newDriver(t, s.Client(), "errs")
	ctx := context.Background()
	if _, err := d.Acquire(ctx, "warm", time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	defer s.Resume()
	bounded, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := d.Acquire(bounded, "job", time.Minute)
	elapsed := time.Since(start)
	if l != nil {
		t.Fatal("Acquire against a paused Redis returned a lease")
	}
	checkRedisError(t, "Acquire", "job", err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want it to wrap context.DeadlineExceeded", err)
	}
	// Far above the 100ms deadline, far below go-redis's own 3s read
	// timeout: the context, not a client default, ended the call.
	if elapsed > 2*time.Second {
		t.Fatalf("Acquire took %v with a 100ms context", elapsed)
	}
}

// Without ContextTimeoutEnabled, go-redis ignores context deadlines on reads
// and the client's ReadTimeout bounds the call instead.
func TestPausedRedisIsBoundedByReadTimeout(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client(&redis.Options{ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	d := newDriver(t, c, "errs")
	ctx := context.Background()
	if _, err := d.Acquire(ctx, "warm", time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	defer s.Resume()
	start := time.Now()
	l, err := d.Acquire(ctx, "job", time.Minute)
	elapsed := time.Since(start)
	if l != nil {
		t.Fatal("Acquire against a paused Redis returned a lease")
	}
	checkRedisError(t, "Acquire", "job", err)
	if elapsed > 2*time.Second {
		t.Fatalf("Acquire took %v with a 100ms read timeout", elapsed)
	}
}

// Waiting on a dead Redis ends with the Redis error at the first attempt,
// not after the wait budget and not as ErrNotAcquired.
func TestWaitOnKilledRedis(t *testing.T) {
	s := redistest.Start(t)
	d := newDriver(t, s.Client(), "errs")
	s.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := locks.Wait(ctx, d, "job", time.Minute, locks.WaitOptions{Budget: time.Hour})
	if l != nil {
		t.Fatal("Wait on a killed Redis returned a lease")
	}
	checkRedisError(t, "Wait", "job", err)
	if ctx.Err() != nil {
		t.Fatalf("Wait ran into the test's 5s context (%v) instead of failing at once", err)
	}
}
