package lockstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// Drivers are two drivers on one backend, as two nodes of a cluster have,
// and the faults a harness can put in the first one's calls: what
// [Harness.NewDrivers] returns for the suite's LostReply cases.
type Drivers struct {
	// A and B are the two nodes' drivers. A driver of one process may be
	// both.
	A, B locks.Driver
	// Loss is what a lost reply does to a call of A.
	Loss Loss
	// LoseReply arms one loss: of the round trips A makes from now on
	// (those that may change the backend: a harness may count them all),
	// the n-th (n >= 1) runs on the backend, its reply is lost, then runs
	// (calls of B), and only then does A's client see the connection end,
	// and resend the round trip (Retried) or return an error (Failed).
	// then may run on another goroutine than the call's; it must return
	// before A's client gives up waiting. It is nil for NoWire. The
	// ContextEnded cases use it too: their then ends the call's context,
	// so that A's client, which does not resend a call whose context
	// ended, returns its error.
	LoseReply func(n int, then func())
	// Leaks, if set, reports what the backend holds that the driver's
	// documentation does not say it keeps (etcd leases without a key,
	// Redis keys without an expiry, PostgreSQL rows beyond the stated
	// bound), or nil. The suite calls it once each case that made these
	// drivers has ended (each of its leases released or expired), before
	// the harness's own cleanups. A backend shared across cases reports
	// only what these drivers could have left: their namespace, or what
	// appeared since they were made.
	Leaks func(t *testing.T) error
}

// A Loss is what a lost reply does to a driver's call: what the driver
// promises across it, which the suite's LostReply cases check.
type Loss int

const (
	// NoWire: the driver has no wire (locks.InProcessDriver), and no reply
	// is lost. The LostReply cases make the call, then the other node's
	// calls, and check the same outcome as for Retried.
	NoWire Loss = iota
	// Retried: the client resends a round trip whose reply was lost
	// (go-redis does, by default): the call returns what its first attempt
	// did, whatever the other node did before the resend.
	Retried
	// Failed: the client does not resend it (pgx and clientv3 never resend
	// a write): the call may return an error, and the backend is left as
	// the contract allows after a call that ran once, never twice.
	Failed
)

// String names l as its constant does.
func (l Loss) String() string {
	switch l {
	case NoWire:
		return "NoWire"
	case Retried:
		return "Retried"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("Loss(%d)", int(l))
}

// maxTrips bounds the round trips of one call that the suite loses one by
// one: no driver's call makes more.
const maxTrips = 8

// lostReply runs the fault cases: every mutating call of A, with the reply
// of each of its round trips lost in turn after the backend applied it
// (ReplyLost) or with its context ended then (ContextEnded), and B's call
// in between; then the contract's checks, and the harness's Leaks.
func (s *suite) lostReply(t *testing.T) {
	if s.h.NewDrivers == nil {
		t.Skip("lockstest: Harness.NewDrivers is nil: this harness cannot lose its driver's replies, so the lost-reply cases do not run")
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, Drivers, *fault)
	}{
		{"Acquire", s.lostAcquire},
		// From 3 TTLs, so that a busy machine does not let the lease lapse
		// before its Extend; to 6, which the wait for a key that a failed
		// call may have taken (ghost, then 7 half TTLs) outlasts.
		{"ExtendLonger", func(t *testing.T, d Drivers, f *fault) { s.lostExtend(t, d, f, 3*s.h.TTL, 6*s.h.TTL) }},
		{"ExtendShorter", func(t *testing.T, d Drivers, f *fault) { s.lostExtend(t, d, f, long, s.h.TTL) }},
		{"Release", s.lostRelease},
		{"Claim", func(t *testing.T, d Drivers, f *fault) { s.lostClaim(t, d, f, false) }},
		{"ClaimAgain", func(t *testing.T, d Drivers, f *fault) { s.lostClaim(t, d, f, true) }},
		{"AcquireClaim", s.lostAcquireClaim},
		{"AcquireClaimEvenIfHeld", s.lostAcquireClaimEvenIfHeld},
		{"AcquireSlot", s.lostAcquireSlot},
		{"Heartbeat", func(t *testing.T, d Drivers, f *fault) { s.lostHeartbeat(t, d, f, false) }},
		{"HeartbeatAgain", func(t *testing.T, d Drivers, f *fault) { s.lostHeartbeat(t, d, f, true) }},
		{"Leave", s.lostLeave},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, ended := range []bool{false, true} {
				mode := "ReplyLost"
				if ended {
					mode = "ContextEnded"
				}
				t.Run(mode, func(t *testing.T) { s.eachTrip(t, ended, c.run) })
			}
		})
	}
}

