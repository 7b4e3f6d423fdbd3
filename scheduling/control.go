package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// DefaultRequestPoll is how often a scheduler looks for manual-run requests
// when [Config.RequestPoll] is zero.
const DefaultRequestPoll = time.Second

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
// until [Scheduler.Resume], whatever node restarts meanwhile. This node
// skips from its next fire; the others from their next poll
// ([Config.RequestPoll]), where they learn that some task's flag changed
// (nodes keep the flags they read, see [PauseFlagAge]). A run in
// flight goes on. [Scheduler.RunNow] still runs a paused task. The pause
// keeps what opts say of it ([WithNote], [By]), shown with the task
// ([TaskInfo].PauseNote); a note or name that [taskstate.CheckPause]
// refuses is an error wrapping taskstate.ErrInvalid, and nothing changes.
func (s *Scheduler) Pause(ctx context.Context, name string, opts ...ControlOption) error {
	return s.setPaused(ctx, name, true, opts)
}

// Resume ends a pause: the task's next fire runs on every node (on the
// others, from their next poll, as for Pause). It keeps what opts say of
// it, as Pause does.
func (s *Scheduler) Resume(ctx context.Context, name string, opts ...ControlOption) error {
	return s.setPaused(ctx, name, false, opts)
}

func (s *Scheduler) setPaused(ctx context.Context, name string, paused bool, opts []ControlOption) error {
	e, err := s.lookup(name)
	if err != nil {
		return err
	}
	action := "resume"
	if paused {
		action = "pause"
	}
	c := controlOf(opts)
	p := taskstate.Pause{Paused: paused, At: s.clock.Now(), Note: c.note, By: c.by}
	if err := taskstate.CheckPause(e.name, p); err != nil {
		return err
	}
	ev, err := s.event(ctx, opts, action, e.name)
	if err != nil {
		return err
	}
	// What it replaces is the trail's previous pause or resume of the task.
	return s.act(ctx, ev, nil, p, func(kept taskstate.Event, again bool) error {
		if again {
			// The pause first asked, unless it or a later one is set.
			if err := json.Unmarshal([]byte(kept.After), &p); err != nil {
				return fmt.Errorf("scheduling: %s %s: the trail's entry %d: %w", action, e.name, kept.Seq, err)
			}
			if cur, err := s.state.Paused(ctx, e.name); err != nil {
				return err
			} else if cur.At.After(p.At) || (cur.Paused == p.Paused && cur.At.Equal(p.At) && cur.By == p.By && cur.Note == p.Note) {
				return nil
			}
		}
		err := s.state.SetPaused(ctx, e.name, p)
		s.pauses.forget(true) // this node sees its own change at its next fire
		return err
	})
}

// RunNow asks for one run of the task named name, as soon as one node of
// the cluster can: the nodes look for requests every [Config.RequestPoll]
// (this node at once), and the first to hold the task's lock takes the
// request and runs it under that lease, with its fencing token, as a fire
// whose [Run].Manual is set; the others find it taken. Requests made while
// one is pending are merged into it. A paused task runs too. An unlocked
// task runs on the node that takes the request from the store.
func (s *Scheduler) RunNow(ctx context.Context, name string, opts ...ControlOption) error {
	e, err := s.lookup(name)
	if err != nil {
		return err
	}
	ev, err := s.event(ctx, opts, "run", e.name)
	if err != nil {
		return err
	}
	at := s.clock.Now().UTC()
	return s.act(ctx, ev, nil, map[string]time.Time{"requested": at}, func(kept taskstate.Event, again bool) error {
		if again {
			var req map[string]time.Time
			if err := json.Unmarshal([]byte(kept.After), &req); err != nil {
				return fmt.Errorf("scheduling: run %s: the trail's entry %d: %w", e.name, kept.Seq, err)
			}
			at = req["requested"]
			if asked, err := s.runAsked(ctx, e.name, at); err != nil || asked {
				return err
			}
		}
		if err := s.state.RequestRun(ctx, e.name, at); err != nil {
			return err
		}
		s.mu.Lock()
		if s.status == started {
			s.nextPoll = s.clock.Now()
			s.nudge()
		}
		s.mu.Unlock()
		return nil
	})
}

// runAsked reports whether a manual run of task asked at at was asked in
// the store: a request pending, or a manual run recorded at or after it
// (a request merges into one pending, and a run takes the request). A run
// taken and still going is not known yet: a retry then asks another.
func (s *Scheduler) runAsked(ctx context.Context, task string, at time.Time) (bool, error) {
	p, err := s.state.Poll(ctx)
	if err != nil {
		return false, err
	}
	if _, ok := p.Requests[task]; ok {
		return true, nil
	}
	runs, err := s.state.Runs(ctx, task, 0)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(runs, func(r taskstate.Run) bool { return r.Manual && !r.Fire.Before(at) }), nil
}

// History returns the last recorded fires of the task named name on every
// node that shares the scheduler's task state, newest first: its runs, and
// the fires that did not run for a reason the cluster must see (see
// [Scheduler.Audit] for the others).
func (s *Scheduler) History(ctx context.Context, name string) ([]taskstate.Run, error) {
	e, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return s.state.Runs(ctx, e.name, 0)
}

