package scheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ndigo/ndigo/internal/durations"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// A gate is the lock of the spec that an update of a stored schedule
// replaced, when the new spec locks another key. A run of the old spec may
// still be going under it when the new spec comes in force (a long run, a
// renewed one), and a fire of the old spec that waits for it (LockWait) may
// still start: so each fire of the new spec takes the old lock too, before
// its own, and holds both for its run; a fire that finds the old lock held
// is skipped as for a lock held. The gate opens, on this node, once one of
// its fires took the old lock at or after end: the last moment a fire of
// the old spec could still take it (its From, plus the old spec's jitter
// and lock wait, plus the change's lead for the nodes' clocks). From then
// on no run of the old spec is going and none can start, and the fires take
// their own lock alone. An update made while the gate of the one before is
// closed keeps its locks too: a run of the spec before that may still be
// going.
type gate struct {
	locks []string
	end   time.Time
	open  atomic.Bool
}

// newGate returns the gate of e, the entry of stored schedule sc, given
// the gate of the entry e replaces (nil if none): the lock of the spec sc
// replaced unless it is none or e's, and the locks of prev if it is still
// closed; nil if there is none. e's own lock aside.
func newGate(sc *taskstate.Schedule, e *entry, lead time.Duration, prev *gate) *gate {
	if e.spec.Lock == "" {
		return nil
	}
	g := &gate{}
	if prev != nil && !prev.open.Load() {
		for _, l := range prev.locks {
			if l != e.spec.Lock {
				g.locks = append(g.locks, l)
			}
		}
		g.end = prev.end
	}
	if len(sc.Replaced) > 0 {
		if old := sc.Replaced[0]; old.Lock != "" && old.Lock != e.spec.Lock {
			if !slices.Contains(g.locks, old.Lock) {
				g.locks = append(g.locks, old.Lock)
			}
			g.end = maxTime(g.end, oldEnd(sc, old, lead))
		}
	}
	// The specs before, whose gates are still closed when sc comes in
	// force, from the document itself: a node that did not read the
	// update between (its polls failed) has no prev gate of it, and ran
	// sc's fires beside a run of the spec before holding its lock (the
	// cluster simulation's seed 3879256634320182191 history 95).
	// A spec's run may hold its lock for its lease after its last start
	// (for ever with renew): its lock stays in the gate while a run may
	// hold it when sc comes in force.
	for i := 1; i < len(sc.Replaced) && !sc.From.IsZero(); i++ {
		old := sc.Replaced[i]
		end := oldEnd(&taskstate.Schedule{From: sc.Replaced[i-1].From}, old, lead)
		if hold, bounded := oldHold(old); bounded && !end.Add(hold).After(sc.From) {
			break
		}
		if old.Lock != "" && old.Lock != e.spec.Lock && !slices.Contains(g.locks, old.Lock) {
			g.locks = append(g.locks, old.Lock)
		}
		g.end = maxTime(g.end, end)
	}
	if len(g.locks) == 0 {
		return nil
	}
	return g
}

// oldEnd is the last moment a fire of old, the spec that sc replaced, can
// take old's lock.
func oldEnd(sc *taskstate.Schedule, old taskstate.PastSpec, lead time.Duration) time.Time {
	end := sc.From
	if !end.IsZero() {
		for _, k := range []string{"jitter", "lockWait"} {
			if d, err := durations.Parse(old.Options[k]); err == nil && d > 0 {
				end = end.Add(d)
			}
		}
		end = end.Add(lead)
	}
	return end
}

// oldHold returns how long a run of old may hold its lock after it
// started: its lock TTL (DefaultLockTTL if not set), and false with renew,
// whose runs hold it as long as they last.
func oldHold(old taskstate.PastSpec) (time.Duration, bool) {
	if old.Options["renew"] == "true" {
		return 0, false
	}
	if d, err := durations.Parse(old.Options["lockTtl"]); err == nil && d > 0 {
		return d, true
	}
	return DefaultLockTTL, true
}

