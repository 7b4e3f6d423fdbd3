package scheduling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// DefaultRequestPoll is how often a scheduler looks for manual-run requests
// when [Config.RequestPoll] is zero.
const DefaultRequestPoll = time.Second

// recordTimeout bounds the write of a run to the shared history, which
// happens after the task returned and before its lease is released.
const recordTimeout = 5 * time.Second

// ErrUnknownTask reports a task name that the scheduler does not have; the
// wrapping error names it.
var ErrUnknownTask = errors.New("scheduling: unknown task")

// ErrNoState reports a control call on a scheduler without a task state
// store ([Config.State]).
var ErrNoState = errors.New("scheduling: no task state store")

// lookup returns the task named name, or an error wrapping ErrUnknownTask
// or ErrNoState.
func (s *Scheduler) lookup(name string) (*entry, error) {
	s.mu.Lock()
	e := s.byName[name]
	s.mu.Unlock()
	switch {
	case e == nil:
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, name)
	case s.state == nil:
		return nil, fmt.Errorf("%w: task %q cannot be paused, run by hand or listed cluster-wide: "+
			"give the scheduler a taskstate.Store (Config.State; scheduling.Module takes it from the graph)", ErrNoState, name)
	}
	return e, nil
}

// Pause pauses the task named name on every node that shares the
// scheduler's task state: their fires of it are skipped with OutcomePaused
// until [Scheduler.Resume], whatever node restarts meanwhile. A run in
// flight goes on. [Scheduler.RunNow] still runs a paused task.
func (s *Scheduler) Pause(ctx context.Context, name string) error {
	return s.setPaused(ctx, name, true)
}

// Resume ends a pause: the task's next fire runs on every node.
func (s *Scheduler) Resume(ctx context.Context, name string) error {
	return s.setPaused(ctx, name, false)
}

func (s *Scheduler) setPaused(ctx context.Context, name string, paused bool) error {
	e, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.state.SetPaused(ctx, e.name, paused)
}

