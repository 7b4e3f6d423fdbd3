package scheduling

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// MaxMaxRuns bounds the MaxRuns option.
const MaxMaxRuns = 1<<31 - 1

// exprZone returns the zone of a task's wall-clock rules (its calendars,
// the dates of its bounds): its expression's CRON_TZ= or TZ= prefix, else
// loc, the scheduler's (nil: time.Local).
func exprZone(expr string, loc *time.Location) *time.Location {
	body := strings.TrimSpace(expr)
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(body, p); ok {
			name, _, _ := strings.Cut(rest, " ")
			if z, err := time.LoadLocation(strings.TrimSpace(name)); err == nil {
				return z
			}
		}
	}
	if loc == nil {
		return time.Local
	}
	return loc
}

// taskBounds returns the bounds of spec s, its dates read in zone.
func taskBounds(s *Spec, zone *time.Location) (bounds, error) {
	var b bounds
	var err error
	if s.StartAt != "" {
		if b.start, err = parseBound("startAt", s.StartAt, zone); err != nil {
			return b, err
		}
	}
	if s.EndAt != "" {
		if b.end, err = parseBound("endAt", s.EndAt, zone); err != nil {
			return b, err
		}
	}
	return b, nil
}

// A boundedSchedule is a task's schedule within its bounds: no instant
// before start, none at or after end.
type boundedSchedule struct {
	schedule
	b bounds
}

// Next returns the first instant of the schedule after t within the bounds.
func (s boundedSchedule) Next(t time.Time) time.Time {
	if !s.b.start.IsZero() && t.Before(s.b.start) {
		t = s.b.start.Add(-time.Nanosecond) // start is included
	}
	n := s.schedule.Next(t)
	if n.IsZero() || (!s.b.end.IsZero() && !n.Before(s.b.end)) {
		return time.Time{}
	}
	return n
}

// taskSchedule returns t's schedule: its expression parsed for it (its H
// items resolved, its DST policy applied) within its bounds.
func (c *parseCache) taskSchedule(t Task) (schedule, error) {
	spec := t.Spec()
	sched, err := c.parseFor(t.decl.Cron, t.Name(), spec.DST)
	if err != nil || (spec.StartAt == "" && spec.EndAt == "") {
		return sched, err
	}
	b, err := taskBounds(&spec, exprZone(t.decl.Cron, c.loc))
	if err != nil {
		return nil, err
	}
	return boundedSchedule{sched, b}, nil
}

// vocabularyProblems returns the problems of the options of d that bound a
// task or skip its fires: calendar, startAt, endAt, maxRuns and
// pauseAfterFailures.
func vocabularyProblems(d declared, unread map[string]bool, r lockRules, loc *time.Location) []Problem {
	var ps []Problem
	needState := func(option, value, why string) {
		if !r.state {
			ps = append(ps, Problem{Option: option, Value: value, Rule: "needs a task state store (Config.State; scheduling.Module " +
				"takes it from the graph): " + why})
		}
	}
	if c := d.Calendars; c != nil && !unread["calendar"] {
		names := calendarNames(*c)
		if len(names) == 0 {
			ps = append(ps, Problem{Option: "calendar", Value: *c, Rule: "must name a calendar or more, separated by commas"})
		}
		for _, n := range names {
			if err := taskstate.CheckCalendar(taskstate.Calendar{Name: n}); err != nil {
				ps = append(ps, Problem{Option: "calendar", Value: *c, Rule: fmt.Sprintf("must name calendars of 1 to %d printable bytes each, "+
					"separated by commas: %q is not one", taskstate.MaxScheduleNameLen, n)})
				break
			}
		}
		needState("calendar", *c, "the calendars are kept there, shared by the cluster")
	}
	zone := exprZone(d.Cron, loc)
	var start, end time.Time
	for _, f := range []struct {
		option string
		v      *string
		t      *time.Time
	}{{"startAt", d.StartAt, &start}, {"endAt", d.EndAt, &end}} {
		if f.v == nil || unread[f.option] {
			continue
		}
		t, _, err := parseInstant(strings.TrimSpace(*f.v), zone)
		if err != nil {
			ps = append(ps, Problem{Option: f.option, Value: *f.v, Rule: "must be " + instantForms})
			continue
		}
		*f.t = t
	}
	if !start.IsZero() && !end.IsZero() && !start.Before(end) {
		ps = append(ps, Problem{Option: "endAt", Value: *d.EndAt, Rule: fmt.Sprintf("must be after startAt (%s): the task would never fire",
			start.Format(time.RFC3339))})
	}
	if n := d.MaxRuns; n != nil && !unread["maxRuns"] {
		v := strconv.Itoa(*n)
		switch {
		case *n <= 0:
			ps = append(ps, Problem{Option: "maxRuns", Value: v, Rule: "must be positive"})
		case *n > MaxMaxRuns:
			ps = append(ps, Problem{Option: "maxRuns", Value: v, Rule: fmt.Sprintf("must not exceed %d (scheduling.MaxMaxRuns)", MaxMaxRuns)})
		case d.Lock == nil && !unread["lock"]:
			ps = append(ps, Problem{Option: "maxRuns", Value: v, Rule: "needs lock: each run takes one of the runs in the claim " +
				"that makes it run once in the cluster, and only a locked task's fires are claimed"})
		default:
			needState("maxRuns", v, "the runs are counted there, whatever nodes die")
		}
	}
	if n := d.PauseAfter; n != nil && !unread["pauseAfterFailures"] {
		v := strconv.Itoa(*n)
		switch {
		case *n <= 0:
			ps = append(ps, Problem{Option: "pauseAfterFailures", Value: v, Rule: "must be positive"})
		case *n > taskstate.MaxHistory:
			ps = append(ps, Problem{Option: "pauseAfterFailures", Value: v, Rule: fmt.Sprintf("must not exceed %d (taskstate.MaxHistory): "+
				"the failures in a row are read from the task's history", taskstate.MaxHistory)})
		default:
			needState("pauseAfterFailures", v, "the failures in a row are read from the history the nodes share, and the pause is kept there")
		}
	}
	return ps
}
