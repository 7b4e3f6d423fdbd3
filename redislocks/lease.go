package redislocks

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ndigo/ndigo/internal/leasestate"
	"github.com/ndigo/ndigo/locks"
)

// lease is one acquisition. Redis decides whether it is still the holder;
// the local fields only decide when Done closes and spare round trips for a
// lease known to be over.
type lease struct {
	d     *Driver
	key   string
	token uint64
	id    string // "<token>:<nonce>": the lock's value while this lease holds it, without the '+' mark

	mu       sync.Mutex       // protects the fields below
	state    leasestate.State // released and lost are final
	deadline time.Time        // local expiry on d.clock
	done     leasestate.Done  // Done's channel and the timer that closes it at the deadline
}

// Key implements locks.Lease.
func (l *lease) Key() string { return l.key }

// Token implements locks.Lease.
func (l *lease) Token() uint64 { return l.token }

// Extend implements locks.Lease in one round trip. A lease past its local
// deadline is not extended even if Redis still holds it: its Done has closed
// and its holder was told to stop. With Options.MinReplicas, an extension
// that too few replicas acknowledged fails with ErrNotReplicated and leaves
// the lease held with its earlier deadline, which the replicas have.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := locks.Check(ctx, l.key, ttl); err != nil {
		return err
	}
	d := l.d
	if err := d.margin.Check("redislocks", l.key, ttl); err != nil {
		return err
	}
	sent := d.clock.Now()
	l.mu.Lock()
	if l.state != leasestate.Held || !sent.Before(l.deadline) {
		err := l.lose()
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	n, err := d.extend(ctx, l.key, ttl, []string{d.tag(l.key) + "lock"}, l.id, millis(ttl))
	if err != nil {
		return fmt.Errorf("%w: extend key %q token %d: %w", ErrRedis, l.key, l.token, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n != 1 || l.state != leasestate.Held {
		return l.lose()
	}
	l.deadline = sent.Add(ttl - d.margin.Of(ttl))
	if l.done.Armed() {
		l.done.Reset(l.deadline.Sub(d.clock.Now()))
	}
	return nil
}

// Release implements locks.Lease in one round trip. A lease past its local
// deadline is still released in Redis if Redis still holds it, so the key
// frees before its TTL runs out. A Release whose earlier attempt (a retry by
// the client, or an earlier call that failed with ErrRedis) released the
// lease returns nil, as long as the key's tombstone still names the lease:
// for a minute after the key's last release, among its last 8.
func (l *lease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: ctx must not be nil", locks.ErrInvalid)
	}
	l.mu.Lock()
	switch l.state {
	case leasestate.Released:
		l.mu.Unlock()
		return nil
	case leasestate.Lost:
		err := l.lose()
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	d := l.d
	waiters := "0"
	if d.hub.watched(l.key) {
		waiters = "1"
	}
	tag := d.tag(l.key)
	n, err := releaseScript.Run(ctx, d.client, []string{tag + "lock", tag + "tombstone"},
		l.id, d.channels+l.key, waiters, millis(tombstoneTTL), millis(handoffTTL)).Int64()
	if err != nil {
		return fmt.Errorf("%w: release key %q token %d: %w", ErrRedis, l.key, l.token, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leasestate.Released {
		return nil
	}
	if n != 1 {
		return l.lose()
	}
	l.state = leasestate.Released
	l.done.Close()
	return nil
}

// lose marks l as lost and returns ErrLeaseLost. l.mu must be held.
func (l *lease) lose() error {
	if l.state == leasestate.Held {
		l.state = leasestate.Lost
	}
	l.done.Close()
	return fmt.Errorf("%w: key %q token %d", locks.ErrLeaseLost, l.key, l.token)
}

// Done implements locks.Lease. It closes at the local deadline (see the
// package documentation), on Release, and when Extend finds the lease lost.
func (l *lease) Done() <-chan struct{} {
	now := l.d.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done.Chan(l.d.clock, l.state == leasestate.Held && now.Before(l.deadline), l.deadline.Sub(now), l.expire)
}

// expire runs at the local deadline, or later if an Extend moved it.
func (l *lease) expire() {
	now := l.d.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done.Armed() {
		return
	}
	if now.Before(l.deadline) {
		l.done.Reset(l.deadline.Sub(now))
		return
	}
	l.done.Close()
}
