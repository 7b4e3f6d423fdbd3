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
// counted. If d is a locks.ClaimAcquirer, so is the result: its
// AcquireClaims is d's, one call for all the fires, each fire counted as
// an Acquire (a fire another node claimed first counts as held) and timed
// as the call. Leases are d's own, unwrapped.
func (m *Metrics) InstrumentDriver(d locks.Driver) locks.Driver {
	if _, ok := d.(locks.ClaimAcquirer); ok {
		return &claimDriver{driver{inner: d, m: m}}
	}
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
	d.count((time.Since(monoBase) - start).Seconds(), err)
	return l, err
}

// count records one lock attempt that took secs and answered err.
func (d *driver) count(secs float64, err error) {
	d.m.acquire.Observe(secs)
	switch {
	case err == nil:
		d.m.attempts[acquired].Inc()
	case errors.Is(err, locks.ErrNotAcquired), errors.Is(err, locks.ErrClaimed):
		d.m.attempts[held].Inc()
	default:
		d.m.attempts[failed].Inc()
	}
}

// A claimDriver is the instrumented form of a locks.ClaimAcquirer.
type claimDriver struct{ driver }

// Claim implements locks.Claimer: d's, not counted.
func (d *claimDriver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	return d.inner.(locks.ClaimAcquirer).Claim(ctx, key, seq, ttl)
}

// AcquireClaims implements locks.ClaimAcquirer.
func (d *claimDriver) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	start := time.Since(monoBase)
	out := d.inner.(locks.ClaimAcquirer).AcquireClaims(ctx, fires)
	secs := (time.Since(monoBase) - start).Seconds()
	for _, r := range out {
		d.count(secs, r.Err)
	}
	return out
}

// Unwrap implements locks.Wrapper.
func (d *driver) Unwrap() locks.Driver { return d.inner }
