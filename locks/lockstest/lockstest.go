// Package lockstest is the conformance suite that every locks.Driver must
// pass. A driver's own tests call [Run] with a [Harness] that makes fresh
// drivers; the suite checks mutual exclusion, fencing-token order, stale
// holders, expiry, Done, waiting, context cancellation, bad input and the
// TTL bounds (locks.MaxTTL for every driver, MinTTL for a locks.MinTTLer),
// the key length bound (locks.MaxKeyLen), fire claims (with and without an acquisition),
// semaphores built on the contract (locks.AcquireSlot) and memberships;
// and faults, on two drivers of one backend as two nodes have them
// ([Harness.NewDrivers]):
//
//   - LostReply/<call>/ReplyLost/trip<n>: every mutating call (Acquire,
//     Extend to a longer and to a shorter TTL, Release, a driver's first
//     Claim and a later one, AcquireClaim, AcquireClaim with EvenIfHeld
//     on a held key, AcquireSlot with a claim, a member's first Heartbeat
//     and a later one, Leave) with the
//     reply of its n-th round trip lost after the backend applied it, for
//     each n up to the call's round trips, and the other node's call in
//     between (an Acquire of the key, a claim of the same fire, a
//     heartbeat) before the client's resend (Retried) or the caller's
//     error (Failed).
//   - LostReply/<call>/ContextEnded/trip<n>: the same, with the call's
//     context ended once the round trip was applied: the call returns nil
//     or the context's error.
//   - After each: the contract. One holder (never a lease to both nodes);
//     tokens increase; claims never go back (a claimed instant stays
//     claimed: a later claim of it or of an earlier one is refused, and a
//     resend recognises its own claim); an answered call did what it
//     asked; a released key is free, and one that a failed call may have
//     taken is free within that call's TTL; Done closes when the lease is
//     lost (after an Extend of unknown outcome, no later than the key
//     frees); and Drivers.Leaks: what the backend holds beyond what the
//     driver says it keeps (etcd leases without a key, Redis keys without
//     an expiry, PostgreSQL rows beyond the bound).
//
// A driver with no wire (locks.InProcessDriver) runs the same cases as
// [NoWire]: the call, then the other node's, checked as for a resend.
package lockstest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// A Harness tells the suite how to make and drive a locks.Driver.
type Harness struct {
	// NewDriver returns a driver for one test. Drivers made by one harness
	// may share state (the suite uses distinct keys per test).
	NewDriver func(t *testing.T) locks.Driver
	// Clock is the driver's clock. A *clockwork.FakeClock is advanced by
	// the suite; nil means real time, and the suite then sleeps to let
	// leases expire.
	Clock clockwork.Clock
	// TTL is the short lease the suite lets expire; zero means 100ms. With
	// real time, keep it well above the driver's round-trip time.
	TTL time.Duration
	// NewDrivers returns two drivers on one new backend, or on the
	// harness's shared one, and the faults the harness can put in the
	// first one's calls, for the LostReply cases. Every driver with a wire
	// sets it; a nil NewDrivers skips those cases, saying so.
	NewDrivers func(t *testing.T) Drivers
}

// long is a lease that no test lets expire.
const long = time.Minute