// ghost is the TTL of the leases that A's lost calls take: when A's caller
// got an error, the key may stay held by no one for that long.
func (s *suite) ghost() time.Duration { return 4 * s.h.TTL }

// drivers returns the drivers of a new backend, whose Leaks the suite
// checks once t has ended.
func (s *suite) drivers(t *testing.T) Drivers {
	t.Helper()
	d := s.h.NewDrivers(t)
	switch {
	case d.A == nil || d.B == nil:
		t.Fatal("lockstest: Harness.NewDrivers returned a nil driver")
	case d.Loss == NoWire && d.LoseReply != nil:
		t.Fatal("lockstest: Drivers.LoseReply is set and Loss is NoWire: set Loss to Retried or Failed")
	case d.Loss != NoWire && d.LoseReply == nil:
		t.Fatalf("lockstest: Drivers.Loss is %v and LoseReply is nil: a driver with a wire must lose replies", d.Loss)
	}
	if d.Leaks != nil {
		t.Cleanup(func() {
			if err := d.Leaks(t); err != nil {
				t.Errorf("after %s: Drivers.Leaks: %v", t.Name(), err)
			}
		})
	}
	return d
}

// eachTrip runs c on new drivers once per round trip of the call c makes
// through its fault: trip1 loses the first round trip's reply, trip2 the
// second's, and so on until the call makes fewer (NoWire: once).
func (s *suite) eachTrip(t *testing.T, ended bool, c func(*testing.T, Drivers, *fault)) {
	for n := 1; n <= maxTrips; n++ {
		f := &fault{n: n, ended: ended}
		t.Run(fmt.Sprintf("trip%d", n), func(t *testing.T) {
			d := s.drivers(t)
			f.d = d
			c(t, d, f)
		})
		if !f.lost || f.d.Loss == NoWire {
			return
		}
	}
	t.Fatalf("a call made more than %d round trips", maxTrips)
}

// A fault is one case's loss: of round trip n of its call, with the
// context ended or not.
type fault struct {
	d     Drivers
	n     int
	ended bool
	lost  bool // the call reached round trip n and lost its reply
}

// call makes call with the reply of its round trip f.n lost after the
// backend applied it, and then run (B's calls) before A's caller sees the
// loss; with f.ended, then is followed by the end of call's context. For
// NoWire, call runs, then then. It reports whether the call reached round
// trip f.n (a case ends when it did not: the call has fewer round trips),
// and call's error.
// It checks the error: nil for NoWire and Retried without f.ended, nil or
// the context's error with f.ended (a driver may learn the outcome
// another way); a Failed call may return any error, which the case's
// checks judge.
func (f *fault) call(t *testing.T, op string, call func(ctx context.Context) error, then func()) (reached bool, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	ran := make(chan struct{})
	wrapped := func() {
		once.Do(func() {
			then()
			if f.ended {
				cancel()
			}
			close(ran)
		})
	}
	if f.d.Loss == NoWire {
		err = call(ctx)
		wrapped()
	} else {
		f.d.LoseReply(f.n, wrapped)
		err = call(ctx)
	}
	select {
	case <-ran:
		f.lost = true
	default:
		if f.n == 1 {
			t.Fatalf("%s: the harness lost no reply (its then never ran): the case tests nothing", op)
		}
		t.Logf("%s makes %d round trips: nothing more to lose", op, f.n-1)
		return false, err
	}
	if t.Failed() {
		t.FailNow() // what then saw is the cause of what follows
	}
	switch {
	case f.ended && err != nil && !errors.Is(err, context.Canceled):
		t.Fatalf("%s whose context ended after round trip %d = %v; want nil or an error wrapping context.Canceled", op, f.n, err)
	case !f.ended && f.d.Loss != Failed && err != nil:
		t.Fatalf("%s whose reply was lost (Loss %v) = %v, want nil", op, f.d.Loss, err)
	}
	return true, err
}

// answered reports whether a call whose loss f made must have answered
// what it did: without a wire, or resent by its client before its context
// ended.
func (f *fault) answered() bool {
	return f.d.Loss == NoWire || f.d.Loss == Retried && !f.ended
}

