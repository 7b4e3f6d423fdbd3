package schedulingtest

import (
	"context"
	"sync"
)

// A Gate holds the runs of tasks until the test opens it, and counts the
// runs it holds, so that [SettleBlocked] and [StepBlocked] can settle a
// scheduler while they block: a task's function calls [Gate.Wait] where its
// run is to block, and the test passes the Gate's Blocked as blocked. The
// zero Gate is closed and ready to use. A Gate is safe for concurrent use.
type Gate struct {
	mu      sync.Mutex    // protects the fields below
	open    chan struct{} // closed by Open; made on first use
	opened  bool
	waiting map[*waiter]struct{} // the calls of Wait not yet returned
}

// A waiter is one call of Wait, with its context.
type waiter struct{ ctx context.Context }

// ch returns g's channel, closed once g opens. g.mu is held.
func (g *Gate) ch() chan struct{} {
	if g.open == nil {
		g.open = make(chan struct{})
	}
	return g.open
}

// Wait blocks until g opens or ctx ends (a run's context ends at the
// scheduler's stop deadline, at its MaxRunTime, or when a later fire
// supersedes it), and returns nil or ctx's error. While it waits, the
// caller counts in Blocked.
func (g *Gate) Wait(ctx context.Context) error {
	w := &waiter{ctx}
	g.mu.Lock()
	open := g.ch()
	if g.waiting == nil {
		g.waiting = map[*waiter]struct{}{}
	}
	g.waiting[w] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, w)
		g.mu.Unlock()
	}()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open lets every waiting run go on, and every later Wait return at once.
// Calls after the first do nothing: a test may open g in its cleanup,
// before it stops the scheduler (Stop waits for the runs in flight), and
// also when it means to.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened {
		close(g.ch())
		g.opened = true
	}
}

// Opened reports whether Open was called.
func (g *Gate) Opened() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened
}

// Blocked returns how many calls of Wait are blocked: none once g opened,
// and none whose context ended, though they may not have returned yet. A
// run that Open or its context let go thus counts as one on its way to its
// end, for [SettleBlocked] to wait for.
func (g *Gate) Blocked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return 0
	}
	n := 0
	for w := range g.waiting {
		if w.ctx.Err() == nil {
			n++
		}
	}
	return n
}
