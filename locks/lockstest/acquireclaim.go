package lockstest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// acquireClaim checks locks.AcquireClaim: the driver's one step when it is
// a locks.ClaimAcquirer (every driver of this project is), the two-step
// form otherwise. A claim made with an acquisition is the record Claim
// sees; a refused claim takes no lease; a held key records no claim unless
// EvenIfHeld; of callers racing for one fire, one gets the lease and the
// others are refused or find the key held; bad input is ErrInvalid.
func (s *suite) acquireClaim(t *testing.T) {
	d := s.h.NewDriver(t)
	c, ok := d.(locks.Claimer)
	if !ok {
		t.Fatalf("%T does not implement locks.Claimer", d)
	}
	if _, ok := d.(locks.ClaimAcquirer); !ok {
		t.Logf("%T is not a locks.ClaimAcquirer: checking locks.AcquireThenClaim on it", d)
	}
	ctx := context.Background()
	key, claimKey := s.key(t), s.key(t)
	// Claims live long, but the one whose expiry the case checks: a short
	// one could lapse between two calls on a loaded machine (a claim of 10
	// gone before the call that it refuses, through PgBouncer with two CPU
	// burners beside make test).
	claimTTL := long
	fire := func(seq int64, evenIfHeld bool) (locks.Lease, error) {
		return locks.AcquireClaim(ctx, d, key, long, locks.FireClaim{Key: claimKey, Seq: seq, TTL: claimTTL, EvenIfHeld: evenIfHeld})
	}
	claim := func(seq int64, want bool) {
		t.Helper()
		if got, err := c.Claim(ctx, claimKey, seq, long); got != want || err != nil {
			t.Fatalf("Claim(%d) = %v, %v; want %v", seq, got, err, want)
		}
	}

	l, err := fire(10, false)
	if err != nil {
		t.Fatalf("AcquireClaim(seq 10) on a free key: %v", err)
	}
	if l.Key() != key {
		t.Fatalf("Key() = %q, want %q", l.Key(), key)
	}
	mustBeHeld(t, d, key)
	claim(10, false) // the acquisition's claim is the record Claim sees
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Refused: the claim of 10 is recorded; the key stays free.
	if l, err := fire(10, false); !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireClaim(seq 10) after a claim of 10 = %v, %v; want ErrClaimed", l, err)
	}
	if l, err := fire(9, true); !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireClaim(seq 9, EvenIfHeld) after a claim of 10 = %v, %v; want ErrClaimed", l, err)
	}
	mustAcquire(t, d, key, long).Release(ctx) //nolint:errcheck // free: nothing to give back

	// Held, without EvenIfHeld: no claim is recorded.
	held := mustAcquire(t, d, key, long)
	if l, err := fire(11, false); !errors.Is(err, locks.ErrNotAcquired) || l != nil {
		t.Fatalf("AcquireClaim(seq 11) on a held key = %v, %v; want ErrNotAcquired", l, err)
	}
	claim(11, true) // 11 was not claimed by the call above
	// Held, with EvenIfHeld: the claim is recorded, the key stays held.
	if l, err := fire(12, true); !errors.Is(err, locks.ErrNotAcquired) || errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireClaim(seq 12, EvenIfHeld) on a held key = %v, %v; want ErrNotAcquired", l, err)
	}
	claim(12, false)
	if l, err := fire(12, true); !errors.Is(err, locks.ErrClaimed) || l != nil {
		t.Fatalf("AcquireClaim(seq 12, EvenIfHeld) on a held key, 12 claimed = %v, %v; want ErrClaimed", l, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A token of an acquisition with a claim is above every earlier one.
	last := mustAcquire(t, d, key, long)
	if err := last.Release(ctx); err != nil {
		t.Fatal(err)
	}
	claimTTL = s.h.TTL // expires below
	l, err = fire(13, false)
	if err != nil {
		t.Fatalf("AcquireClaim(seq 13): %v", err)
	}
	if l.Token() <= last.Token() {
		t.Fatalf("token %d after token %d: tokens must increase", l.Token(), last.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The claim made with an acquisition expires as Claim's does.
	s.pastTTL()
	if l, err := fire(1, false); err != nil {
		t.Fatalf("AcquireClaim(seq 1) once the claim of 13 expired: %v", err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Racing callers (on drivers of their own) for one fire: exactly one
	// lease, and no lease once the fire is claimed.
	const racers = 8
	var wg sync.WaitGroup
	leases := make(chan locks.Lease, racers)
	for range racers {
		other := s.h.NewDriver(t)
		wg.Go(func() {
			l, err := locks.AcquireClaim(ctx, other, key, long, locks.FireClaim{Key: claimKey, Seq: 100, TTL: long})
			switch {
			case err == nil:
				leases <- l
			case !errors.Is(err, locks.ErrClaimed) && !errors.Is(err, locks.ErrNotAcquired):
				t.Errorf("racing AcquireClaim: %v", err)
			}
		})
	}
	wg.Wait()
	close(leases)
	n := 0
	for l := range leases {
		n++
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("%d of %d racing callers got the lease of one fire, want 1", n, racers)
	}
	if l, err := locks.AcquireClaim(ctx, d, key, long, locks.FireClaim{Key: claimKey, Seq: 100, TTL: long}); !errors.Is(err, locks.ErrClaimed) {
		t.Fatalf("AcquireClaim of a fire run and released = %v, %v; want ErrClaimed", l, err)
	}

	for _, bad := range []struct {
		key string
		ttl time.Duration
		c   locks.FireClaim
	}{
		{"", long, locks.FireClaim{Key: claimKey, Seq: 1, TTL: long}},
		{key, 0, locks.FireClaim{Key: claimKey, Seq: 1, TTL: long}},
		{key, long, locks.FireClaim{Key: "", Seq: 1, TTL: long}},
		{key, long, locks.FireClaim{Key: claimKey, Seq: -1, TTL: long}},
		{key, long, locks.FireClaim{Key: claimKey, Seq: locks.MaxClaimSeq + 1, TTL: long}},
		{key, long, locks.FireClaim{Key: claimKey, Seq: 1, TTL: 0}},
		{key, long, locks.FireClaim{Key: claimKey, Seq: 1, TTL: locks.MaxTTL + 1}},
	} {
		if l, err := locks.AcquireClaim(ctx, d, bad.key, bad.ttl, bad.c); !errors.Is(err, locks.ErrInvalid) || l != nil {
			t.Errorf("AcquireClaim(%q, %v, %+v) = %v, %v; want ErrInvalid", bad.key, bad.ttl, bad.c, l, err)
		}
	}
	mustAcquire(t, d, key, long) // bad input took nothing
}

// acquireClaims checks locks.AcquireClaims: each fire of a call answers as
// locks.AcquireClaim would alone, in the order given (a second fire on a key
// finds it held by the first), bad input fails only its own fire, an empty
// call answers nothing, a call of more fires than a driver takes at once
// takes them all, and of calls racing for the same fires (in opposite
// orders), each fire is leased once.
func (s *suite) acquireClaims(t *testing.T) {
	d := s.h.NewDriver(t)
	c, ok := d.(locks.Claimer)
	if !ok {
		t.Fatalf("%T does not implement locks.Claimer", d)
	}
	ctx := context.Background()
	if got := locks.AcquireClaims(ctx, d, nil); len(got) != 0 {
		t.Fatalf("AcquireClaims of no fires = %v, want none", got)
	}
	free, held, claimed, heldEvenIf := s.key(t), s.key(t), s.key(t), s.key(t)
	mustAcquire(t, d, held, long)
	mustAcquire(t, d, heldEvenIf, long)
	if ok, err := c.Claim(ctx, claimed+"@c", 7, long); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	fl := func(key string, seq int64, evenIfHeld bool) locks.FireLock {
		return locks.FireLock{Key: key, TTL: long, Claim: locks.FireClaim{Key: key + "@c", Seq: seq, TTL: long, EvenIfHeld: evenIfHeld}}
	}
	second := fl(free, 5, false)
	second.Claim.Key = free + "@other"
	got := locks.AcquireClaims(ctx, d, []locks.FireLock{
		fl(free, 5, false),
		fl(held, 5, false),
		fl(claimed, 7, false),
		{Key: "", TTL: long, Claim: locks.FireClaim{Key: "x", Seq: 1, TTL: long}},
		second,
		fl(heldEvenIf, 3, true),
	})
	if len(got) != 6 {
		t.Fatalf("AcquireClaims of 6 fires answered %d", len(got))
	}
	want := []error{nil, locks.ErrNotAcquired, locks.ErrClaimed, locks.ErrInvalid, locks.ErrNotAcquired, locks.ErrNotAcquired}
	for i, w := range want {
		switch {
		case w == nil && (got[i].Err != nil || got[i].Lease == nil):
			t.Errorf("fire %d: %v, %v; want a lease", i, got[i].Lease, got[i].Err)
		case w != nil && (!errors.Is(got[i].Err, w) || got[i].Lease != nil):
			t.Errorf("fire %d: %v, %v; want %v", i, got[i].Lease, got[i].Err, w)
		}
	}
	for _, cl := range []struct {
		key  string
		seq  int64
		want bool
	}{
		{free + "@c", 5, false},       // claimed with the lease
		{free + "@other", 5, true},    // the key was held: not claimed
		{held + "@c", 5, true},        // held, without EvenIfHeld: not claimed
		{heldEvenIf + "@c", 3, false}, // held, with EvenIfHeld: claimed
	} {
		if ok, err := c.Claim(ctx, cl.key, cl.seq, long); ok != cl.want || err != nil {
			t.Errorf("Claim(%q, %d) after the call = %v, %v; want %v", cl.key, cl.seq, ok, err, cl.want)
		}
	}
	mustAcquire(t, d, claimed, long) // a refused claim took no lease
	if got[0].Lease != nil {
		if err := got[0].Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// More fires than one call of a driver may take: every one is leased.
	const many = 600
	fires := make([]locks.FireLock, many)
	for i := range fires {
		fires[i] = fl(s.key(t), 1, false)
	}
	for i, r := range locks.AcquireClaims(ctx, d, fires) {
		if r.Err != nil {
			t.Fatalf("fire %d of %d: %v", i, many, r.Err)
		}
		if _, err := d.Acquire(ctx, fires[i].Key, long); !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatalf("Acquire of fire %d's key after the call: %v, want ErrNotAcquired", i, err)
		}
		if err := r.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Calls racing for the same fires, half in the opposite order: each
	// fire is leased once.
	const racers, keys = 6, 20
	race := make([]locks.FireLock, keys)
	for i := range race {
		race[i] = fl(s.key(t), 100, false)
	}
	var mu sync.Mutex
	leased := map[string]int{}
	var wg sync.WaitGroup
	for r := range racers {
		other := s.h.NewDriver(t)
		mine := append([]locks.FireLock(nil), race...)
		if r%2 == 1 {
			for i, j := 0, len(mine)-1; i < j; i, j = i+1, j-1 {
				mine[i], mine[j] = mine[j], mine[i]
			}
		}
		wg.Go(func() {
			for i, res := range locks.AcquireClaims(ctx, other, mine) {
				switch {
				case res.Err == nil:
					mu.Lock()
					leased[mine[i].Key]++
					mu.Unlock()
				case !errors.Is(res.Err, locks.ErrClaimed) && !errors.Is(res.Err, locks.ErrNotAcquired):
					t.Errorf("racing AcquireClaims: %v", res.Err)
				}
			}
		})
	}
	wg.Wait()
	for _, f := range race {
		if leased[f.Key] != 1 {
			t.Errorf("key %q leased %d times by %d racing calls, want once", f.Key, leased[f.Key], racers)
		}
	}
}