// acquireOrHeld is B's Acquire in then: its lease, or nil for a held key;
// another error fails t.
func acquireOrHeld(t *testing.T, d locks.Driver, key string) locks.Lease {
	l, err := d.Acquire(context.Background(), key, long)
	if err != nil && !errors.Is(err, locks.ErrNotAcquired) {
		t.Errorf("B's Acquire(%q) during A's lost call = %v, want a lease or ErrNotAcquired", key, err)
	}
	return l
}

// settle checks the contract once a lost call is over: of leases (nil
// entries aside), at most one holds key and it is the key's holder; each
// token is above above; once each is released, key is free at once, or
// within ghost if a lost call may have taken it for no one; and every
// lease's Done is closed. It returns the highest token seen.
func (s *suite) settle(t *testing.T, d Drivers, key string, above uint64, leases ...locks.Lease) uint64 {
	t.Helper()
	ctx := context.Background()
	leases = slices.DeleteFunc(slices.Clone(leases), func(l locks.Lease) bool { return l == nil })
	top := above
	holders := 0
	for _, l := range leases {
		if l.Token() <= above {
			t.Errorf("token %d of a lease on %q taken during a lost call not above %d", l.Token(), key, above)
		}
		top = max(top, l.Token())
		if IsOpen(l.Done()) {
			holders++
		}
	}
	if holders > 1 {
		t.Fatalf("%d leases on %q with Done open at once, want 1 at most", holders, key)
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil && !errors.Is(err, locks.ErrLeaseLost) {
			t.Errorf("Release of the lease of token %d on %q = %v, want nil or ErrLeaseLost", l.Token(), key, err)
		}
		Closes(t, l.Done(), fmt.Sprintf("Done of token %d after its Release", l.Token()))
	}
	next := s.eventuallyFree(t, d.B, key, s.ghost())
	if next.Token() <= top {
		t.Errorf("token %d of the next lease on %q not above %d, the highest before", next.Token(), key, top)
	}
	top = next.Token()
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return top
}

// giveBack releases the leases a case took when its call made fewer round
// trips than the one to lose: the loss is still armed, so a Release of A
// may lose its reply, and what it answers tells nothing.
func giveBack(leases ...locks.Lease) {
	for _, l := range leases {
		if l != nil {
			_ = l.Release(context.Background())
		}
	}
}

// eventuallyFree acquires key through d, letting ttl pass if it is held,
// then up to 3.5 of the harness's TTLs more (a driver's expiry lags its
// TTL: etcd rounds it up to whole seconds and checks twice a second).
func (s *suite) eventuallyFree(t *testing.T, d locks.Driver, key string, ttl time.Duration) locks.Lease {
	t.Helper()
	var waited time.Duration
	for step := ttl; ; step = s.h.TTL / 2 {
		l, err := d.Acquire(context.Background(), key, long)
		if err == nil {
			return l
		}
		if !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatalf("Acquire(%q) = %v", key, err)
		}
		if waited >= ttl+7*s.h.TTL/2 {
			t.Fatalf("%q still held %v after the last lease on it was released or lost: a lost call took it for longer than its TTL", key, waited)
		}
		s.advance(step)
		waited += step
	}
}

// lostAcquire: A's Acquire with a round trip's reply lost, and B's Acquire
// of the key in between. Never both hold it; tokens increase; an answered
// call holds the key; a failed one leaves it free within its TTL.
func (s *suite) lostAcquire(t *testing.T, d Drivers, f *fault) {
	key := s.key(t)
	last := mustAcquire(t, d.B, key, long)
	if err := last.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	var al, bl locks.Lease
	ok, _ := f.call(t, "Acquire", func(ctx context.Context) (err error) {
		al, err = d.A.Acquire(ctx, key, s.ghost())
		return err
	}, func() { bl = acquireOrHeld(t, d.B, key) })
	if !ok {
		giveBack(al, bl)
		return
	}
	switch {
	case al != nil && bl != nil:
		t.Errorf("A's Acquire whose reply was lost returned token %d and B acquired token %d in between: two holders", al.Token(), bl.Token())
	case f.answered() && al == nil:
		t.Errorf("A's Acquire whose reply was lost (Loss %v) returned no lease, want the lease its first attempt took", f.d.Loss)
	case f.answered() && bl != nil:
		t.Errorf("B acquired %q after A's Acquire had taken it", key)
	}
	if al != nil {
		mustBeHeld(t, d.B, key)
		if err := al.Extend(context.Background(), s.ghost()); err != nil {
			t.Errorf("Extend of the lease whose Acquire's reply was lost = %v, want nil", err)
		}
	}
	s.settle(t, d, key, last.Token(), al, bl)
}