// Run runs the conformance suite against the harness's drivers.
func Run(t *testing.T, h Harness) {
	if h.NewDriver == nil {
		t.Fatal("lockstest: Harness.NewDriver is nil")
	}
	if h.TTL == 0 {
		h.TTL = 100 * time.Millisecond
	}
	s := &suite{h: h}
	t.Run("BadInput", s.badInput)
	t.Run("MaxTTL", s.maxTTL)
	t.Run("MinTTL", s.minTTL)
	t.Run("ReleaseAfterLostExtend", s.releaseAfterLostExtend)
	t.Run("CancelledContext", s.cancelledContext)
	t.Run("MutualExclusion", s.mutualExclusion)
	t.Run("TokensIncrease", s.tokensIncrease)
	t.Run("KeysAreIndependent", s.keysAreIndependent)
	t.Run("ReleaseTwice", s.releaseTwice)
	t.Run("Expiry", s.expiry)
	t.Run("StaleHolder", s.staleHolder)
	t.Run("Extend", s.extend)
	t.Run("DoneOnRelease", s.doneOnRelease)
	t.Run("DoneOnExpiry", s.doneOnExpiry)
	t.Run("DoneOnLostExtend", s.doneOnLostExtend)
	t.Run("WaitForRelease", s.waitForRelease)
	t.Run("WaitBudget", s.waitBudget)
	t.Run("LeaseContext", s.leaseContext)
	t.Run("Claim", s.claim)
	t.Run("AcquireClaim", s.acquireClaim)
	t.Run("AcquireClaims", s.acquireClaims)
	t.Run("LongestKey", s.longestKey)
	t.Run("Slots", s.slots)
	t.Run("SlotsConcurrent", s.slotsConcurrent)
	t.Run("SlotsClaim", s.slotsClaim)
	t.Run("SlotsBadInput", s.slotsBadInput)
	t.Run("Membership", s.membership)
	t.Run("LostReply", s.lostReply)
}

type suite struct {
	h Harness
	n atomic.Int64
}

// key returns a key no other test of this run uses.
func (s *suite) key(t *testing.T) string {
	return fmt.Sprintf("lockstest/%s/%d/%d", t.Name(), time.Now().UnixNano(), s.n.Add(1))
}

// advance lets d pass on the driver's clock.
func (s *suite) advance(d time.Duration) {
	if fc, ok := s.h.Clock.(*clockwork.FakeClock); ok {
		fc.Advance(d)
		return
	}
	time.Sleep(d)
}

// pastTTL lets a lease of the harness's TTL expire.
func (s *suite) pastTTL() { s.advance(s.h.TTL + s.h.TTL/2) }

func mustAcquire(t *testing.T, d locks.Driver, key string, ttl time.Duration) locks.Lease {
	t.Helper()
	l, err := d.Acquire(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %v): %v", key, ttl, err)
	}
	if l.Key() != key {
		t.Fatalf("Key() = %q, want %q", l.Key(), key)
	}
	return l
}

func mustBeHeld(t *testing.T, d locks.Driver, key string) {
	t.Helper()
	l, err := d.Acquire(context.Background(), key, long)
	if !errors.Is(err, locks.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("Acquire(%q) on a held key: %v, want ErrNotAcquired", key, err)
	}
}

// Closes fails t unless ch closes within a bound. The bound is a failure
// deadline, not a wait for the behaviour: a correct driver closes ch long
// before it, even on a loaded machine where a server's restart and a
// client's reconnection take seconds (10s was not enough with two CPU
// burners beside make test). Driver tests use it for Done and Watch
// channels.
func Closes(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not closed", what)
	}
}

// IsOpen reports whether ch is still open, without blocking.
func IsOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func (s *suite) badInput(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		key  string
		ttl  time.Duration
	}{
		{"empty key", "", time.Second},
		{"zero ttl", s.key(t), 0},
		{"negative ttl", s.key(t), -time.Second},
		{"ttl above MaxTTL", s.key(t), locks.MaxTTL + 1},
		{"largest ttl", s.key(t), math.MaxInt64},
	} {
		l, err := d.Acquire(ctx, c.key, c.ttl)
		if !errors.Is(err, locks.ErrInvalid) || l != nil {
			t.Errorf("%s: Acquire(%q, %v) = %v, %v; want ErrInvalid", c.name, c.key, c.ttl, l, err)
		}
	}
	var nilCtx context.Context
	if _, err := d.Acquire(nilCtx, s.key(t), time.Second); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("nil ctx: Acquire = %v, want ErrInvalid", err)
	}
	key := s.key(t)
	l := mustAcquire(t, d, key, long)
	for _, ttl := range []time.Duration{0, -time.Second, locks.MaxTTL + 1, math.MaxInt64} {
		if err := l.Extend(ctx, ttl); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("Extend(%v) = %v, want ErrInvalid", ttl, err)
		}
	}
	// An Extend refused as invalid changes nothing: the lease is still held,
	// and its Release gives the key up.
	mustBeHeld(t, d, key)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after a refused Extend: %v, want nil", err)
	}
	_ = mustAcquire(t, d, key, long).Release(ctx)
	if _, err := locks.Wait(ctx, nil, key, time.Second, locks.WaitOptions{}); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Wait(nil driver) = %v, want ErrInvalid", err)
	}
}

