package locks

import (
	"context"
	"fmt"
	"time"
)

// A Driver hands out leases on keys. Implementations must be safe for
// concurrent use and must pass the conformance suite in [lockstest].
//
// [lockstest]: https://pkg.go.dev/github.com/ndigo/ndigo/locks/lockstest
type Driver interface {
	// Acquire takes the lease on key for ttl. It never blocks on a held key:
	// it returns an error wrapping ErrNotAcquired at once. Every successful
	// acquisition carries a fencing token strictly greater than every token
	// issued before for that key. Bad input returns an error wrapping
	// ErrInvalid; a failing backend returns an error that wraps neither.
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
	// if this lease is no longer the current holder, and then closes Done.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the key up. It returns ErrLeaseLost if the lease expired
	// or was superseded; a second Release by the holder returns nil and
	// touches nothing.
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

// A Marker is a Driver that can set a mark: a key taken for a TTL without a
// fencing token, which no one extends or releases. The scheduler claims each
// fire with a mark where the driver has them; a mark costs less than a lease
// (no token to mint) and leaves nothing behind when it expires.
type Marker interface {
	// Mark takes key for ttl unless it is already marked, and reports
	// whether it did. Marks and leases of the same key are independent.
	// Bad input returns an error wrapping ErrInvalid, like Acquire.
	Mark(ctx context.Context, key string, ttl time.Duration) (bool, error)
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
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %v for key %q must be positive", ErrInvalid, ttl, key)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("locks: key %q: %w", key, err)
	}
	return nil
}
