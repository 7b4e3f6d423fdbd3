// Package clockskew makes a clock that reads another shifted by a
// constant, as a node with a badly synchronised clock would: the scheduler's
// test kit, its own tests and the payroll example's --clock-offset share it.
package clockskew

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// New returns a clock whose Now runs off ahead of c (off > 0) or behind
// it. Timers, tickers and sleeps are c's own: a duration lasts as long on
// both.
func New(c clockwork.Clock, off time.Duration) clockwork.Clock { return skewed{c, off} }

type skewed struct {
	clockwork.Clock
	off time.Duration
}

func (c skewed) Now() time.Time                  { return c.Clock.Now().Add(c.off) }
func (c skewed) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewed) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