func (s *suite) cancelledContext(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	key := s.key(t)
	if l, err := d.Acquire(ctx, key, long); !errors.Is(err, context.Canceled) || l != nil {
		t.Fatalf("Acquire with a cancelled ctx = %v, %v; want context.Canceled", l, err)
	}
	l := mustAcquire(t, d, key, long) // the cancelled attempt took nothing
	if err := l.Extend(ctx, long); !errors.Is(err, context.Canceled) {
		t.Errorf("Extend with a cancelled ctx = %v, want context.Canceled", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) mutualExclusion(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	const workers, rounds = 16, 20
	var inside, entered, maxInside atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := d.Acquire(context.Background(), key, long)
				if errors.Is(err, locks.ErrNotAcquired) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				entered.Add(1)
				if n := inside.Add(1); n > maxInside.Load() {
					maxInside.Store(n)
				}
				inside.Add(-1)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once, want 1", maxInside.Load())
	}
	if entered.Load() == 0 {
		t.Fatal("no worker ever acquired the key")
	}
}

func (s *suite) tokensIncrease(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	var last uint64
	for i := range 20 {
		l := mustAcquire(t, d, key, long)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Tokens also increase across a driver made later (a restart of the
	// holder's process).
	l := mustAcquire(t, s.h.NewDriver(t), key, long)
	if l.Token() <= last {
		t.Fatalf("token %d from a new driver not above %d", l.Token(), last)
	}
	_ = l.Release(context.Background())
}

func (s *suite) keysAreIndependent(t *testing.T) {
	d := s.h.NewDriver(t)
	a, b := s.key(t), s.key(t)
	la := mustAcquire(t, d, a, long)
	lb := mustAcquire(t, d, b, long)
	if err := la.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustBeHeld(t, d, b)
	if err := lb.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) releaseTwice(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	ctx := context.Background()
	l := mustAcquire(t, d, key, long)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release: %v, want nil", err)
	}
	next := mustAcquire(t, d, key, long)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("third Release after a successor acquired: %v, want nil", err)
	}
	mustBeHeld(t, d, key) // the old handle's Release touched nothing
	if err := l.Extend(ctx, long); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend after Release = %v, want ErrLeaseLost", err)
	}
	// The refused Extend does not turn the released lease into a lost one.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after Release and a refused Extend: %v, want nil", err)
	}
	mustBeHeld(t, d, key)
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) expiry(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	first := mustAcquire(t, d, key, s.h.TTL)
	mustBeHeld(t, d, key)
	s.pastTTL()
	second := mustAcquire(t, d, key, long)
	if second.Token() <= first.Token() {
		t.Fatalf("token after expiry %d not above %d", second.Token(), first.Token())
	}
	if err := second.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) staleHolder(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	ctx := context.Background()
	stale := mustAcquire(t, d, key, s.h.TTL)
	s.pastTTL()
	// Expired without a successor: still lost, and it changes nothing.
	if err := stale.Extend(ctx, long); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend of an expired lease = %v, want ErrLeaseLost", err)
	}
	successor := mustAcquire(t, d, key, long)
	if err := stale.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
	mustBeHeld(t, d, key)
	if err := stale.Extend(ctx, s.h.TTL/4); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Extend = %v, want ErrLeaseLost", err)
	}
	// The stale Extend did not shorten the successor's lease.
	s.pastTTL()
	mustBeHeld(t, d, key)
	if err := successor.Extend(ctx, long); err != nil {
		t.Fatalf("successor Extend: %v", err)
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatalf("successor Release: %v", err)
	}
}

