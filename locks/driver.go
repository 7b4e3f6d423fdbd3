package locks

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// A Driver hands out leases on keys. Implementations must be safe for
// concurrent use and must pass the conformance suite in [lockstest].
//
// [lockstest]: https://pkg.go.dev/github.com/ndigo/ndigo/locks/lockstest
type Driver interface {
	// Acquire takes the lease on key for ttl. It never blocks on a held key:
	// it returns an error wrapping ErrNotAcquired at once. Every successful
	// acquisition carries a fencing token strictly greater than every token
	// issued before for that key. Bad input (see [Check]: an empty key or
	// one longer than MaxKeyLen, a ttl out of (0, MaxTTL]) returns an error
	// wrapping ErrInvalid; a failing backend returns an error that wraps
	// neither.
	Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
}

// A Lease is one acquisition of a key. Only the current holder can extend or
// release it: a handle whose lease expired or was superseded gets
// ErrLeaseLost and changes nothing.
type Lease interface {
	// Key returns the key this lease is on.
	Key() string
	// Token returns the fencing token of this acquisition. Hand it to the
	// storage the holder writes, so that storage can reject a stale holder.
	Token() uint64
	// Extend sets the lease to expire ttl from now. It returns ErrLeaseLost
	// if this lease is no longer the current holder (expired, superseded or
	// released), and then closes Done. An Extend refused as invalid
	// (ErrInvalid) or by its context changes nothing.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the key up. It returns ErrLeaseLost if the lease expired
	// or was superseded, and keeps returning it. Once a Release returned nil,
	// every later Release by the holder returns nil and touches nothing,
	// whatever Extend answered in between. A Release after an Extend that
	// returned ErrLeaseLost returns ErrLeaseLost; after an Extend refused as
	// invalid or by its context, it releases the lease as if that Extend had
	// not been called.
	Release(ctx context.Context) error
	// Done returns a channel that is closed once the lease is known to be
	// over: on Release, on local expiry, or when Extend finds it lost.
	Done() <-chan struct{}
}

// A Watcher is a Driver that can tell waiters when a key may have become
// free, so that [Wait] wakes at once instead of polling. Drivers that cannot
// tell need not implement it.
type Watcher interface {
	// Watch returns a channel that is closed when a release of key may let
	// this watcher acquire it, and a function that stops watching. Watch
	// before trying to acquire, so that a release in between is not missed.
	// A driver may wake only some watchers per release (one per process,
	// say) as long as a release after a failed Acquire wakes at least one
	// watcher still waiting; the others keep polling. The channel may also
	// close spuriously. The stop function is idempotent.
	Watch(key string) (<-chan struct{}, func())
}

// MaxTTL is the longest TTL a lease or claim may ask for. Every driver
// rejects a longer one with ErrInvalid (through [Check]), so that no driver
// overflows its own time arithmetic and all of them answer alike.
const MaxTTL = 365 * 24 * time.Hour

// MaxKeyLen is the longest key, in bytes, that a lease or claim may name:
// 1 MiB. Every driver rejects a longer one with ErrInvalid (through
// [Check]), so that all of them accept the same keys: without it each
// failed at a limit of its own (a PostgreSQL index row, a Redis request, the
// memory of a process) with a backend error instead of a validation error.
// It is generous on purpose: keys of 100 KB are in use on Redis.
const MaxKeyLen = 1 << 20

// MaxClaimSeq is the largest sequence number a claim may carry: claims are
// compared as numbers by drivers whose scripts count in float64 (Redis Lua),
// which are exact up to 2^53.
const MaxClaimSeq = 1<<53 - 1

// A Claimer is a Driver that keeps claims: per key, the highest sequence
// number claimed. The scheduler claims each fire of a locked task under a
// key of the task, with the fire's instant as the sequence number, so that a
// fire runs at most once however late a node reaches it, and then keeps one
// record per task, not one per fire. The in-process and Redis drivers are
// Claimers; the scheduler refuses a driver that is not (see the scheduling
// package for wrappers).
type Claimer interface {
	// Claim records seq under key unless a claim of seq or higher is
	// recorded there, and reports whether it did. The record expires ttl
	// after the last successful claim. A call that the driver or its client
	// retries after its first attempt took effect still answers true: each
	// call recognises its own claim. Claims and leases of the same key are
	// independent. Bad input (an empty key or one longer than MaxKeyLen, a
	// ttl out of (0, MaxTTL], a seq out of [0, MaxClaimSeq]) returns an
	// error wrapping ErrInvalid.
	Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error)
}

