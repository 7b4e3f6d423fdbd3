package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// InstrumentDriver returns d with its Acquire calls counted by outcome
// ([LockAttempts]: acquired, held, error) and timed ([LockAcquireDuration]).
// The result unwraps to d (locks.Wrapper), so that waiting and fire claims
// find d's locks.Watcher and locks.Claimer through locks.As; claims are not
// counted. Leases are d's own, unwrapped.
func (m *Metrics) InstrumentDriver(d locks.Driver) locks.Driver {
	return &driver{inner: d, m: m}
}

type driver struct {
	inner locks.Driver
	m     *Metrics
}

// monoBase anchors the monotonic readings of Acquire: time.Since of a time
// with a monotonic reading reads only the monotonic clock, about half the
// cost of time.Now, which reads the wall clock too.
var monoBase = time.Now()

func (d *driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	start := time.Since(monoBase)
	l, err := d.inner.Acquire(ctx, key, ttl)
	d.m.acquire.Observe((time.Since(monoBase) - start).Seconds())
	switch {
	case err == nil:
		d.m.attempts[acquired].Inc()
	case errors.Is(err, locks.ErrNotAcquired):
		d.m.attempts[held].Inc()
	default:
		d.m.attempts[failed].Inc()
	}
	return l, err
}

// Unwrap implements locks.Wrapper.
func (d *driver) Unwrap() locks.Driver { return d.inner }