// maxTTL: a TTL of exactly locks.MaxTTL is accepted by Acquire and Extend.
func (s *suite) maxTTL(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	ctx := context.Background()
	l := mustAcquire(t, d, key, locks.MaxTTL)
	mustBeHeld(t, d, key)
	if err := l.Extend(ctx, locks.MaxTTL); err != nil {
		t.Fatalf("Extend(MaxTTL): %v", err)
	}
	if !IsOpen(l.Done()) {
		t.Fatal("Done closed on a lease of MaxTTL")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = mustAcquire(t, d, key, long).Release(ctx)
}

// minTTL: a driver that is a locks.MinTTLer rejects a TTL at or below its
// MinTTL on Acquire and Extend with ErrInvalid, and accepts one above it.
// Other drivers accept every positive TTL.
func (s *suite) minTTL(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	m, ok := locks.As[locks.MinTTLer](d)
	if !ok {
		l := mustAcquire(t, d, s.key(t), time.Nanosecond)
		_ = l.Release(ctx)
		return
	}
	minTTL := m.MinTTL()
	if minTTL <= 0 {
		t.Fatalf("MinTTL() = %v, want > 0 (a driver without a minimum need not be a MinTTLer)", minTTL)
	}
	key := s.key(t)
	if l, err := d.Acquire(ctx, key, minTTL); !errors.Is(err, locks.ErrInvalid) || l != nil {
		t.Fatalf("Acquire(MinTTL %v) = %v, %v; want ErrInvalid", minTTL, l, err)
	}
	l := mustAcquire(t, d, key, long)
	if err := l.Extend(ctx, minTTL); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("Extend(MinTTL %v) = %v, want ErrInvalid", minTTL, err)
	}
	mustBeHeld(t, d, key)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after a refused Extend: %v, want nil", err)
	}
	// Its lease may be over before the next call: only Acquire is checked.
	if _, err := d.Acquire(ctx, s.key(t), minTTL+1); err != nil {
		t.Fatalf("Acquire(MinTTL+1ns): %v", err)
	}
}

// releaseAfterLostExtend: once Extend found the lease lost, Release answers
// ErrLeaseLost too, again and again, whether the key was taken since or not,
// and touches nothing.
func (s *suite) releaseAfterLostExtend(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	for _, successor := range []bool{false, true} {
		key := s.key(t)
		l := mustAcquire(t, d, key, s.h.TTL)
		s.pastTTL()
		if err := l.Extend(ctx, long); !errors.Is(err, locks.ErrLeaseLost) {
			t.Fatalf("Extend of an expired lease = %v, want ErrLeaseLost", err)
		}
		var next locks.Lease
		if successor {
			next = mustAcquire(t, d, key, long)
		}
		for i := range 2 {
			if err := l.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
				t.Fatalf("successor %v: Release %d after a lost Extend = %v, want ErrLeaseLost", successor, i+1, err)
			}
		}
		if successor {
			mustBeHeld(t, d, key)
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = mustAcquire(t, d, key, long).Release(ctx)
		}
	}
}

func (s *suite) extend(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	ctx := context.Background()
	// Each Extend comes a TTL into a lease of five: four TTLs of margin for
	// a loaded machine (with real time).
	l := mustAcquire(t, d, key, 5*s.h.TTL)
	for range 3 {
		s.advance(s.h.TTL)
		if err := l.Extend(ctx, 5*s.h.TTL); err != nil {
			t.Fatalf("Extend of a live lease: %v", err)
		}
		mustBeHeld(t, d, key)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) doneOnRelease(t *testing.T) {
	d := s.h.NewDriver(t)
	l := mustAcquire(t, d, s.key(t), long)
	done := l.Done()
	if !IsOpen(done) {
		t.Fatal("Done closed while the lease is held")
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	Closes(t, done, "after Release")
}

func (s *suite) doneOnExpiry(t *testing.T) {
	d := s.h.NewDriver(t)
	start := time.Now()
	l := mustAcquire(t, d, s.key(t), s.h.TTL)
	done := l.Done()
	// Judged only while the lease surely runs: a loaded machine may take
	// the whole TTL (real time) between the acquire and this check.
	if !IsOpen(done) && time.Since(start) < s.h.TTL/2 {
		t.Fatal("Done closed while the lease is held")
	}
	s.pastTTL()
	Closes(t, done, "after expiry")
	if err := l.Release(context.Background()); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Release after expiry = %v, want ErrLeaseLost", err)
	}
}

func (s *suite) doneOnLostExtend(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	l := mustAcquire(t, d, key, s.h.TTL)
	s.pastTTL()
	successor := mustAcquire(t, d, key, long)
	if err := l.Extend(context.Background(), long); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend = %v, want ErrLeaseLost", err)
	}
	Closes(t, l.Done(), "after a lost Extend")
	if !IsOpen(successor.Done()) {
		t.Fatal("the successor's Done closed")
	}
	_ = successor.Release(context.Background())
}