// passed reports whether e's fires take their own lock alone.
func (e *entry) passed() bool { return e.gate == nil || e.gate.open.Load() }

// lock takes f's lease and claims the fire (steps 2 and 3 of admit): its
// own lock (see lockOwn) and, while e's gate is closed, the replaced spec's
// lock first, both then held for the run as one lease; a fire of a replaced
// spec run from the store takes the lock of the spec in force first
// (firing.also).
func (s *Scheduler) lock(f *firing, t *turn) (locks.Lease, Outcome, error) {
	e := f.e
	var g *gate
	others := f.also
	if !e.passed() {
		g = e.gate
		for _, l := range g.locks {
			if !slices.Contains(others, l) {
				others = append(slices.Clip(others), l)
			}
		}
	}
	if others == nil {
		return s.lockOwn(f, t)
	}
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, e.spec.LockTTL)
	defer cancel()
	at := s.clock.Now()
	var held []locks.Lease
	release := func() {
		rctx, rcancel := withTimeout(context.Background(), s.clock, e.spec.LockTTL)
		defer rcancel()
		for _, l := range held {
			s.releaseLease(e, l, rctx)
		}
	}
	// The other locks are taken first, and held while the fire waits for
	// its own (LockWait): for the lock TTL from then on. For the TTL
	// alone they ended during a longer wait, and the fire ran without
	// them, or failed (the cluster simulation's seed 14591975816012221649
	// history 191).
	for _, k := range others {
		l, err := s.driver.Acquire(ctx, k, e.spec.LockTTL+e.spec.LockWait)
		switch {
		case errors.Is(err, locks.ErrNotAcquired):
			release()
			t.pass()
			if s.debugOn() {
				s.log.Debug("the lock of the schedule's other spec is held; fire skipped", "task", e.name, "fire", f.fire, "lock", k)
			}
			return nil, OutcomeLockHeld, nil
		case err != nil:
			release()
			t.pass()
			o, _ := s.notClaimed(err)
			return nil, o, fmt.Errorf("taking lock %q of the schedule's other spec: %w", k, err)
		}
		held = append(held, l)
	}
	if g != nil && !at.Before(g.end) {
		// No run of the old spec holds its lock now, and none can start:
		// this fire is the last that needs it.
		g.open.Store(true)
	}
	lease, o, err := s.lockOwn(f, t)
	if lease == nil {
		release()
		return nil, o, err
	}
	for _, l := range held {
		lease = newPairLease(lease, l)
	}
	return lease, "", nil
}

// A pairLease is a fire's own lease and the gate's, held together: its key
// and token are its own lease's, it ends when either does, and it extends
// and releases both.
type pairLease struct {
	locks.Lease
	old  locks.Lease
	done chan struct{}
}

func newPairLease(own, old locks.Lease) *pairLease {
	p := &pairLease{Lease: own, old: old, done: make(chan struct{})}
	go func() { // ends with either lease: the run releases both
		select {
		case <-own.Done():
		case <-old.Done():
		}
		close(p.done)
	}()
	return p
}

func (p *pairLease) Done() <-chan struct{} { return p.done }

func (p *pairLease) Extend(ctx context.Context, ttl time.Duration) error {
	return errors.Join(p.Lease.Extend(ctx, ttl), p.old.Extend(ctx, ttl))
}

func (p *pairLease) Release(ctx context.Context) error {
	return errors.Join(p.Lease.Release(ctx), p.old.Release(ctx))
}

// runLease is the lease a run sees (Run.Lease, locks.FromContext): the
// fire's own, whose token fences its writes, and which its driver's guards
// take.
func runLease(l locks.Lease) locks.Lease {
	for {
		p, ok := l.(*pairLease)
		if !ok {
			return l
		}
		l = p.Lease
	}
}
