// Package leasestate is the local state that the lock drivers keep for a
// lease: whether it is held, released or lost, and its Done channel with
// the timer that closes it at the lease's local expiry. It holds no mutex:
// each driver guards it with its own.
package leasestate

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// A State is where a lease is in its life: Held, then Released or Lost,
// both final.
type State uint8

// The states of a lease.
const (
	Held State = iota
	Released
	Lost
)

// closed is the Done channel of a lease that was already over when Done was
// first called.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done is a lease's Done channel and the timer that closes it at the
// lease's local expiry. Its zero value has neither: Chan makes them. Its
// methods, and the expire callback given to Chan, run with the lease's
// mutex held.
type Done struct {
	ch    chan struct{}
	timer clockwork.Timer // nil once stopped or never armed
}

// Chan returns the channel. The first call makes it: open, with a timer on
// c that calls expire after left (the time to the local expiry), if live;
// closed otherwise.
func (d *Done) Chan(c clockwork.Clock, live bool, left time.Duration, expire func()) <-chan struct{} {
	if d.ch == nil {
		if live {
			d.ch = make(chan struct{})
			d.timer = c.AfterFunc(left, expire)
		} else {
			d.ch = closed
		}
	}
	return d.ch
}

// Armed reports whether the timer is set: the channel is open and closes
// at the local expiry. An expire callback that finds it unarmed was
// overtaken by Close and does nothing.
func (d *Done) Armed() bool { return d.timer != nil }

// Reset moves the local expiry to left from now, if the timer is armed.
func (d *Done) Reset(left time.Duration) {
	if d.timer != nil {
		d.timer.Reset(left)
	}
}

// Close stops the timer and closes the channel, or makes Chan return a
// closed channel if it was never called. It may be called more than once.
func (d *Done) Close() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.ch == nil {
		d.ch = closed
	} else if d.ch != closed {
		close(d.ch)
		d.ch = closed
	}
}
