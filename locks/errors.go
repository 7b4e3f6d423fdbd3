package locks

import "errors"

// ErrNotAcquired reports that the key is held by a live lease. Acquire never
// blocks: a held key answers this error at once, wrapped with the key.
var ErrNotAcquired = errors.New("locks: not acquired")

// ErrClaimed reports a claim refused because a claim of the same or a
// higher sequence number is recorded under its key ([ClaimAcquirer]).
var ErrClaimed = errors.New("locks: already claimed")

// ErrLeaseLost reports that a lease is no longer the current holder of its
// key: it expired, or another acquisition has happened since. An operation
// that returns it changed nothing.
var ErrLeaseLost = errors.New("locks: lease lost")

// ErrInvalid reports bad input to a lock operation: an empty key, a
// non-positive TTL, a nil driver. The wrapping error names the argument, the
// value and the rule.
var ErrInvalid = errors.New("locks: invalid argument")
