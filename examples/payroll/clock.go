package main

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// offsetClock is a clock whose Now runs offset ahead of (or, negative,
// behind) the clock it wraps, as a node's badly synchronised clock would.
// Durations are unaffected.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
