package scheduling

import (
	"fmt"
	"time"
)

// nextRunHorizon bounds how far past a task's next instant TaskInfo.Next
// looks for one that its calendars do not exclude.
const nextRunHorizon = 366 * 24 * time.Hour

// MaxNextFires bounds the instants [Scheduler.NextFires] previews.
const MaxNextFires = 1000

// A NextFire is an instant of a task's schedule to come, as
// [Scheduler.NextFires] previews it, with what the task's options do to it.
type NextFire struct {
	// Fire is the instant: the fire's identity, the same on every node.
	Fire time.Time `json:"fire"`
	// Start is when it is due to start: Fire, shifted by the task's Jitter.
	Start time.Time `json:"start"`
	// Skip says why no node will run it, "" if one will:
	// "excluded: calendar eu-holidays", or "beyond maxRuns" (of a task
	// whose runs are all taken by then).
	Skip string `json:"skip,omitempty"`
	// DST says what a change of the clocks does to it, "" if nothing:
	// the instant is the end of a spring-forward gap that skipped the
	// wall time the expression names (DST policy shift), or a wall time
	// that clocks fall back over, at its first or second occurrence.
	DST string `json:"dst,omitempty"`
}

// NextFires returns the next n instants (1 to [MaxNextFires]) of the task
// named name after now, as this node computes them (every node computes the
// same): within its bounds (none past its EndAt or its one-off instant), by
// the spec in force at each (a stored schedule's update to come included),
// each with its jittered start, its DST note and, for one that no node will
// run, why (a calendar excludes it, the task's runs are all taken). It
// needs no task state store; without one, no calendar is known.
func (s *Scheduler) NextFires(name string, n int) ([]NextFire, error) {
	if n < 1 || n > MaxNextFires {
		return nil, fmt.Errorf("scheduling: NextFires %q: n %d must be in [1, %d] (scheduling.MaxNextFires)", name, n, MaxNextFires)
	}
	s.mu.Lock()
	e := s.byName[name]
	s.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, name)
	}
	left := -1 // runs left; -1: no bound
	if e.runsTaken.Load() {
		left = 0
	}
	var out []NextFire
	for t := s.clock.Now(); len(out) < n; {
		s.mu.Lock()
		next := nextInForce(e, t)
		x := e.inForce(next)
		s.mu.Unlock()
		if next.IsZero() {
			break
		}
		t = next
		nf := NextFire{Fire: next, Start: next, DST: dstNote(x.sched, next)}
		if x.spec.Jitter > 0 {
			nf.Start = next.Add(jitterOffset(x.name, next, x.spec.Jitter))
		}
		switch cal := s.excludedBy(x, next); {
		case cal != "":
			nf.Skip = "excluded: calendar " + cal
		case left == 0:
			nf.Skip = "beyond maxRuns"
		case left > 0:
			left--
		}
		out = append(out, nf)
	}
	return out, nil
}

// dstNote says what a change of the clocks does to instant t of sched: ""
// for nothing.
func dstNote(sched schedule, t time.Time) string {
	if b, ok := sched.(boundedSchedule); ok {
		sched = b.schedule
	}
	w, ok := sched.(*wallSchedule)
	if !ok {
		return ""
	}
	lt := t.In(w.loc)
	for _, d := range []time.Duration{time.Hour, 30 * time.Minute, -time.Hour, -30 * time.Minute} {
		if o := t.Add(d).In(w.loc); sameWall(o, lt) {
			if d > 0 {
				return "the first of the two " + lt.Format("15:04") + " (clocks fall back)"
			}
			return "the second " + lt.Format("15:04") + " (clocks fell back; dst twice)"
		}
	}
	// The end of a gap, at which the expression names no wall time of its
	// own: a skipped one shifted here.
	if start, _ := lt.ZoneBounds(); start.Equal(t) {
		wall := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC)
		if !w.utc.Next(wall.Add(-time.Nanosecond)).Equal(wall) {
			return "shifted to " + lt.Format("15:04") + ": the wall time it names is skipped by clocks springing forward (dst shift)"
		}
	}
	return ""
}