// waitResult is what a Wait in a goroutine returned.
type waitResult struct {
	l   locks.Lease
	err error
}

func (s *suite) goWait(d locks.Driver, key string, budget time.Duration) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		l, err := locks.Wait(context.Background(), d, key, long, locks.WaitOptions{
			Budget: budget, Step: s.h.TTL, Clock: s.h.Clock,
		})
		ch <- waitResult{l, err}
	}()
	return ch
}

// await returns the waiter's result, advancing a fake clock by step while
// the waiter polls, for at most a bounded number of steps.
func (s *suite) await(t *testing.T, ch <-chan waitResult, step time.Duration) waitResult {
	t.Helper()
	for range 1000 {
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Millisecond):
			if _, fake := s.h.Clock.(*clockwork.FakeClock); fake {
				s.advance(step)
			}
		}
	}
	t.Fatal("Wait did not return")
	return waitResult{}
}

func (s *suite) waitForRelease(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	holder := mustAcquire(t, d, key, long)
	ch := s.goWait(d, key, long)
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := s.await(t, ch, s.h.TTL)
	if r.err != nil {
		t.Fatalf("Wait after Release: %v", r.err)
	}
	if r.l.Token() <= holder.Token() {
		t.Fatalf("waiter's token %d not above the holder's %d", r.l.Token(), holder.Token())
	}
	_ = r.l.Release(context.Background())
}

func (s *suite) waitBudget(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	holder := mustAcquire(t, d, key, long)
	r := s.await(t, s.goWait(d, key, 3*s.h.TTL), s.h.TTL)
	if !errors.Is(r.err, locks.ErrNotAcquired) || r.l != nil {
		t.Fatalf("Wait on a key held past the budget = %v, %v; want ErrNotAcquired", r.l, r.err)
	}
	_ = holder.Release(context.Background())
}

func (s *suite) leaseContext(t *testing.T) {
	d := s.h.NewDriver(t)
	key := s.key(t)
	// A long lease first, so that a loaded machine does not let it lapse
	// before the first check; then the short one, to let it expire.
	l := mustAcquire(t, d, key, long)
	ctx, cancel := locks.WithLease(context.Background(), l)
	defer cancel()
	if got, ok := locks.FromContext(ctx); !ok || got.Token() != l.Token() {
		t.Fatalf("FromContext = %v, %v; want the lease", got, ok)
	}
	if ctx.Err() != nil {
		t.Fatal("lease context cancelled while the lease is held")
	}
	if err := l.Extend(context.Background(), s.h.TTL); err != nil {
		t.Fatalf("Extend to the short TTL: %v", err)
	}
	s.pastTTL()
	Closes(t, ctx.Done(), "lease context after expiry")
	if !errors.Is(context.Cause(ctx), locks.ErrLeaseLost) {
		t.Fatalf("cause = %v, want ErrLeaseLost", context.Cause(ctx))
	}
}

func (s *suite) claim(t *testing.T) {
	d := s.h.NewDriver(t)
	c, ok := d.(locks.Claimer)
	if !ok {
		t.Fatalf("%T does not implement locks.Claimer", d)
	}
	ctx := context.Background()
	key := s.key(t)
	// Claims live long, but the last, whose expiry the case checks: a
	// short one could lapse between two calls on a loaded machine.
	ttl := long
	claim := func(seq int64, want bool) {
		t.Helper()
		if got, err := c.Claim(ctx, key, seq, ttl); got != want || err != nil {
			t.Fatalf("Claim(%d) = %v, %v; want %v", seq, got, err, want)
		}
	}
	claim(10, true)
	claim(10, false) // a second call for the same seq is another claimant
	claim(9, false)  // older than the record
	claim(11, true)
	claim(10, false)
	// Claims and leases of one key are independent.
	l := mustAcquire(t, d, key, long)
	ttl = s.h.TTL
	claim(12, true)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The record lives ttl after the last successful claim.
	s.pastTTL()
	claim(5, true)
	for _, bad := range []struct {
		key string
		seq int64
		ttl time.Duration
	}{{"", 1, s.h.TTL}, {key, 1, 0}, {key, 1, -time.Second}, {key, -1, s.h.TTL},
		{key, locks.MaxClaimSeq + 1, s.h.TTL}, {key, 1, locks.MaxTTL + 1}} {
		if _, err := c.Claim(ctx, bad.key, bad.seq, bad.ttl); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("Claim(%q, %d, %v) = %v, want ErrInvalid", bad.key, bad.seq, bad.ttl, err)
		}
	}
	claim(locks.MaxClaimSeq, true)
}

