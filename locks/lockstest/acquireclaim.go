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
	fire := func(seq int64, evenIfHeld bool) (locks.Lease, error) {
		return locks.AcquireClaim(ctx, d, key, long, locks.FireClaim{Key: claimKey, Seq: seq, TTL: s.h.TTL, EvenIfHeld: evenIfHeld})
	}
	claim := func(seq int64, want bool) {
		t.Helper()
		if got, err := c.Claim(ctx, claimKey, seq, s.h.TTL); got != want || err != nil {
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