// RunNow asks for one run of the task named name, as soon as one node of
// the cluster can: the nodes look for requests every [Config.RequestPoll]
// (this node at once), and the first to hold the task's lock takes the
// request and runs it under that lease, with its fencing token, as a fire
// whose [Run].Manual is set; the others find it taken. Requests made while
// one is pending are merged into it. A paused task runs too. An unlocked
// task runs on the node that takes the request from the store.
func (s *Scheduler) RunNow(ctx context.Context, name string) error {
	e, err := s.lookup(name)
	if err != nil {
		return err
	}
	if err := s.state.RequestRun(ctx, e.name, s.clock.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	if s.status == started {
		s.nextPoll = s.clock.Now()
		s.nudge()
	}
	s.mu.Unlock()
	return nil
}

// History returns the last runs of the task named name on every node that
// shares the scheduler's task state, newest first.
func (s *Scheduler) History(ctx context.Context, name string) ([]taskstate.Run, error) {
	e, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return s.state.Runs(ctx, e.name, 0)
}

// ClusterTasks returns [Scheduler.Tasks] with each task's paused flag and
// last run on any node read from the task state (two reads per task).
// Without a task state store it is Tasks.
func (s *Scheduler) ClusterTasks(ctx context.Context) ([]TaskInfo, error) {
	infos := s.Tasks()
	if s.state == nil {
		return infos, nil
	}
	for i := range infos {
		ti := &infos[i]
		paused, err := s.state.Paused(ctx, ti.Name)
		if err != nil {
			return nil, err
		}
		runs, err := s.state.Runs(ctx, ti.Name, 1)
		if err != nil {
			return nil, err
		}
		ti.Paused = paused
		if len(runs) > 0 {
			ti.ClusterLast = &runs[0]
		}
	}
	return infos, nil
}

// skipPaused skips f if its task is paused, and reports whether it did. A
// failure to read the flag fails the fire as a lock failure would: the store
// is as unreachable as the lock most likely is, and a paused task must not
// run because the flag could not be read.
//
//go:noinline
func (s *Scheduler) skipPaused(f firing, t *turn) bool {
	ctx, cancel := context.WithTimeout(s.acquireCtx, recordTimeout)
	defer cancel()
	paused, err := s.state.Paused(ctx, f.e.name)
	switch {
	case err != nil && s.stopping():
		s.skipTurn(f, t, notRecorded, nil)
	case err != nil:
		s.skipTurn(f, t, OutcomeLockFailed, fmt.Errorf("reading whether the task is paused: %w", err))
	case paused:
		s.skipTurn(f, t, OutcomePaused, nil)
	default:
		return false
	}
	return true
}

// recordShared adds a run to the history the nodes share; a failure is
// logged, the run having happened whatever its record says.
//
//go:noinline
func (s *Scheduler) recordShared(e *entry, last *LastRun) {
	r := taskstate.Run{Fire: last.Fire, Manual: last.Manual, Node: last.Node, Token: last.Token, Start: last.Start,
		Duration: last.Duration, Outcome: string(last.Outcome)}
	if last.Err != nil {
		r.Error = last.Err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := s.state.Record(ctx, e.name, r); err != nil {
		s.log.Warn("run not recorded in the shared history", "task", e.name, "fire", last.Fire, "err", err)
	}
}

// pollRequests is one look for manual-run requests, counted as a fire in
// flight so that Stop and the test kit wait for it.
func (s *Scheduler) pollRequests() {
	defer s.land()
	s.startRequested()
}

// startRequested reads the pending requests and starts a manual fire for
// each of this scheduler's tasks among them.
func (s *Scheduler) startRequested() {
	ctx, cancel := context.WithTimeout(s.acquireCtx, recordTimeout)
	defer cancel()
	reqs, err := s.state.Requests(ctx)
	if err != nil {
		// Once per outage at Warn: the look comes back every second.
		if !s.stopping() && !s.pollFailing.Swap(true) {
			s.log.Warn("reading manual-run requests failed; retrying every poll", "err", err)
		}
		return
	}
	if s.pollFailing.Swap(false) {
		s.log.Info("reading manual-run requests works again")
	}
	if len(reqs) == 0 || s.stopping() {
		return
	}
	var due []firing
	s.mu.Lock()
	for _, e := range s.entries {
		if at, ok := reqs[e.name]; ok && !e.busy.Load() {
			due = append(due, firing{e: e, fire: at, manual: true})
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	s.takeoff(len(due))
	for _, f := range due {
		go s.fireManual(f)
	}
}

// fireManual owns one manual fire on this node: it takes the task's lease
// (if locked), then the request, so that of the nodes that saw the request
// only the lease's holder can take it, and runs the task once. A node that
// finds the lock held leaves the request for a later poll.
func (s *Scheduler) fireManual(f firing) {
	defer s.land()
	e := f.e
	if !e.busy.CompareAndSwap(false, true) {
		return // a fire of the task is in flight here: a later poll tries again
	}
	defer e.busy.Store(false)
	if e.spec.Lock == "" {
		if s.takeRequest(&f) {
			s.runUnlocked(f)
		}
		return
	}
	if s.claims == nil {
		return // Add refuses such tasks
	}
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, e.spec.LockTTL)
	lease, err := s.driver.Acquire(ctx, e.spec.Lock, e.spec.LockTTL)
	cancel()
	if err != nil {
		if !errors.Is(err, locks.ErrNotAcquired) && !s.stopping() {
			s.log.Warn("lock failed for a manual run; it stays requested", "task", e.name, "lock", e.spec.Lock, "err", err)
		}
		return
	}
	if !s.takeRequest(&f) {
		rctx, rcancel := withTimeout(context.Background(), s.clock, e.spec.LockTTL)
		s.releaseLease(e, lease, rctx)
		rcancel()
		return
	}
	s.log.Info("manual run", "task", e.name, "requested", f.fire, "lock", e.spec.Lock, "token", lease.Token())
	s.runLocked(f, lease)
}

// takeRequest takes f's task's request from the store and sets f.fire to
// the instant it was made; false if another node took it first.
func (s *Scheduler) takeRequest(f *firing) bool {
	ctx, cancel := context.WithTimeout(s.acquireCtx, recordTimeout)
	defer cancel()
	at, ok, err := s.state.TakeRequest(ctx, f.e.name, s.node)
	if err != nil {
		if !s.stopping() {
			s.log.Warn("taking a manual-run request failed", "task", f.e.name, "err", err)
		}
		return false
	}
	if ok {
		f.fire = at
	}
	return ok
}

// runUnlocked runs an unlocked fire.
func (s *Scheduler) runUnlocked(f firing) {
	if f.manual {
		s.log.Info("manual run", "task", f.e.name, "requested", f.fire)
	}
	if s.observed {
		s.executeObserved(s.runCtx, f, nil, nil)
	} else {
		s.execute(s.runCtx, f, nil, nil)
	}
}

// catchUps returns the fire each task with a catch-up window missed: its
// most recent scheduled instant within the window before now. The fire
// then goes through the lock and the claim as any other, so that it runs on
// one node, and only if no node claimed it. s.mu is held.
func (s *Scheduler) catchUps(now time.Time) []firing {
	var out []firing
	for _, e := range s.entries {
		if e.spec.CatchUp <= 0 {
			continue
		}
		if p := lastFireWithin(e.sched, now, e.spec.CatchUp); !p.IsZero() {
			s.log.Info("catching up the last fire if it ran nowhere", "task", e.name, "fire", p, "window", e.spec.CatchUp)
			out = append(out, firing{e: e, fire: p})
		}
	}
	return out
}

// lastFireWithin returns the latest instant of sched in [now-window, now],
// zero if none.
func lastFireWithin(sched schedule, now time.Time, window time.Duration) time.Time {
	var last time.Time
	// A second-by-second schedule over MaxCatchUp takes 43,200 steps; the
	// bound only guards against a schedule that does not advance.
	for t, i := now.Add(-window-time.Nanosecond), 0; i < 1_000_000; i++ {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		last, t = n, n
	}
	return last
}
