package scheduling

import (
	"fmt"
	"strings"
	"time"
)

// bounds are the instants a task may fire within: start inclusive, end
// exclusive; a zero bound is open.
type bounds struct{ start, end time.Time }

// wallLayouts are the wall-clock forms of an instant given without an
// offset: a date and time to the second or the minute, or a date alone
// (its midnight).
var wallLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// instantForms names the forms parseInstant reads, for errors.
const instantForms = "an RFC 3339 instant (2027-01-15T09:00:00Z, 2027-01-15T09:00:00+01:00), " +
	"a wall time (2027-01-15T09:00 or 2027-01-15T09:00:00) or a date (2027-01-15)"

// parseWall reads a wall time of wallLayouts and returns its fields as a
// time in UTC, which has no DST.
func parseWall(v string) (time.Time, bool) {
	for _, layout := range wallLayouts {
		if w, err := time.Parse(layout, v); err == nil {
			return w, true
		}
	}
	return time.Time{}, false
}

// parseInstant reads v as an RFC 3339 instant (seconds may be left out:
// 2027-01-15T09:00Z), or as a wall time or a date in loc (nil: time.Local).
// A wall time that clocks fall back over is its first occurrence; one that
// a spring-forward gap skips, and a date whose midnight a gap skips, is the
// first instant after the gap, as under the DST policy "once,shift"
// (wallInstant: time.Date leaves both choices unspecified, and in zones
// west of UTC moves a skipped time back before the gap: 02:30 in New York
// on a spring-forward day is 01:30 EST). rfc reports an RFC 3339 form,
// which carries its own offset.
func parseInstant(v string, loc *time.Location) (t time.Time, rfc bool, err error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true, nil
		}
	}
	w, ok := parseWall(v)
	if !ok {
		return time.Time{}, false, fmt.Errorf("%q must be %s", v, instantForms)
	}
	if loc == nil {
		loc = time.Local
	}
	return wallInstant(w, loc), false, nil
}

// parseBound reads a startAt / endAt value: an RFC 3339 instant
// ("2027-01-15T09:00:00Z" or with an offset), a wall time
// "2027-01-15T09:00" or "2027-01-15T09:00:00" in loc, or a date
// "2027-01-15" (that day's start in loc). A wall time in a DST change is
// read as parseInstant says. Errors name field, value and rule.
func parseBound(field, v string, loc *time.Location) (time.Time, error) {
	t, _, err := parseInstant(strings.TrimSpace(v), loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: must be %s", field, v, instantForms)
	}
	return t, nil
}

// atSchedule fires once, at at.
type atSchedule struct{ at time.Time }

// Next returns at if t is before it, else the zero time.
func (a atSchedule) Next(t time.Time) time.Time {
	if t.Before(a.at) {
		return a.at
	}
	return time.Time{}
}

// parseAt reads the argument of "@at": an instant as parseInstant reads it
// and, after a wall time or a date, an optional zone name (default loc).
func parseAt(arg string, loc *time.Location) (schedule, error) {
	arg = strings.TrimSpace(arg)
	f := strings.Fields(arg)
	if len(f) == 0 || len(f) > 2 {
		return nil, fmt.Errorf("@at %q: needs an instant and an optional zone, such as @at 2027-01-15T09:00:00 Europe/Paris; the instant must be %s", arg, instantForms)
	}
	if len(f) == 2 {
		zone, err := time.LoadLocation(f[1])
		if err != nil {
			return nil, fmt.Errorf("@at %q: zone %q must be an IANA zone name such as Europe/Paris: %w", arg, f[1], err)
		}
		loc = zone
	}
	t, rfc, err := parseInstant(f[0], loc)
	switch {
	case err != nil:
		return nil, fmt.Errorf("@at %q: the instant %w", arg, err)
	case rfc && len(f) == 2:
		return nil, fmt.Errorf("@at %q: an instant with an offset (%s) takes no zone", arg, f[0])
	}
	return atSchedule{at: t}, nil
}

// nextRun returns the first instant after t at which s fires within b and
// that cs does not exclude in loc; zero if there is none before t+horizon
// (or b.end if sooner). An excluded span is skipped at once: the search
// resumes at its until, so that a schedule of every second excluded for a
// week costs a few calls, not a fire each.
func nextRun(s schedule, cs calendarSet, b bounds, loc *time.Location, t time.Time, horizon time.Duration) time.Time {
	limit := t.Add(horizon)
	if !b.end.IsZero() && b.end.Before(limit) {
		limit = b.end
	}
	from := t
	if b.start.After(t) {
		from = b.start.Add(-time.Nanosecond) // start is included
	}
	for {
		next := s.Next(from)
		if next.IsZero() || !next.Before(limit) {
			return time.Time{}
		}
		name, until := cs.excludedBy(next, loc)
		if name == "" {
			return next
		}
		from = next
		if u := until.Add(-time.Nanosecond); u.After(from) {
			from = u
		}
	}
}