// lostExtend: A's Extend from from to to with a round trip's reply lost,
// and B's Acquire of the key in between, which is held whatever the
// Extend did. An answered Extend holds for to; after one that failed,
// Done closes no later than the key frees (the earlier of the old and the
// new deadline), and Release frees the key.
func (s *suite) lostExtend(t *testing.T, d Drivers, f *fault, from, to time.Duration) {
	ctx := context.Background()
	key := s.key(t)
	l := mustAcquire(t, d.A, key, from)
	var bl locks.Lease
	ok, err := f.call(t, "Extend", func(ctx context.Context) error { return l.Extend(ctx, to) },
		func() { bl = acquireOrHeld(t, d.B, key) })
	if !ok {
		_ = l.Release(ctx)
		return
	}
	if bl != nil {
		t.Fatalf("B acquired %q (token %d) while A's lease (token %d) was being extended: two holders", key, bl.Token(), l.Token())
	}
	if err == nil {
		mustBeHeld(t, d.B, key)
		if !IsOpen(l.Done()) {
			t.Fatal("Done closed after an Extend that returned nil")
		}
	}
	if to < from {
		// Past the shorter TTL Done has closed, whatever the Extend did on
		// the server (an unknown outcome keeps the earlier deadline), and
		// the key may be free.
		s.advance(to + s.h.TTL/2)
		if !closesWithin(l.Done(), s.h.TTL) {
			t.Errorf("A's Done still open %v after its Extend to %v (error %v): the lease may be over on the server", to+s.h.TTL/2+s.h.TTL, to, err)
		}
		if next, nerr := d.B.Acquire(ctx, key, long); nerr == nil {
			if !closesWithin(l.Done(), s.h.TTL) {
				t.Errorf("B acquired %q (token %d) %v after A's Extend to %v (error %v), and A's Done is still open %v later: Done must close when the lease is lost", key, next.Token(), to+s.h.TTL/2, to, err, s.h.TTL)
			}
			if eerr := l.Extend(ctx, long); !errors.Is(eerr, locks.ErrLeaseLost) {
				t.Errorf("Extend of A's lease after B acquired the key = %v, want ErrLeaseLost", eerr)
			}
			s.settle(t, d, key, l.Token(), next)
			return
		} else if !errors.Is(nerr, locks.ErrNotAcquired) {
			t.Fatal(nerr)
		}
	}
	s.settle(t, d, key, 0, l)
}

// lostRelease: A's Release with a round trip's reply lost, and B's
// Acquire of the key in between. Done closes; a Release called again
// answers nil (or ErrLeaseLost once B holds the key) and touches B's
// lease; the key ends free.
func (s *suite) lostRelease(t *testing.T, d Drivers, f *fault) {
	ctx := context.Background()
	key := s.key(t)
	l := mustAcquire(t, d.A, key, s.ghost())
	var bl locks.Lease
	ok, err := f.call(t, "Release", func(ctx context.Context) error { return l.Release(ctx) },
		func() { bl = acquireOrHeld(t, d.B, key) })
	if !ok {
		giveBack(bl)
		return
	}
	if f.answered() && bl == nil {
		t.Errorf("B found %q held after A's Release ran", key)
	}
	if bl != nil && bl.Token() <= l.Token() {
		t.Errorf("B's token %d not above A's %d", bl.Token(), l.Token())
	}
	again := l.Release(ctx)
	switch {
	case err == nil && again != nil:
		t.Errorf("Release after a Release that returned nil = %v, want nil", again)
	case again != nil && !errors.Is(again, locks.ErrLeaseLost):
		t.Errorf("Release again after a lost Release = %v, want nil or ErrLeaseLost", again)
	}
	Closes(t, l.Done(), "Done after Release")
	if bl != nil {
		mustBeHeld(t, d.B, key) // A's Releases left B's lease alone
	}
	s.settle(t, d, key, l.Token(), bl)
}

