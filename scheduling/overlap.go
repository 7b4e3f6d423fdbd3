package scheduling

import (
	"errors"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// The overlap policies ([Overlap]).
const (
	OverlapSkip           = "skip"            // a fire that finds a run going is skipped (the default)
	OverlapBufferOne      = "buffer-one"      // it runs once the run ends; at most one waits
	OverlapCancelPrevious = "cancel-previous" // it cancels the run going, then runs
	OverlapAllow          = "allow"           // it runs beside it, up to MaxConcurrent at once
)

// ErrSuperseded is the cause of the context of a run that a later fire of
// its task cancelled ([OverlapCancelPrevious]).
var ErrSuperseded = errors.New("scheduling: superseded by a later fire")

func validOverlap(p string) bool {
	switch p {
	case OverlapSkip, OverlapBufferOne, OverlapCancelPrevious, OverlapAllow:
		return true
	}
	return false
}

// buffers reports whether e's fires that find a run going wait for it.
func (e *entry) buffers() bool {
	return e.spec.Overlap == OverlapBufferOne || e.spec.Overlap == OverlapCancelPrevious
}

// full reports whether e has as many fires in flight on this node as it
// may: one, or MaxConcurrent with OverlapAllow.
func (e *entry) full() bool {
	if n := e.spec.MaxConcurrent; n > 0 {
		return e.inFlight.Load() >= int32(n)
	}
	return e.busy.Load()
}

// enter takes one of e's places in flight on this node: its single-flight
// flag, or one of MaxConcurrent with OverlapAllow. It reports false when
// none is free; leave gives the place back.
func (e *entry) enter() bool {
	if n := e.spec.MaxConcurrent; n > 0 {
		if e.inFlight.Add(1) > int32(n) {
			e.inFlight.Add(-1)
			return false
		}
		return true
	}
	return e.busy.CompareAndSwap(false, true)
}

func (e *entry) leave() {
	if e.spec.MaxConcurrent > 0 {
		e.inFlight.Add(-1)
		return
	}
	e.busy.Store(false)
}

// running reports whether a fire of e is in flight on this node.
func (e *entry) running() bool { return e.busy.Load() || e.inFlight.Load() > 0 }

// buffer leaves f, a scheduled or catch-up fire that this node claimed and
// that found a run of its task going, waiting in the task state
// ([taskstate.Store.LeaveWaiting]: a pending run of attempt 1), so that the
// node that holds the lock once that run ended runs it; with
// OverlapCancelPrevious it then cancels the runs of earlier fires going on
// this node at once (the other nodes do at their next poll). It reports
// false if another fire already waits, in the cluster, or a retry is
// pending: f is then skipped as OutcomeBufferFull, and cancels nothing.
func (s *Scheduler) buffer(f *firing) (bool, error) {
	r := taskstate.Retry{Fire: f.fire, Attempt: 1, Due: s.clock.Now()}
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, s.callBound(f.e))
	defer cancel()
	left, err := s.state.LeaveWaiting(ctx, f.e.name, r)
	if err != nil || !left {
		return false, err
	}
	s.mu.Lock()
	s.leftPending(f.e.name, r)
	s.mu.Unlock()
	if f.e.spec.Overlap == OverlapCancelPrevious {
		s.supersede(f.e, f.fire)
	}
	return true, nil
}

// supersede cancels the runs of e going on this node for fires before
// fire, with cause ErrSuperseded.
func (s *Scheduler) supersede(e *entry, fire time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.held {
		if h.e == e && h.fire.Before(fire) && h.cancel != nil && !h.superseded.Swap(true) {
			s.log.Info("cancelling the run of an earlier fire: a later one waits (overlap cancel-previous)", "task", e.name,
				"fire", h.fire, "by", fire, "token", h.lease.Token())
			h.cancel(fmt.Errorf("%w at %v", ErrSuperseded, fire.UTC()))
		}
	}
}

// supersedePolled cancels, for each task with OverlapCancelPrevious, the
// runs going on this node of fires before its pending run, as a poll read
// them. s.mu is held.
func (s *Scheduler) supersedePolled(polled map[string]taskstate.Retry) {
	for h := range s.held {
		r, ok := polled[h.e.name]
		if ok && h.e.spec.Overlap == OverlapCancelPrevious && h.fire.Before(r.Fire) && h.cancel != nil && !h.superseded.Swap(true) {
			s.log.Info("cancelling the run of an earlier fire: a later one waits (overlap cancel-previous)", "task", h.e.name,
				"fire", h.fire, "by", r.Fire, "token", h.lease.Token())
			h.cancel(fmt.Errorf("%w at %v", ErrSuperseded, r.Fire.UTC()))
		}
	}
}
