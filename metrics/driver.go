package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// InstrumentDriver returns d with its Acquire calls counted by outcome
// ([LockAttempts]: acquired, held, error) and timed ([LockAcquireDuration]).
// The result implements locks.Watcher and locks.Marker when d does, so
// waiting and fire claims work as before; marks (fire claims) are not
// counted. Leases are d's own, unwrapped.
func (m *Metrics) InstrumentDriver(d locks.Driver) locks.Driver {
	base := &driver{inner: d, m: m}
	w, isWatcher := d.(locks.Watcher)
	mk, isMarker := d.(locks.Marker)
	switch {
	case isWatcher && isMarker:
		return watchMarkDriver{base, w, mk}
	case isWatcher:
		return watchDriver{base, w}
	case isMarker:
		return markDriver{base, mk}
	}
	return base
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

type watchDriver struct {
	*driver
	locks.Watcher
}

type markDriver struct {
	*driver
	locks.Marker
}

type watchMarkDriver struct {
	*driver
	locks.Watcher
	locks.Marker
}