// lostClaim: A's Claim of 2 with a round trip's reply lost, and B's
// Claim of 2 and then of 3 in between. Not both claim 2; an answered
// Claim claimed it (a resend after B's claim of 3 recognises its own
// claim); claims never go back: 1, 2 and 3 stay refused, 4 is claimed.
// again: A made the claim of 1 (a driver that keeps what its claims need,
// etcd's claim lease, has it already), else B.
func (s *suite) lostClaim(t *testing.T, d Drivers, f *fault, again bool) {
	ctx := context.Background()
	ca, cb := mustClaimer(t, d.A), mustClaimer(t, d.B)
	key := s.key(t)
	first := cb
	if again {
		first = ca
	}
	if ok, err := first.Claim(ctx, key, 1, long); !ok || err != nil {
		t.Fatalf("Claim(1) = %v, %v", ok, err)
	}
	var a2, b2 bool
	ok, _ := f.call(t, "Claim", func(ctx context.Context) (err error) {
		a2, err = ca.Claim(ctx, key, 2, long)
		return err
	}, func() {
		var err error
		if b2, err = cb.Claim(ctx, key, 2, long); err != nil {
			t.Errorf("B's Claim(2) during A's = %v", err)
		}
		if ok, err := cb.Claim(ctx, key, 3, long); !ok || err != nil {
			t.Errorf("B's Claim(3) during A's Claim(2) = %v, %v; want true", ok, err)
		}
	})
	if !ok {
		return
	}
	switch {
	case a2 && b2:
		t.Errorf("A's and B's Claim(2) both answered true")
	case f.answered() && !a2:
		t.Errorf("A's Claim(2) whose reply was lost (Loss %v) = false, want true: a resend must recognise its own claim", f.d.Loss)
	}
	for _, seq := range []int64{1, 2, 3} {
		if ok, err := cb.Claim(ctx, key, seq, long); ok || err != nil {
			t.Errorf("Claim(%d) after claims of 2 and 3 = %v, %v; want false: a claim went back", seq, ok, err)
		}
	}
	if ok, err := cb.Claim(ctx, key, 4, long); !ok || err != nil {
		t.Errorf("Claim(4) = %v, %v; want true", ok, err)
	}
}

// closesWithin reports whether ch closes within d of real time: a Done
// whose deadline has passed closes once its timer's goroutine runs.
func closesWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func mustClaimer(t *testing.T, d locks.Driver) locks.Claimer {
	t.Helper()
	c, ok := locks.As[locks.Claimer](d)
	if !ok {
		t.Fatalf("%T does not implement locks.Claimer", d)
	}
	return c
}

// claimRecorded fails t unless seq (and every lower one) is claimed under
// key: a claim of it is refused.
func claimRecorded(t *testing.T, d locks.Driver, key string, seq int64) {
	t.Helper()
	c := mustClaimer(t, d)
	for _, s := range []int64{seq, seq - 1} {
		if ok, err := c.Claim(context.Background(), key, s, long); ok || err != nil {
			t.Errorf("Claim(%d) after a claim of %d = %v, %v; want false: the claim went back", s, seq, ok, err)
		}
	}
}

// lostAcquireClaim: A's AcquireClaim of a fire with a round trip's reply
// lost, and B's AcquireClaim of the same fire in between. Never both get a
// lease; the fire stays claimed; an answered call holds the key.
func (s *suite) lostAcquireClaim(t *testing.T, d Drivers, f *fault) {
	ctx := context.Background()
	key, claimKey := s.key(t), s.key(t)
	if ok, err := mustClaimer(t, d.B).Claim(ctx, claimKey, 1, long); !ok || err != nil {
		t.Fatalf("B's Claim(1) = %v, %v", ok, err)
	}
	fire := locks.FireClaim{Key: claimKey, Seq: 2, TTL: long}
	var al, bl locks.Lease
	ok, _ := f.call(t, "AcquireClaim", func(ctx context.Context) (err error) {
		al, err = locks.AcquireClaim(ctx, d.A, key, s.ghost(), fire)
		return err
	}, func() {
		var err error
		bl, err = locks.AcquireClaim(ctx, d.B, key, long, fire)
		if err != nil && !errors.Is(err, locks.ErrClaimed) && !errors.Is(err, locks.ErrNotAcquired) {
			t.Errorf("B's AcquireClaim during A's = %v, want a lease, ErrClaimed or ErrNotAcquired", err)
		}
	})
	if !ok {
		giveBack(al, bl)
		return
	}
	switch {
	case al != nil && bl != nil:
		t.Errorf("A's AcquireClaim whose reply was lost returned token %d and B's in between token %d: the fire ran twice", al.Token(), bl.Token())
	case f.answered() && al == nil:
		t.Errorf("A's AcquireClaim whose reply was lost (Loss %v) returned no lease, want the one its first attempt took", f.d.Loss)
	}
	claimRecorded(t, d.B, claimKey, 2)
	s.settle(t, d, key, 0, al, bl)
}