// longKey returns a key of n bytes that starts with a key of this test's
// own: printable bytes that do not repeat, so that no backend can compress
// it below its limits.
func (s *suite) longKey(t *testing.T, n int) string {
	b := []byte(s.key(t) + "/")
	for x := uint32(2463534242); len(b) < n; {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b = append(b, byte('!'+x%94))
	}
	return string(b[:n])
}

// longestKey: a key of exactly locks.MaxKeyLen bytes is acquired, held,
// extended, released, taken again with a greater token and claimed, like
// any other; one byte more is ErrInvalid from Acquire and from Claim, with
// an error that names the limit and the length.
func (s *suite) longestKey(t *testing.T) {
	d := s.h.NewDriver(t)
	ctx := context.Background()
	key := s.longKey(t, locks.MaxKeyLen)
	// Failures quote the key's start only: it is 1 MiB long.
	acquire := func() locks.Lease {
		t.Helper()
		l, err := d.Acquire(ctx, key, long)
		if err != nil {
			t.Fatalf("Acquire(key of MaxKeyLen bytes): %.300v", err)
		}
		if l.Key() != key {
			t.Fatalf("Key() = %.80q…, want the key acquired", l.Key())
		}
		return l
	}
	held := func() {
		t.Helper()
		if l, err := d.Acquire(ctx, key, long); !errors.Is(err, locks.ErrNotAcquired) {
			if l != nil {
				_ = l.Release(ctx)
			}
			t.Fatalf("Acquire(key of MaxKeyLen bytes) while held = %.300v, want ErrNotAcquired", err)
		}
	}
	l := acquire()
	held()
	if err := l.Extend(ctx, long); err != nil {
		t.Fatalf("Extend of a lease on a key of MaxKeyLen bytes: %.300v", err)
	}
	held()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release of a lease on a key of MaxKeyLen bytes: %.300v", err)
	}
	next := acquire()
	if next.Token() <= l.Token() {
		t.Fatalf("token %d after the release not above %d", next.Token(), l.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c, ok := d.(locks.Claimer); ok {
		for _, want := range []bool{true, false} {
			if got, err := c.Claim(ctx, key, 7, long); got != want || err != nil {
				t.Fatalf("Claim(key of MaxKeyLen bytes, 7) = %v, %.300v; want %v", got, err, want)
			}
		}
	}
	tooLong := s.longKey(t, locks.MaxKeyLen+1)
	want := fmt.Sprintf("is %d bytes long, the limit is locks.MaxKeyLen (%d bytes)", locks.MaxKeyLen+1, locks.MaxKeyLen)
	l, err := d.Acquire(ctx, tooLong, long)
	if !errors.Is(err, locks.ErrInvalid) || l != nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Acquire(key of MaxKeyLen+1 bytes) = %v, %.300v; want ErrInvalid saying %q", l, err, want)
	}
	if c, ok := d.(locks.Claimer); ok {
		if got, err := c.Claim(ctx, tooLong, 1, long); got || !errors.Is(err, locks.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Claim(key of MaxKeyLen+1 bytes) = %v, %.300v; want ErrInvalid saying %q", got, err, want)
		}
	}
	if err != nil && len(err.Error()) > 1024 {
		t.Errorf("the error quotes %d bytes of the key; want its start only", len(err.Error()))
	}
}