// A FireClaim is the claim that [AcquireClaim] makes together with an
// acquisition: Claimer.Claim's arguments, and what to do when the lease's
// key is held.
type FireClaim struct {
	Key string        // the claim's key, as Claimer.Claim's
	Seq int64         // the sequence number claimed, in [0, MaxClaimSeq]
	TTL time.Duration // how long the record lives after the claim, in (0, MaxTTL]
	// EvenIfHeld records the claim when the lease's key is held too (the
	// caller is about to wait for the key, and claims the fire first so
	// that no other node waits for it). Without it a held key leaves the
	// claim as it was.
	EvenIfHeld bool
}

// A FireLock is one acquisition that [AcquireClaims] makes with its claim:
// Acquire's arguments and the claim.
type FireLock struct {
	Key   string        // the lock key, as Acquire's
	TTL   time.Duration // the lease's TTL, as Acquire's
	Claim FireClaim
}

// A FireLease is what [AcquireClaims] answers for one [FireLock]: the lease,
// or the error that [AcquireClaim] would have returned for it alone.
type FireLease struct {
	Lease Lease
	Err   error
}

// A ClaimAcquirer is a Claimer that claims and acquires in one step, and
// takes many such steps in one call: one round trip where Acquire and Claim
// take two each. The scheduler takes the locked fires of one instant this
// way when the driver is one (see [AcquireClaims]); the in-process, Redis
// and PostgreSQL drivers are.
//
// A type that embeds one of them and overrides Acquire or Claim (to count,
// trace or wrap leases) must override AcquireClaims too, or the scheduler's
// fires bypass its overrides; calling locks.AcquireThenClaim(ctx, w, …) for
// each FireLock is such an override, in two steps each through w's own
// methods.
type ClaimAcquirer interface {
	Claimer
	// AcquireClaims acquires each fire's key for its TTL as Acquire does
	// and claims its claim c as Claim(ctx, c.Key, c.Seq, c.TTL) does (the
	// same record), as one atomic step per fire, and returns one FireLease
	// per fire, in order:
	//   - the claim is refused (a claim of c.Seq or higher recorded by
	//     another call): an error wrapping ErrClaimed; the key is not
	//     acquired (or is given back at once, its token spent);
	//   - the key is acquired: the claim is recorded and the lease returned;
	//   - the key is held: an error wrapping ErrNotAcquired; the claim is
	//     recorded only with c.EvenIfHeld (refused, the error wraps
	//     ErrClaimed instead).
	// Fires are taken in order, so of two fires on one key the first is
	// the one that may acquire it. A call that the driver or its client
	// retries after its first attempt took effect answers what that attempt
	// did, as Acquire and Claim do. A fire with bad input gets an error
	// wrapping ErrInvalid, as Acquire's and Claim's do, and the others are
	// taken all the same. An empty fires answers an empty slice.
	AcquireClaims(ctx context.Context, fires []FireLock) []FireLease
}

// AcquireClaims acquires and claims each of fires in one step, all in one
// call, when d is a [ClaimAcquirer], and each with [AcquireThenClaim], one
// after another, otherwise. It answers as [ClaimAcquirer.AcquireClaims]
// does. d must be a Claimer, or wrap one ([As]). Unlike the other optional
// interfaces, a ClaimAcquirer is not looked up through a [Wrapper]: its
// AcquireClaims would bypass the wrapper's Acquire. A wrapper that counts
// or changes acquisitions and wants them in one step implements
// AcquireClaims itself.
func AcquireClaims(ctx context.Context, d Driver, fires []FireLock) []FireLease {
	if ca, ok := d.(ClaimAcquirer); ok {
		return ca.AcquireClaims(ctx, fires)
	}
	out := make([]FireLease, len(fires))
	for i, f := range fires {
		out[i].Lease, out[i].Err = AcquireThenClaim(ctx, d, f.Key, f.TTL, f.Claim)
	}
	return out
}

// AcquireClaim acquires key and claims c in one step: [AcquireClaims] of
// one fire.
func AcquireClaim(ctx context.Context, d Driver, key string, ttl time.Duration, c FireClaim) (Lease, error) {
	r := AcquireClaims(ctx, d, []FireLock{{Key: key, TTL: ttl, Claim: c}})
	return r[0].Lease, r[0].Err
}

