// Package drift holds the drivers' drift margin: how much earlier than the
// server that decides a lease its holder's Done closes, and the minimum TTL
// that margin leaves.
package drift

import (
	"fmt"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// Margin is how much earlier than the server a lease ends locally, so that a
// holder's Done closes before the server can hand the key to another
// (clock rates differ): Ratio of the TTL plus Min.
type Margin struct {
	ratio  float64
	min    time.Duration
	minTTL time.Duration
}

// New returns the margin ratio*ttl + min, with ratio in [0, 0.5) and
// min >= 0 (the drivers check their options first).
func New(ratio float64, min time.Duration) Margin {
	d := Margin{ratio: ratio, min: min}
	// ttl - Margin(ttl) grows with ttl (ratio < 0.5): start at the real
	// root and step over the rounding of Margin.
	m := time.Duration(float64(min) / (1 - ratio))
	for m > 0 && m-d.Of(m) > 0 {
		m--
	}
	for (m+1)-d.Of(m+1) <= 0 {
		m++
	}
	d.minTTL = m
	return d
}

// Of is how much earlier than the server a lease of ttl ends locally.
func (d Margin) Of(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*d.ratio) + d.min
}

// MinTTL is the largest TTL whose lease would end locally no later than it
// starts, because the margin is at least the TTL (locks.MinTTLer).
func (d Margin) MinTTL() time.Duration { return d.minTTL }

// Check rejects, for the driver named pkg, a TTL that leaves no live lease.
func (d Margin) Check(pkg, key string, ttl time.Duration) error {
	if ttl <= d.minTTL {
		return fmt.Errorf("%w: %s: ttl %v for key %q must exceed the driver's MinTTL %v: "+
			"Done closes DriftRatio*ttl + MinDrift (%v) before the TTL ends, so no lease would be live",
			locks.ErrInvalid, pkg, ttl, key, d.minTTL, d.Of(ttl))
	}
	return nil
}

// The defaults of a driver's Options.DriftRatio and Options.MinDrift.
const (
	DefaultRatio = 0.01
	DefaultMin   = 2 * time.Millisecond
)

// FromOptions validates a driver's Options.DriftRatio and Options.MinDrift
// (pkg names the driver in the error, which wraps locks.ErrInvalid) and
// returns their margin, zero values meaning the defaults.
func FromOptions(pkg string, ratio float64, min time.Duration) (Margin, error) {
	switch {
	case ratio < 0 || ratio >= 0.5:
		return Margin{}, fmt.Errorf("%w: %s: Options.DriftRatio %v must be in [0, 0.5)", locks.ErrInvalid, pkg, ratio)
	case min < 0:
		return Margin{}, fmt.Errorf("%w: %s: Options.MinDrift %v must not be negative", locks.ErrInvalid, pkg, min)
	}
	if ratio == 0 {
		ratio = DefaultRatio
	}
	if min == 0 {
		min = DefaultMin
	}
	return New(ratio, min), nil
}