// RecentFires is how many of each task's newest records
// [Scheduler.ClusterTasks] reads.
const RecentFires = 20

// ClusterTasks returns [Scheduler.Tasks] with each task's paused flag, the
// note of its last pause or resume ([TaskInfo].PauseNote), its newest
// fires recorded on any node (at most RecentFires) and its health
// ([Scheduler.Health]), read from the task state: two reads per task, the
// flag with its note and the history.
// Without a task state store it is Tasks, each task's health unknown.
func (s *Scheduler) ClusterTasks(ctx context.Context) ([]TaskInfo, error) {
	infos := s.Tasks()
	if s.state == nil {
		for i := range infos {
			infos[i].Health.Reason = "no task state store: the health is read from the history the nodes share"
		}
		return infos, nil
	}
	for i := range infos {
		ti := &infos[i]
		pause, err := s.state.Paused(ctx, ti.Name)
		if err != nil {
			return nil, err
		}
		// The whole history, for the health; the newest of it, for the
		// recent fires.
		all, err := s.state.Runs(ctx, ti.Name, 0)
		if err != nil {
			return nil, err
		}
		ti.Paused, ti.PauseNote = pause.Paused, pause
		if e, err := s.lookup(ti.Name); err == nil { // not removed since Tasks
			ti.Health = s.health(e, all, pause)
		}
		runs := slices.Clone(all[:min(len(all), RecentFires)])
		if len(runs) > 0 {
			// By fire, not by when each was recorded: a node's records of
			// an outage land after the runs that followed it.
			slices.SortStableFunc(runs, func(a, b taskstate.Run) int { return b.Fire.Compare(a.Fire) })
			ti.ClusterLast, ti.ClusterRecent = &runs[0], runs
		}
	}
	return infos, nil
}

// pollRequests is one look for manual-run requests, counted as a fire in
// flight so that Stop and the test kit wait for it.
func (s *Scheduler) pollRequests() {
	defer s.land()
	s.startRequested()
}

// startRequested reads the pending requests and retries and the pause
// generation (one call), and starts a manual fire for each of this
// scheduler's tasks among the requests, and a retry for each pending retry
// that is due.
func (s *Scheduler) startRequested() {
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, storeTimeout)
	defer cancel()
	p, err := s.state.Poll(ctx)
	if err != nil {
		s.pauses.forget(false)
		// Once per outage at Warn: the look comes back every second.
		if !s.stopping() && !s.pollFailing.Swap(true) {
			s.log.Warn("reading manual-run requests failed; retrying every poll", "err", err)
		}
		return
	}
	s.pauses.polled(p.Pauses)
	if s.pollFailing.Swap(false) {
		s.log.Info("reading manual-run requests works again")
	}
	s.flush() // the records that the store refused while it was down
	if s.staleSchedules(p.Schedules) {
		if err := s.readSchedules(ctx, p.Schedules); err != nil {
			if !s.stopping() && !s.schedFailing.Swap(true) {
				s.log.Warn("reading the stored schedules failed; retrying every poll", "err", err)
			}
		} else if s.schedFailing.Swap(false) {
			s.log.Info("reading the stored schedules works again")
		}
	}

	reqs := p.Requests
	var done []*entry
	s.mu.Lock()
	for task, n := range p.Runs {
		if e := s.byName[task]; e != nil && e.spec.MaxRuns > 0 && n >= e.spec.MaxRuns && !e.runsTaken.Load() {
			done = append(done, e)
		}
	}
	due := s.dueRetries(p.Retries, s.clock.Now())
	s.supersedePolled(p.Retries)
	var drive []driven
	var gone []taskstate.Backfill
	if !s.stopping() {
		drive, gone = s.polledBackfills(p.Backfills, p.Schedules)
	}
	s.mu.Unlock()
	for _, b := range gone {
		s.cancelDeleted(b.Task, b)
	}
	for _, e := range done {
		s.complete(e) // another node took the last run
	}
	for _, d := range drive {
		go s.drive(d.e, d.b)
	}
	if (len(reqs) == 0 && len(due) == 0) || s.stopping() {
		return
	}
	s.mu.Lock()
	for _, e := range s.entries {
		if at, ok := reqs[e.name]; ok && !e.full() {
			due = append(due, firing{e: e, fire: at, kind: kindManual})
		}
	}
	s.mu.Unlock()
	if len(due) == 0 {
		return
	}
	s.takeoff(len(due))
	for _, f := range due {
		go s.fire(f, nil)
	}
}

// catchUps returns the fire each of entries with a catch-up window missed: its
// most recent scheduled instant within the window before now. The fire
// then goes through the lock and the claim as any other, so that it runs on
// one node, and only if no node claimed it. s.mu is held.

func (s *Scheduler) catchUps(now time.Time, entries []*entry) []firing {
	var out []firing
	for _, e := range entries {
		if e.spec.CatchUp <= 0 {
			continue
		}
		// The last instant is of the spec in force at it: of a stored
		// schedule's update not in force yet, the spec it replaces.
		if _, p := lastFireInForce(e, now, e.spec.CatchUp); !p.IsZero() {
			s.log.Info("catching up the last fire if it ran nowhere", "task", e.name, "fire", p, "window", e.spec.CatchUp)
			out = append(out, alsoLock(e, p, kindCatchUp))
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
