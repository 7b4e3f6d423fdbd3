// Package remotelease is the local half of a lease whose holder a server
// decides, as the Redis and PostgreSQL drivers' leases are: the server
// answers whether the lease still holds its key; the local half only
// decides when Done closes (at a deadline a drift margin before the
// server's expiry) and spares round trips for a lease known to be over.
package remotelease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/drift"
	"github.com/ndigo/ndigo/internal/leasestate"
	"github.com/ndigo/ndigo/locks"
)

// A Lease is the local state of one acquisition. A driver's lease type
// embeds a *Lease, which gives it Key, Token and Done, and implements
// Extend and Release with ExtendWith and ReleaseWith.
type Lease struct {
	key    string
	token  uint64
	clock  clockwork.Clock
	margin drift.Margin
	pkg    string // the driver's package, for errors

	mu       sync.Mutex       // protects the fields below
	state    leasestate.State // released and lost are final
	deadline time.Time        // local expiry on clock
	done     leasestate.Done  // Done's channel and the timer that closes it at the deadline
}

// New returns the local half of a lease of key with token, acquired at
// sent with ttl: its deadline is sent + ttl - margin.Of(ttl). pkg names the
// driver in errors.
func New(pkg, key string, token uint64, c clockwork.Clock, m drift.Margin, sent time.Time, ttl time.Duration) *Lease {
	return &Lease{pkg: pkg, key: key, token: token, clock: c, margin: m, deadline: sent.Add(ttl - m.Of(ttl))}
}

// Key implements locks.Lease.
func (l *Lease) Key() string { return l.key }

// Token implements locks.Lease.
func (l *Lease) Token() uint64 { return l.token }

// ExtendWith implements locks.Lease's Extend: it checks ttl, refuses a
// lease past its local deadline without a round trip (its Done has closed
// and its holder was told to stop, even if the server still holds it), and
// otherwise calls extend, which asks the server and returns whether the
// lease still held its key, or an error wrapping the driver's sentinel when
// the outcome is unknown. Extended, the deadline moves to ttl minus the
// margin from when extend was called. When the outcome is unknown (a lost
// reply, a context that ended after the request was sent), the server may
// hold the key for ttl from then or for what it held before: the deadline
// becomes the earlier of the two, so that Done never outlives the server's
// expiry.
func (l *Lease) ExtendWith(ctx context.Context, ttl time.Duration, extend func(context.Context) (bool, error)) error {
	if err := locks.Check(ctx, l.key, ttl); err != nil {
		return err
	}
	if err := l.margin.Check(l.pkg, l.key, ttl); err != nil {
		return err
	}
	sent := l.clock.Now()
	if err := l.Live(sent); err != nil {
		return err
	}
	held, err := extend(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	deadline := sent.Add(ttl - l.margin.Of(ttl))
	if err != nil {
		if deadline.Before(l.deadline) {
			l.deadline = deadline
			if l.done.Armed() {
				l.done.Reset(l.deadline.Sub(l.clock.Now()))
			}
		}
		return err
	}
	if !held || l.state != leasestate.Held {
		return l.lose()
	}
	l.deadline = deadline
	if l.done.Armed() {
		l.done.Reset(l.deadline.Sub(l.clock.Now()))
	}
	return nil
}

// ReleaseWith implements locks.Lease's Release: a released lease returns
// nil and a lost one ErrLeaseLost without a round trip; otherwise it calls
// release, which asks the server and returns whether the lease held its
// key (or was recognised as released by an earlier attempt), or an error
// wrapping the driver's sentinel when the outcome is unknown. A lease past
// its local deadline is still released on the server, so that the key
// frees before its TTL runs out.
func (l *Lease) ReleaseWith(ctx context.Context, release func(context.Context) (bool, error)) error {
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
	released, err := release(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leasestate.Released {
		return nil
	}
	if !released {
		return l.lose()
	}
	l.state = leasestate.Released
	l.done.Close()
	return nil
}

// Live returns nil if l is held and now is before its local deadline;
// otherwise it marks l lost (unless released) and returns ErrLeaseLost.
func (l *Lease) Live(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != leasestate.Held || !now.Before(l.deadline) {
		return l.lose()
	}
	return nil
}

// Lose marks l lost (unless released), closes its Done and returns
// ErrLeaseLost: for a server that answered that the lease no longer holds
// its key.
func (l *Lease) Lose() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lose()
}

// lose is Lose with l.mu held.
func (l *Lease) lose() error {
	if l.state == leasestate.Held {
		l.state = leasestate.Lost
	}
	l.done.Close()
	return fmt.Errorf("%w: key %q token %d", locks.ErrLeaseLost, l.key, l.token)
}

// Unrelease makes a released lease held again, as if its Release had
// failed with an unknown outcome after the server released it, so that a
// test can call Release again. Tests only.
func (l *Lease) Unrelease() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state = leasestate.Held
}

// Done implements locks.Lease. It closes at the local deadline, on
// Release, and when the server answers that the lease was lost.
func (l *Lease) Done() <-chan struct{} {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done.Chan(l.clock, l.state == leasestate.Held && now.Before(l.deadline), l.deadline.Sub(now), l.expire)
}

// expire runs at the local deadline, or later if an Extend moved it.
func (l *Lease) expire() {
	now := l.clock.Now()
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