// AcquireThenClaim does what [ClaimAcquirer.AcquireClaims] does for one
// fire in two
// steps, for a driver that cannot do it in one (or not on every
// deployment: the Redis driver on a Cluster): Acquire, then Claim once the
// lease is taken, releasing the lease when the claim is refused; with
// c.EvenIfHeld, Claim after an Acquire that found the key held. Between the
// two steps another call can see the lease without the claim, or the claim
// without the lease: the scheduler's rules hold either way, because a fire
// runs only with both. d must be a Claimer.
func AcquireThenClaim(ctx context.Context, d Driver, key string, ttl time.Duration, c FireClaim) (Lease, error) {
	cl, ok := As[Claimer](d)
	if !ok {
		return nil, fmt.Errorf("%w: %T keeps no claims (locks.Claimer)", ErrInvalid, d)
	}
	if err := CheckClaim(ctx, c.Key, c.Seq, c.TTL); err != nil {
		return nil, err
	}
	lease, err := d.Acquire(ctx, key, ttl)
	if err != nil && (!c.EvenIfHeld || !errors.Is(err, ErrNotAcquired)) {
		return nil, err
	}
	ok, cerr := cl.Claim(ctx, c.Key, c.Seq, c.TTL)
	if cerr == nil && !ok {
		cerr = fmt.Errorf("%w: claim %q of %d", ErrClaimed, c.Key, c.Seq)
	}
	switch {
	case cerr != nil && lease != nil:
		// The lease's context may be the one that just ended: give the key
		// back with a deadline of its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		defer cancel()
		if rerr := lease.Release(rctx); rerr != nil && !errors.Is(rerr, ErrLeaseLost) {
			cerr = fmt.Errorf("%w; releasing the lease on %q failed, so it stays held by nobody until its TTL: %w", cerr, key, rerr)
		}
		return nil, cerr
	case cerr != nil:
		return nil, cerr
	}
	return lease, err
}

// A MinTTLer is a Driver whose leases need a TTL above a minimum: the Redis
// driver closes Done a drift margin before the server's expiry, so a TTL at
// or below that margin gives a lease that is over before it starts. The
// scheduler rejects lock TTLs at or below MinTTL when tasks are added, and
// the driver rejects them on Acquire and Extend with ErrInvalid.
type MinTTLer interface {
	// MinTTL returns the TTL that every lease must exceed.
	MinTTL() time.Duration
}

// A Wrapper is a Driver that wraps another, for instance to count or trace
// its calls. Unwrap lets [As] find the optional interfaces (Watcher,
// Claimer, MinTTLer) of the wrapped driver, so a wrapper need not forward
// each of them.
type Wrapper interface {
	Driver
	// Unwrap returns the wrapped driver.
	Unwrap() Driver
}

// As finds the first driver in d's chain (d, then what each [Wrapper]
// unwraps to) that implements T, as errors.As does for errors. The scheduler
// and [Wait] look up optional interfaces with it, so a wrapper that embeds
// a Driver and has Unwrap keeps waiting on notifications and fire claims.
func As[T any](d Driver) (T, bool) {
	for d != nil {
		if t, ok := d.(T); ok {
			return t, true
		}
		w, ok := d.(Wrapper)
		if !ok {
			break
		}
		d = w.Unwrap()
	}
	var zero T
	return zero, false
}

// CheckFireLock validates one fire of an AcquireClaims call: its lease's
// arguments as [Check] does, its claim's as [CheckClaim] does.
func CheckFireLock(ctx context.Context, f FireLock) error {
	if err := Check(ctx, f.Key, f.TTL); err != nil {
		return err
	}
	return CheckClaim(ctx, f.Claim.Key, f.Claim.Seq, f.Claim.TTL)
}

// CheckClaim validates the arguments of a Claim call, as [Check] does for
// Acquire.
func CheckClaim(ctx context.Context, key string, seq int64, ttl time.Duration) error {
	if seq < 0 || seq > MaxClaimSeq {
		return fmt.Errorf("%w: claim seq %d for key %q must be in [0, %d]", ErrInvalid, seq, key, int64(MaxClaimSeq))
	}
	return Check(ctx, key, ttl)
}

// Check validates the arguments of an Acquire or Extend call and returns an
// error wrapping ErrInvalid, or the context's error, or nil. Drivers call it
// first so that every driver rejects bad input alike.
func Check(ctx context.Context, key string, ttl time.Duration) error {
	if ctx == nil {
		return fmt.Errorf("%w: ctx must not be nil", ErrInvalid)
	}
	if key == "" {
		return fmt.Errorf("%w: key %q must not be empty", ErrInvalid, key)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key %s is %d bytes long, the limit is locks.MaxKeyLen (%d bytes)", ErrInvalid, keyStart(key), len(key), MaxKeyLen)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v for key %q must be positive", ErrInvalid, ttl, key)
	}
	if ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v for key %q must not exceed locks.MaxTTL (%v)", ErrInvalid, ttl, key, MaxTTL)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("locks: key %q: %w", key, err)
	}
	return nil
}

// keyStart quotes the first 64 bytes of a key too long to print whole,
// cut at a rune boundary, followed by an ellipsis.
func keyStart(key string) string {
	const show = 64
	if len(key) <= show {
		return fmt.Sprintf("%q", key)
	}
	end := show
	for end > 0 && !utf8.RuneStart(key[end]) {
		end--
	}
	return fmt.Sprintf("%q…", key[:end])
}
