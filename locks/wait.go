package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// DefaultWaitStep is the poll interval of [Wait] when the driver cannot tell
// when a key is released, or as a fallback when it can.
const DefaultWaitStep = 100 * time.Millisecond

// WaitOptions configures [Wait].
type WaitOptions struct {
	// Budget is how long to wait for a held key before giving up with
	// ErrNotAcquired. Zero means one attempt, as Acquire.
	Budget time.Duration
	// Step is the poll interval; zero means DefaultWaitStep. A driver that
	// implements Watcher wakes waiters at once on release, and polling at
	// Step then only covers expiries and missed notifications.
	Step time.Duration
	// Clock measures Budget and Step; nil means the real clock.
	Clock clockwork.Clock
}

// Wait acquires key from d, waiting up to opts.Budget while the key is held.
// Its Acquire calls carry WithWaiting: the first ones with waited false,
// those after it waited (woken by the Watcher or its Step) with true, so
// that a driver can hand a released key to callers that waited first.
// It returns the lease, or an error wrapping ErrNotAcquired when the budget
// runs out, or the first error that is not ErrNotAcquired, or the context's
// error.
func Wait(ctx context.Context, d Driver, key string, ttl time.Duration, opts WaitOptions) (Lease, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: driver must not be nil", ErrInvalid)
	}
	if opts.Budget < 0 {
		return nil, fmt.Errorf("%w: wait budget %v for key %q must not be negative", ErrInvalid, opts.Budget, key)
	}
	if opts.Step < 0 {
		return nil, fmt.Errorf("%w: wait step %v for key %q must not be negative", ErrInvalid, opts.Step, key)
	}
	if opts.Budget == 0 {
		return d.Acquire(ctx, key, ttl)
	}
	if opts.Step == 0 {
		opts.Step = DefaultWaitStep
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	w, _ := As[Watcher](d)
	deadline := opts.Clock.NewTimer(opts.Budget)
	defer deadline.Stop()
	actx, hasWaited := WithWaiting(ctx, false), false
	for {
		var released <-chan struct{}
		stop := func() {}
		if w != nil {
			released, stop = w.Watch(key)
		}
		l, err := d.Acquire(actx, key, ttl)
		if err == nil || !errors.Is(err, ErrNotAcquired) {
			stop()
			return l, err
		}
		step := opts.Clock.NewTimer(opts.Step)
		select {
		case <-released:
		case <-step.Chan():
		case <-deadline.Chan():
			step.Stop()
			stop()
			return nil, fmt.Errorf("%w after waiting %v", err, opts.Budget)
		case <-ctx.Done():
			step.Stop()
			stop()
			return nil, fmt.Errorf("locks: waiting for key %q: %w", key, ctx.Err())
		}
		step.Stop()
		stop()
		if !hasWaited {
			actx, hasWaited = WithWaiting(ctx, true), true
		}
	}
}
