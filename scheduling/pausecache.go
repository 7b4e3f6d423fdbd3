package scheduling

import (
	"sync"
	"time"
)

// PauseFlagAge bounds how long a node trusts a paused flag it read without
// reading it again. A flag read is kept until the store's pause generation
// ([taskstate.Poll].Pauses), which every poll reads, moves on; the age
// only matters for a SetPaused that moves no generation (one made by a node
// of an earlier version, during a rolling upgrade).
const PauseFlagAge = time.Minute

// pauseCache keeps the paused flags a node read, so that a fire reads its
// task's flag from the store only after a pause or resume anywhere in the
// cluster (the generation moved on), or after a failed poll, or once per
// PauseFlagAge: in the steady state, no call per fire.
type pauseCache struct {
	mu    sync.Mutex
	gen   int64
	known bool // gen is the one the last poll read; false before the first and after a failed one
	flags map[string]pauseFlag
}

type pauseFlag struct {
	paused bool
	read   time.Time
}

// polled takes the generation a poll read: a new one forgets every flag.
func (c *pauseCache) polled(gen int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known || gen != c.gen {
		clear(c.flags)
	}
	c.gen, c.known = gen, true
}

// forget forgets every flag: after a failed poll (until the next poll
// succeeds, every fire reads its flag, and fails if the store does), or a
// pause or resume made on this node.
func (c *pauseCache) forget(keepGen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.flags)
	c.known = c.known && keepGen
}

// paused returns task's flag, from the cache while the generation it was
// read in holds and it is younger than PauseFlagAge, else from read (and
// keeps it, unless a poll moved the generation on during the read).
func (c *pauseCache) paused(task string, now time.Time, read func(string) (bool, error)) (bool, error) {
	c.mu.Lock()
	f, ok := c.flags[task]
	gen, known := c.gen, c.known
	c.mu.Unlock()
	if ok && now.Sub(f.read) < PauseFlagAge {
		return f.paused, nil
	}
	p, err := read(task)
	if err != nil || !known {
		return p, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && c.gen == gen {
		if c.flags == nil {
			c.flags = map[string]pauseFlag{}
		}
		c.flags[task] = pauseFlag{p, now}
	}
	return p, nil
}
