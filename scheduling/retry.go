package scheduling

import (
	"strconv"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// MaxRetries is the most retries of one fire that [Retry] may ask for.
const MaxRetries = 100

// DefaultRetryBackoff is the backoff before a first retry when
// [RetryBackoff] is not set.
const DefaultRetryBackoff = 10 * time.Second

// MaxRetryBackoff is the longest [RetryBackoff] and [RetryMaxBackoff].
const MaxRetryBackoff = 24 * time.Hour

// retryDelay is the backoff before attempt k+1 of the fire of task name at
// fire: full jitter, an offset in [0, min(backoff·2^(k-1), cap)) that a
// hash of the name, the fire and the attempt picks.
func retryDelay(name string, fire time.Time, k int, backoff, cap time.Duration) time.Duration {
	window := cap
	if k-1 < 62 && backoff <= cap>>(k-1) { // backoff·2^(k-1) ≤ cap, without overflow
		window = backoff << (k - 1)
	}
	return jitterOffset(name+"#"+strconv.Itoa(k), fire, window)
}

// nextRetry returns the retry that f's failed run leaves, and notes it in
// last and in this node's view of pending retries; nil when the task does
// not retry or f was its last attempt.
func (s *Scheduler) nextRetry(f *firing, last *LastRun) *taskstate.Retry {
	e := f.e
	k := f.attempt()
	if e.spec.Retries == 0 || k > e.spec.Retries || s.state == nil || e.spec.Lock == "" || f.kind == kindBackfill {
		return nil
	}
	d := retryDelay(e.name, f.fire, k, e.spec.RetryBackoff, e.spec.RetryMaxBackoff)
	r := &taskstate.Retry{Fire: f.fire, Manual: f.manual(), Attempt: k + 1, Due: s.clock.Now().Add(d)}
	last.RetryAt = r.Due
	s.mu.Lock()
	s.leftPending(e.name, *r)
	s.mu.Unlock()
	s.log.Warn("run failed; retry pending", "task", e.name, "fire", f.fire, "attempt", r.Attempt, "of", e.spec.Retries+1,
		"due", r.Due, "backoff", d)
	return r
}

// retryPending returns the pending run of an earlier fire of e than fire
// that this node knows of (from its last poll, or one it left since): a
// retry, or a fire waiting for the run going (attempt 1).
func (s *Scheduler) retryPending(e *entry, fire time.Time) (taskstate.Retry, bool) {
	if e.spec.Retries == 0 && !e.buffers() {
		return taskstate.Retry{}, false
	}
	s.mu.Lock()
	r, ok := s.retries[e.name]
	s.mu.Unlock()
	return r, ok && r.Fire.Before(fire)
}

// anyPending reports whether this node knows of a pending run of e, of
// any fire.
func (s *Scheduler) anyPending(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.retries[e.name]
	return ok
}

// retryTaken forgets r, which this node took.
func (s *Scheduler) retryTaken(e *entry, r taskstate.Retry) {
	s.mu.Lock()
	if p, ok := s.retries[e.name]; ok && p.Fire.Equal(r.Fire) && p.Attempt == r.Attempt {
		delete(s.retries, e.name)
	}
	s.mu.Unlock()
}

// leftPending notes r, a pending run that this node's record leaves for
// task, in its view of the pending runs. s.mu is held.
func (s *Scheduler) leftPending(task string, r taskstate.Retry) {
	s.retries[task] = r
	s.left[task] = s.clock.Now()
}

// dueRetries replaces this node's view of the pending retries with those a
// poll read, and returns the fires of the ones due by now. A pending run
// that this node left within the last two polls and that the poll does not
// show stays in the view: its record may not have reached the store when
// the poll read it. s.mu is held.
func (s *Scheduler) dueRetries(polled map[string]taskstate.Retry, now time.Time) []firing {
	for name, r := range s.retries {
		if at, ok := s.left[name]; ok && now.Sub(at) < 2*s.poll {
			if p, ok := polled[name]; !ok || taskstate.RetryLater(r, p) {
				if polled == nil {
					polled = map[string]taskstate.Retry{}
				}
				polled[name] = r
			}
		}
	}
	for name, at := range s.left {
		if now.Sub(at) >= 2*s.poll {
			delete(s.left, name)
		}
	}
	clear(s.retries)
	var due []firing
	for name, r := range polled {
		cur := s.byName[name]
		if cur == nil {
			continue // another build's task
		}
		f := alsoLock(cur, r.Fire, kindRetry) // the spec of the fire's instant
		f.retry = r
		if orphaned(f.e, r.Fire, r.Manual) {
			// Of a stored schedule deleted since, and created again, or
			// not an instant of the spec in force at it: the first node
			// to see it takes it, and runs nothing.
			f.orphan = true
			due = append(due, f)
			continue
		}
		if e := f.e; e.spec.Retries == 0 && !e.buffers() {
			continue // one that no longer retries or waits here
		}
		s.retries[name] = r
		if !r.Due.After(now) && !f.e.full() {
			due = append(due, f)
		}
	}
	return due
}

// orphaned reports whether fire, a retry's or waiting fire's instant of
// e's stored schedule (not a manual run's), e being the spec in force at
// it, is no instant of e: of a
// stored schedule of the same name that was deleted (before the creation
// of e's; e is the oldest spec this node knows of the schedule, and one
// that replaced another, the node's list of them cut, says nothing of the
// creation), or of a spec that a node ran after an update had replaced it
// at that instant, as it had not read the update yet (the simulation's
// seed 15977122186169711341 history 207: a waiting fire of the old spec,
// left by a node that had not read the update, ran by the new one).
func orphaned(e *entry, fire time.Time, manual bool) bool {
	if sc := e.stored; sc != nil && e.prior == nil && len(sc.Replaced) == 0 && sc.Updated.Equal(sc.From) && fire.Before(sc.From) {
		return true
	}
	// A manual run's fire is its request's time; a task declared in code
	// may have another cron on the nodes of another build.
	return e.stored != nil && !manual && !e.sched.Next(fire.Add(-time.Nanosecond)).Equal(fire)
}

// dropOrphan takes f, a retry or waiting fire of an instant that is not
// the task's (orphaned), from the store, so that it never runs: the taken
// placeholder stays in the history.
func (s *Scheduler) dropOrphan(f firing) {
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, storeTimeout)
	defer cancel()
	ok, err := s.state.TakeRetry(ctx, f.e.name, s.node, f.retry)
	switch {
	case err != nil:
		if !s.stopping() {
			s.log.Warn("dropping a pending run of an instant not the task's failed; the next poll tries again", "task", f.e.name, "fire", f.fire, "err", err)
		}
	case ok:
		s.retryTaken(f.e, f.retry)
		s.log.Info("a pending run dropped: its instant is not the task's (its schedule was deleted, or changed before it)", "task", f.e.name, "fire", f.fire, "attempt", f.retry.Attempt)
	}
}