// lostAcquireClaimEvenIfHeld: A's AcquireClaim of a fire with EvenIfHeld
// on a key B holds (a node about to wait for the key claims the fire
// first), a round trip's reply lost, and B's Claim of the same fire in
// between. A gets no lease; not both claim the fire; an answered call
// claimed it; the fire stays claimed; B's lease is untouched.
func (s *suite) lostAcquireClaimEvenIfHeld(t *testing.T, d Drivers, f *fault) {
	ctx := context.Background()
	key, claimKey := s.key(t), s.key(t)
	holder := mustAcquire(t, d.B, key, long)
	fire := locks.FireClaim{Key: claimKey, Seq: 2, TTL: long, EvenIfHeld: true}
	var al locks.Lease
	var aerr error
	var b2 bool
	ok, _ := f.call(t, "AcquireClaim(EvenIfHeld)", func(ctx context.Context) error {
		al, aerr = locks.AcquireClaim(ctx, d.A, key, s.ghost(), fire)
		if errors.Is(aerr, locks.ErrNotAcquired) && !errors.Is(aerr, locks.ErrClaimed) {
			return nil // the answer of a held key whose fire A claimed
		}
		return aerr
	}, func() {
		var err error
		if b2, err = mustClaimer(t, d.B).Claim(ctx, claimKey, 2, long); err != nil {
			t.Errorf("B's Claim(2) during A's AcquireClaim = %v", err)
		}
	})
	if !ok {
		giveBack(al, holder)
		return
	}
	aClaimed := errors.Is(aerr, locks.ErrNotAcquired) && !errors.Is(aerr, locks.ErrClaimed)
	switch {
	case al != nil:
		t.Errorf("A's AcquireClaim of a key B holds returned a lease (token %d)", al.Token())
	case aClaimed && b2:
		t.Errorf("A's AcquireClaim(EvenIfHeld) answered the fire claimed and B's Claim(2) in between true: both claimed it")
	case f.answered() && !aClaimed:
		t.Errorf("A's AcquireClaim(EvenIfHeld) whose reply was lost (Loss %v) = %v, want ErrNotAcquired with the fire claimed", f.d.Loss, aerr)
	}
	claimRecorded(t, d.B, claimKey, 2)
	mustBeHeld(t, d.B, key)
	s.settle(t, d, key, 0, al, holder)
}

// lostAcquireSlot: A's AcquireSlot of two slots with a claim, a round
// trip's reply lost, and B's of the same fire in between. The fire runs in
// one slot at most, once; the claim stays; both slots end free.
func (s *suite) lostAcquireSlot(t *testing.T, d Drivers, f *fault) {
	ctx := context.Background()
	key, claimKey := s.key(t), s.key(t)
	fire := &locks.FireClaim{Key: claimKey, Seq: 2, TTL: long}
	var al, bl locks.Lease
	ok, _ := f.call(t, "AcquireSlot", func(ctx context.Context) (err error) {
		al, err = locks.AcquireSlot(ctx, d.A, key, 2, s.ghost(), fire)
		return err
	}, func() {
		var err error
		bl, err = locks.AcquireSlot(ctx, d.B, key, 2, long, fire)
		if err != nil && !errors.Is(err, locks.ErrClaimed) && !errors.Is(err, locks.ErrNotAcquired) {
			t.Errorf("B's AcquireSlot during A's = %v, want a lease, ErrClaimed or ErrNotAcquired", err)
		}
	})
	if !ok {
		giveBack(al, bl)
		return
	}
	switch {
	case al != nil && bl != nil:
		t.Errorf("A's AcquireSlot whose reply was lost returned %q and B's in between %q: the fire ran twice", al.Key(), bl.Key())
	case f.answered() && al == nil:
		t.Errorf("A's AcquireSlot whose reply was lost (Loss %v) returned no lease, want the one its first attempt took", f.d.Loss)
	}
	claimRecorded(t, d.B, claimKey, 2)
	for i := 1; i <= 2; i++ {
		slot := locks.SlotKey(key, i)
		var mine []locks.Lease
		for _, l := range []locks.Lease{al, bl} {
			if l != nil && l.Key() == slot {
				mine = append(mine, l)
			}
		}
		s.settle(t, d, slot, 0, mine...)
	}
}

