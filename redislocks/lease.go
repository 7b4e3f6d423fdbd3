package redislocks

import (
	"context"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/internal/remotelease"
)

// lease is one acquisition. Redis decides whether it is still the holder;
// the embedded local half only decides when Done closes (see the package
// documentation) and spares round trips for a lease known to be over.
type lease struct {
	*remotelease.Lease
	d  *Driver
	id string // "<token>:<nonce>": the lock's value while this lease holds it, without the '+' mark
}

// Extend implements locks.Lease in one round trip. A lease past its local
// deadline is not extended even if Redis still holds it: its Done has closed
// and its holder was told to stop. With Options.MinReplicas, an extension
// that too few replicas acknowledged fails with ErrNotReplicated and leaves
// the lease held with its earlier deadline, which the replicas have.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	d := l.d
	return l.ExtendWith(ctx, ttl, func(ctx context.Context) (bool, error) {
		n, err := d.extend(ctx, l.Key(), ttl, []string{d.tag(l.Key()) + "lock"}, l.id, millis(ttl))
		if err != nil {
			return false, fmt.Errorf("%w: extend key %q token %d: %w", ErrRedis, l.Key(), l.Token(), withContext(ctx, err))
		}
		return n == 1, nil
	})
}

// Release implements locks.Lease in one round trip. A lease past its local
// deadline is still released in Redis if Redis still holds it, so the key
// frees before its TTL runs out. A Release whose earlier attempt (a retry by
// the client, or an earlier call that failed with ErrRedis) released the
// lease returns nil, as long as the key's tombstone still names the lease:
// for a minute after the key's last release, among its last 8.
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	return l.ReleaseWith(ctx, func(ctx context.Context) (bool, error) {
		waiters := "0"
		if d.hub.Waiting(l.Key()) > 0 {
			waiters = "1"
		}
		tag := d.tag(l.Key())
		n, err := releaseScript.Run(ctx, d.client, []string{tag + "lock", tag + "released"},
			l.id, d.channels+l.Key(), waiters, millis(handoffTTL)).Int64()
		if err != nil {
			return false, fmt.Errorf("%w: release key %q token %d: %w", ErrRedis, l.Key(), l.Token(), withContext(ctx, err))
		}
		return n == 1, nil
	})
}
