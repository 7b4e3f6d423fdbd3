package pglocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/leasestate"
	"github.com/ndigo/ndigo/locks"
)

// handle is one acquisition: the locks.Lease of this driver. The database decides whether it is still the
// holder; the local fields only decide when Done closes and spare round
// trips for a lease known to be over.
type handle struct {
	d     *Driver
	key   string
	token uint64

	mu       sync.Mutex       // protects the fields below
	state    leasestate.State // released and lost are final
	deadline time.Time        // local expiry on d.clock
	done     leasestate.Done  // Done's channel and the timer that closes it at the deadline
}

// Key implements locks.Lease.
func (l *handle) Key() string { return l.key }

// Token implements locks.Lease.
func (l *handle) Token() uint64 { return l.token }

// Extend implements locks.Lease in one statement. A lease past its local
// deadline is not extended even if the database still holds it: its Done
// has closed and its holder was told to stop.
func (l *handle) Extend(ctx context.Context, ttl time.Duration) error {
	if err := locks.Check(ctx, l.key, ttl); err != nil {
		return err
	}
	d := l.d
	if err := d.margin.Check("pglocks", l.key, ttl); err != nil {
		return err
	}
	sent := d.clock.Now()
	if err := l.live(sent); err != nil {
		return err
	}
	var ok bool
	err := d.pool.QueryRow(ctx, d.sql.extend, pgx.QueryExecModeExec, d.ns, l.key, int64(l.token), micros(ttl)).Scan(&ok)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: extend key %q token %d: %w", ErrDatabase, l.key, l.token, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || l.state != leasestate.Held {
		return l.lose()
	}
	l.deadline = sent.Add(ttl - d.margin.Of(ttl))
	if l.done.Armed() {
		l.done.Reset(l.deadline.Sub(d.clock.Now()))
	}
	return nil
}

// live returns nil if l is held and now is before its local deadline;
// otherwise it marks l lost (unless released) and returns ErrLeaseLost.
func (l *handle) live(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != leasestate.Held || !now.Before(l.deadline) {
		return l.lose()
	}
	return nil
}

// Release implements locks.Lease in one statement. A lease past its local
// deadline is still released in the database if the database still holds
// it, so the key frees before its TTL runs out. A Release whose earlier
// attempt failed with ErrDatabase after releasing the lease returns nil, as
// long as no successor acquired the key since.
func (l *handle) Release(ctx context.Context) error {
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
	var ok bool
	err := d.pool.QueryRow(ctx, d.sql.release, pgx.QueryExecModeExec, d.ns, l.key, int64(l.token), d.channel).Scan(&ok)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: release key %q token %d: %w", ErrDatabase, l.key, l.token, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leasestate.Released {
		return nil
	}
	if err != nil {
		return l.lose()
	}
	l.state = leasestate.Released
	l.done.Close()
	return nil
}

// lose marks l as lost (unless released) and returns ErrLeaseLost. l.mu
// must be held.
func (l *handle) lose() error {
	if l.state == leasestate.Held {
		l.state = leasestate.Lost
	}
	l.done.Close()
	return fmt.Errorf("%w: key %q token %d", locks.ErrLeaseLost, l.key, l.token)
}

// Done implements locks.Lease. It closes at the local deadline (see the
// package documentation), on Release, and when Extend or Guard finds the
// lease lost.
func (l *handle) Done() <-chan struct{} {
	now := l.d.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done.Chan(l.d.clock, l.state == leasestate.Held && now.Before(l.deadline), l.deadline.Sub(now), l.expire)
}

// expire runs at the local deadline, or later if an Extend moved it.
func (l *handle) expire() {
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