func mustMembership(t *testing.T, d locks.Driver) locks.Membership {
	t.Helper()
	m, ok := locks.As[locks.Membership](d)
	if !ok {
		t.Fatalf("%T does not implement locks.Membership", d)
	}
	return m
}

// lostHeartbeat: A's Heartbeat with a round trip's reply lost, and B's in
// between. An answered Heartbeat lists A; after a failed one, the next
// (the caller's retry) does; either way B's next lists A.
// again: A's heartbeat follows one of its own (a driver that keeps what
// a member needs, etcd's member lease, has it already).
func (s *suite) lostHeartbeat(t *testing.T, d Drivers, f *fault, again bool) {
	ctx := context.Background()
	ma, mb := mustMembership(t, d.A), mustMembership(t, d.B)
	group := s.key(t)
	defer leave(t, mb, group, "b")
	defer leave(t, ma, group, "a")
	if _, err := mb.Heartbeat(ctx, group, "b", long); err != nil {
		t.Fatal(err)
	}
	if again {
		if _, err := ma.Heartbeat(ctx, group, "a", long); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	ok, err := f.call(t, "Heartbeat", func(ctx context.Context) (err error) {
		got, err = ma.Heartbeat(ctx, group, "a", long)
		return err
	}, func() {
		if _, err := mb.Heartbeat(ctx, group, "b", long); err != nil {
			t.Errorf("B's Heartbeat during A's = %v", err)
		}
	})
	if !ok {
		return
	}
	if err == nil && !slices.Contains(got, "a") {
		t.Errorf("A's Heartbeat whose reply was lost = %q, want a list with A", got)
	}
	if err != nil {
		if got, err := ma.Heartbeat(ctx, group, "a", long); err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("A's Heartbeat after a lost one = %q, %v; want [a b]", got, err)
		}
	}
	if got, err := mb.Heartbeat(ctx, group, "b", long); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("B's Heartbeat after A's = %q, %v; want [a b]", got, err)
	}
}

// leave makes member leave group through m, the driver whose heartbeats
// it made, so that the Leaks check finds nothing of it: a case's members
// live long. A Leave whose reply the harness lost (when the case ended
// before its call reached the round trip to lose) is called again.
func leave(t *testing.T, m locks.Membership, group, member string) {
	err := m.Leave(context.Background(), group, member)
	if err != nil {
		err = m.Leave(context.Background(), group, member)
	}
	if err != nil {
		t.Errorf("Leave(%q) = %v", member, err)
	}
}

// lostLeave: A's Leave with a round trip's reply lost, and B's Heartbeat
// in between. After an answered Leave, or one called again, B's
// heartbeats no longer list A.
func (s *suite) lostLeave(t *testing.T, d Drivers, f *fault) {
	ctx := context.Background()
	ma, mb := mustMembership(t, d.A), mustMembership(t, d.B)
	group := s.key(t)
	defer leave(t, mb, group, "b")
	defer leave(t, ma, group, "a")
	if _, err := ma.Heartbeat(ctx, group, "a", long); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Heartbeat(ctx, group, "b", long); err != nil {
		t.Fatal(err)
	}
	ok, err := f.call(t, "Leave", func(ctx context.Context) error { return ma.Leave(ctx, group, "a") }, func() {
		if _, err := mb.Heartbeat(ctx, group, "b", long); err != nil {
			t.Errorf("B's Heartbeat during A's Leave = %v", err)
		}
	})
	if !ok {
		return
	}
	if err != nil {
		if err := ma.Leave(ctx, group, "a"); err != nil {
			t.Errorf("Leave again after a lost one = %v, want nil", err)
		}
	}
	if got, err := mb.Heartbeat(ctx, group, "b", long); err != nil || !slices.Equal(got, []string{"b"}) {
		t.Errorf("B's Heartbeat after A left = %q, %v; want [b]", got, err)
	}
}
