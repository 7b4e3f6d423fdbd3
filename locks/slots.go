package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxSlots is the most slots a semaphore may have: [AcquireSlot] tries its
// slots one key after another, and a call on a ClaimAcquirer takes them all
// in one AcquireClaims call.
const MaxSlots = 64

// SlotKey returns the key of slot i (1 <= i) of the semaphore on key: key,
// "#", and i in decimal. The slots of "jobs" are "jobs#1", "jobs#2", …; no
// slot of a semaphore on another key has one of these keys, since the last
// "#" of a slot key splits it back into its semaphore's key and its slot.
// A lease that Acquire takes on one of them directly holds that slot.
func SlotKey(key string, i int) string {
	return key + "#" + strconv.Itoa(i)
}

// AcquireSlot takes one of the n slots of the semaphore on key for ttl: a
// lease on the first free key of SlotKey(key, 1) ... SlotKey(key, n), in
// that order, as Acquire does on it. Its Key is the slot's key and its Token
// that key's fencing token, strictly increasing per slot (tokens of
// different slots are not comparable). Extend and Release it as any lease:
// a released or expired slot is free for the next call. Every caller of one
// semaphore must pass the same n: a call with a smaller n sees only the
// first slots, one with a larger n holds more at once.
//
// With c non-nil it claims c in the same step, as [AcquireClaim] does for
// one key: the fire runs in one slot at most, once. c.EvenIfHeld is not
// supported for slots (ErrInvalid): a waiter would not know which slot to
// wait for.
//
// It returns the lease, or an error wrapping ErrNotAcquired when all n
// slots are held, or ErrClaimed when the claim is refused (c.Seq or higher
// claimed under c.Key by another call), or ErrInvalid for bad input: n out
// of [1, MaxSlots], an empty key, a nil ctx, a ttl, or a claim, that
// [Check] or [CheckClaim] refuse (the key checked is the longest slot key,
// SlotKey(key, n)). A slot whose backend fails is passed over; when no slot
// is taken, the first failure in slot order that is not a held slot (a
// refused claim or a backend error) is returned. Every error names the key
// and n.
//
// On a [ClaimAcquirer], with c non-nil, it is one call: AcquireClaims of
// the n slots with the same claim, in which the first free slot acquires
// and claims, and the later free ones find the claim taken and acquire
// nothing (a token spent); a lease in a slot after the first one leased,
// which a driver must not answer, is released. Otherwise it goes slot by slot, with Acquire or
// (c non-nil) [AcquireThenClaim], and stops at the first slot acquired, the
// first claim refused, the first input refused, or the end of ctx.
func AcquireSlot(ctx context.Context, d Driver, key string, n int, ttl time.Duration, c *FireClaim) (Lease, error) {
	if err := checkSlots(ctx, d, key, n, ttl, c); err != nil {
		return nil, err
	}
	results := make([]FireLease, 0, n)
	if ca, ok := d.(ClaimAcquirer); ok && c != nil {
		fires := make([]FireLock, n)
		for i := range fires {
			fires[i] = FireLock{Key: SlotKey(key, i+1), TTL: ttl, Claim: *c}
		}
		results = ca.AcquireClaims(ctx, fires)
		if len(results) != n {
			err := fmt.Errorf("locks: %s: %T.AcquireClaims answered %d results for %d slots", semaphore(key, n), d, len(results), n)
			for _, r := range results {
				releaseSpare(ctx, r.Lease, ttl)
			}
			return nil, err
		}
	} else {
		for i := 1; i <= n; i++ {
			var r FireLease
			if c != nil {
				r.Lease, r.Err = AcquireThenClaim(ctx, d, SlotKey(key, i), ttl, *c)
			} else {
				r.Lease, r.Err = d.Acquire(ctx, SlotKey(key, i), ttl)
			}
			results = append(results, r)
			if r.Lease != nil || errors.Is(r.Err, ErrClaimed) || errors.Is(r.Err, ErrInvalid) || ctx.Err() != nil {
				break
			}
		}
	}
	return slotResult(ctx, d, key, n, ttl, results)
}

// slotResult answers AcquireSlot from the results of its slots, in slot
// order (up to the slot where it stopped): the first lease (a later one,
// which a driver must not return, is released), else the first error that
// is not a held slot, else ErrNotAcquired.
func slotResult(ctx context.Context, d Driver, key string, n int, ttl time.Duration, results []FireLease) (Lease, error) {
	var lease Lease
	var failed error
	for i, r := range results {
		if r.Lease != nil && r.Err == nil && lease == nil {
			lease = r.Lease
			continue
		}
		if r.Lease != nil {
			// Two leases for one claim, or a lease with an error: a driver
			// must not answer either. Give the key back.
			releaseSpare(ctx, r.Lease, ttl)
		}
		if lease != nil || failed != nil {
			// After the lease, ErrClaimed is the call's own claim; after
			// the first failure, nothing else is the answer.
			continue
		}
		switch {
		case r.Err == nil && r.Lease == nil:
			failed = fmt.Errorf("locks: %s, slot %d: %T answered neither a lease nor an error", semaphore(key, n), i+1, d)
		case r.Err != nil && (!errors.Is(r.Err, ErrNotAcquired) || errors.Is(r.Err, ErrClaimed)):
			failed = fmt.Errorf("locks: %s, slot %d: %w", semaphore(key, n), i+1, r.Err)
		}
	}
	switch {
	case lease != nil:
		return lease, nil
	case failed != nil:
		return nil, failed
	}
	return nil, fmt.Errorf("%w: %s: all held", ErrNotAcquired, semaphore(key, n))
}

// releaseSpare gives back a lease that AcquireSlot does not return, with a
// deadline of its own: ctx may be the one that just ended.
func releaseSpare(ctx context.Context, l Lease, ttl time.Duration) {
	if l == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	_ = l.Release(rctx) // a failure leaves the slot held by nobody until its TTL
}

// checkSlots validates AcquireSlot's arguments.
func checkSlots(ctx context.Context, d Driver, key string, n int, ttl time.Duration, c *FireClaim) error {
	if d == nil {
		return fmt.Errorf("%w: %s: driver must not be nil", ErrInvalid, semaphore(key, n))
	}
	if n < 1 || n > MaxSlots {
		return fmt.Errorf("%w: %s: n %d must be in [1, locks.MaxSlots (%d)]", ErrInvalid, semaphore(key, n), n, MaxSlots)
	}
	if key == "" {
		return fmt.Errorf("%w: %s: key %q must not be empty", ErrInvalid, semaphore(key, n), key)
	}
	if err := Check(ctx, SlotKey(key, n), ttl); err != nil {
		return fmt.Errorf("locks: %s: %w", semaphore(key, n), err)
	}
	if c == nil {
		return nil
	}
	if c.EvenIfHeld {
		return fmt.Errorf("%w: %s: claim %q of %d: EvenIfHeld is not supported for slots (a waiter would not know which slot to wait for)",
			ErrInvalid, semaphore(key, n), c.Key, c.Seq)
	}
	if err := CheckClaim(ctx, c.Key, c.Seq, c.TTL); err != nil {
		return fmt.Errorf("locks: %s: %w", semaphore(key, n), err)
	}
	return nil
}

// semaphore names the semaphore on key of n slots in errors: the key whole,
// or its start if it is too long to print.
func semaphore(key string, n int) string {
	const whole = 1024
	if len(key) > whole {
		return fmt.Sprintf("semaphore %s of %d slots", keyStart(key), n)
	}
	return fmt.Sprintf("semaphore %q of %d slots", key, n)
}
