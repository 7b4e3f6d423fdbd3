package scheduling

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/ndigo/ndigo/taskstate"
)

// calendarRules are a calendar's exclusions, compiled (compileCalendar).
//
// Every rule reads the wall clock of the instant it judges, in the zone of
// the task: a date or a weekday excludes the instants whose wall clock reads
// that day, from its midnight to the next one (23 or 25 hours on a day of a
// DST change); a window the instants whose wall clock reads a time within
// it, start included, end excluded; a cron rule the instants whose wall
// clock reads a minute that it matches. So a boundary that a spring-forward
// gap skips (a window from 02:30 when clocks go from 02:00 to 03:00, or a
// date whose midnight is skipped) takes effect at the end of the gap, the
// first instant whose wall clock reads past it; Go's time.Date is not used
// for boundaries, as it moves such a wall time back before the gap in zones
// west of UTC (02:30 in New York is 01:30 EST). A wall time that clocks
// fall back over is excluded at both of its occurrences.
type calendarRules struct {
	dates    map[int64]bool // the excluded wall dates, as days since the Unix epoch
	weekdays uint8          // bit 1<<time.Weekday of each excluded weekday
	daily    []dailyWindow
	dated    []datedWindow
	cron     []*cron.SpecSchedule // matched on the wall-clock minute
}

// A dailyWindow excludes the times of day from start to end, end excluded;
// with start after end it wraps midnight.
type dailyWindow struct{ start, end time.Duration }

// A datedWindow excludes the wall times from start to end, end excluded
// (wall fields in UTC, which has no DST).
type datedWindow struct{ start, end time.Time }

// weekdayNames are the names a calendar's weekdays take, lower case.
var weekdayNames = map[string]time.Weekday{
	"sun": time.Sunday, "sunday": time.Sunday, "mon": time.Monday, "monday": time.Monday,
	"tue": time.Tuesday, "tues": time.Tuesday, "tuesday": time.Tuesday, "wed": time.Wednesday, "wednesday": time.Wednesday,
	"thu": time.Thursday, "thur": time.Thursday, "thurs": time.Thursday, "thursday": time.Thursday,
	"fri": time.Friday, "friday": time.Friday, "sat": time.Saturday, "saturday": time.Saturday,
}

// calendarCron parses a calendar's cron rules: five fields, no descriptor.
var calendarCron = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// The rules of each field, for errors.
const (
	dateRule    = "must be a date such as 2026-12-25"
	weekdayRule = "must be a day of the week: sun to sat or sunday to saturday, in any case"
	windowRule  = `must be a daily window such as "22:00-06:00" (HH:MM-HH:MM or HH:MM:SS-HH:MM:SS, end excluded, may wrap midnight, ` +
		`end 24:00 for midnight) or a dated one such as "2026-12-24T12:00/2026-12-27T00:00" (wall times, end excluded)`
	cronRule = "must be a cron expression of five fields (minute hour day-of-month month day-of-week), without a zone"
)

// compileCalendar validates every rule of c (a bad date, weekday, window or
// cron expression, an empty entry) and compiles them; an error names the
// calendar, the field (windows[2]), the value and the rule. Include is not
// resolved here (resolveCalendars).
func compileCalendar(c taskstate.Calendar) (*calendarRules, error) {
	if err := taskstate.CheckCalendar(c); err != nil {
		return nil, err
	}
	r := &calendarRules{}
	fail := func(field string, i int, v, rule string, err error) error {
		if err != nil {
			rule = fmt.Sprintf("%s (%v)", rule, err)
		}
		return fmt.Errorf("calendar %q: %s[%d] %q: %s", c.Name, field, i, v, rule)
	}
	for i, v := range c.Dates {
		d, err := time.Parse(time.DateOnly, strings.TrimSpace(v))
		if err != nil {
			return nil, fail("dates", i, v, dateRule, nil)
		}
		if r.dates == nil {
			r.dates = make(map[int64]bool, len(c.Dates))
		}
		r.dates[dayNumber(d)] = true
	}
	for i, v := range c.Weekdays {
		d, ok := weekdayNames[strings.ToLower(strings.TrimSpace(v))]
		if !ok {
			return nil, fail("weekdays", i, v, weekdayRule, nil)
		}
		r.weekdays |= 1 << d
	}
	for i, v := range c.Windows {
		if err := r.addWindow(strings.TrimSpace(v)); err != nil {
			return nil, fail("windows", i, v, windowRule, err)
		}
	}
	for i, v := range c.Cron {
		spec, err := parseCalendarCron(strings.TrimSpace(v))
		if err != nil {
			return nil, fail("cron", i, v, cronRule, err)
		}
		r.cron = append(r.cron, spec)
	}
	return r, nil
}

// addWindow adds a window of windowRule, or says what is wrong with it
// (nil error from a form that does not parse: the rule says it).
func (r *calendarRules) addWindow(v string) error {
	if from, to, ok := strings.Cut(v, "/"); ok {
		start, ok1 := parseWall(strings.TrimSpace(from))
		end, ok2 := parseWall(strings.TrimSpace(to))
		switch {
		case !ok1 || !ok2:
			return fmt.Errorf("a bound is not a wall time")
		case !end.After(start):
			return fmt.Errorf("its end must be after its start")
		}
		r.dated = append(r.dated, datedWindow{start, end})
		return nil
	}
	from, to, ok := strings.Cut(v, "-")
	if !ok {
		return fmt.Errorf("no - or / between its start and end")
	}
	start, ok1 := timeOfDay(strings.TrimSpace(from), false)
	end, ok2 := timeOfDay(strings.TrimSpace(to), true)
	switch {
	case !ok1 || !ok2:
		return fmt.Errorf("a bound is not a time of day")
	case start == end || start == 0 && end == 24*time.Hour:
		return fmt.Errorf("it names no time or the whole day: exclude whole days with weekdays or dates")
	}
	r.daily = append(r.daily, dailyWindow{start, end % (24 * time.Hour)})
	return nil
}

// timeOfDay reads HH:MM or HH:MM:SS as the time since midnight; "24:00"
// too if end.
func timeOfDay(v string, end bool) (time.Duration, bool) {
	if end && (v == "24:00" || v == "24:00:00") {
		return 24 * time.Hour, true
	}
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second, true
		}
	}
	return 0, false
}

// parseCalendarCron parses a calendar's cron rule, never panicking.
func parseCalendarCron(v string) (spec *cron.SpecSchedule, err error) {
	defer func() {
		if p := recover(); p != nil {
			spec, err = nil, fmt.Errorf("unparsable: %v", p)
		}
	}()
	if strings.HasPrefix(v, "TZ=") || strings.HasPrefix(v, "CRON_TZ=") {
		return nil, fmt.Errorf("a calendar is evaluated in the zone of the task that names it")
	}
	parsed, err := calendarCron.Parse(v)
	if err != nil {
		return nil, fieldError(v, err)
	}
	spec = parsed.(*cron.SpecSchedule)
	if field := emptyField(spec); field != "" {
		return nil, fmt.Errorf("the %s field names no value", field)
	}
	if !canFire(spec) {
		return nil, fmt.Errorf("it matches no day: no month it names has the days it names")
	}
	return spec, nil
}

// dayNumber returns the days since the Unix epoch of the date of wall, a
// time in UTC.
func dayNumber(wall time.Time) int64 {
	s := wall.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return d
}

// excludes reports whether t, evaluated in loc (nil: time.Local), is excluded by these rules
// (Include ignored) and, if so, until: the first instant after t that these
// rules might not exclude (the end of the excluded day, window or minutes,
// or loc's next change of offset if sooner), so that a caller can skip a
// whole excluded span at once. Every instant from t to until is excluded;
// until itself may be too.
func (c *calendarRules) excludes(t time.Time, loc *time.Location) (bool, time.Time) {
	if loc == nil {
		loc = time.Local // as parseSchedule takes it
	}
	lt := t.In(loc)
	_, off := lt.Zone()
	_, zoneEnd := lt.ZoneBounds()
	shift := time.Duration(off) * time.Second
	wall := t.UTC().Add(shift)
	midnight := wall.Truncate(24 * time.Hour)
	tod := wall.Sub(midnight)
	var until time.Time
	// upTo records a rule's exclusion up to the wall time end, read with
	// t's offset, which holds until zoneEnd.
	upTo := func(end time.Time) {
		u := end.Add(-shift)
		if !zoneEnd.IsZero() && u.After(zoneEnd) {
			u = zoneEnd
		}
		if u.After(until) {
			until = u
		}
	}
	const day = 24 * time.Hour
	if c.dates[dayNumber(midnight)] || c.weekdays&(1<<wall.Weekday()) != 0 {
		upTo(midnight.Add(day))
	}
	for _, w := range c.daily {
		switch {
		case w.start < w.end && tod >= w.start && tod < w.end:
			upTo(midnight.Add(w.end))
		case w.start > w.end && tod >= w.start:
			upTo(midnight.Add(day + w.end))
		case w.start > w.end && tod < w.end:
			upTo(midnight.Add(w.end))
		}
	}
	for _, w := range c.dated {
		if !wall.Before(w.start) && wall.Before(w.end) {
			upTo(w.end)
		}
	}
	for _, spec := range c.cron {
		m := wall.Truncate(time.Minute)
		// A day of matching minutes at most: "* * * * 6" excludes
		// Saturday by 1440 calls, each skipping a day.
		for i := 0; i < 1440 && minuteMatch(spec, m); i++ {
			m = m.Add(time.Minute)
		}
		if !m.Equal(wall.Truncate(time.Minute)) {
			upTo(m)
		}
	}
	if until.IsZero() {
		return false, time.Time{}
	}
	return true, until.In(t.Location())
}

// minuteMatch reports whether spec's minute, hour, day and month fields
// match wall, whose fields are given in UTC.
func minuteMatch(spec *cron.SpecSchedule, wall time.Time) bool {
	_, mo, d := wall.Date()
	h, mi, _ := wall.Clock()
	return spec.Minute&(1<<mi) != 0 && spec.Hour&(1<<h) != 0 && spec.Month&(1<<mo) != 0 &&
		dayMatch(spec, d, int(wall.Weekday()))
}

// namedRules are a calendar's compiled rules and its name.
type namedRules struct {
	name  string
	rules *calendarRules
}

// A calendarSet is the calendars a task names, with Include resolved
// (resolveCalendars), each once.
type calendarSet []namedRules

// excludedBy returns the name of the first calendar of the set that
// excludes t in loc ("" if none) and until, the first instant after t that
// the set might not exclude: every instant from t to until is excluded.
func (cs calendarSet) excludedBy(t time.Time, loc *time.Location) (string, time.Time) {
	var name string
	var until time.Time
	for _, c := range cs {
		if ex, u := c.rules.excludes(t, loc); ex {
			if name == "" {
				name = c.name
			}
			if u.After(until) {
				until = u
			}
		}
	}
	return name, until
}

// resolveCalendars builds the set of the calendars named, from the known
// compiled calendars (by name), following Include (includes, by name)
// transitively: each calendar is in the set once, so that a cycle is fine.
// A name that is not known is an error naming it, and the calendar that
// includes it when reached through Include.
func resolveCalendars(names []string, known map[string]*calendarRules, includes map[string][]string) (calendarSet, error) {
	var cs calendarSet
	seen := map[string]bool{}
	var add func(name, by string) error
	add = func(name, by string) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		r, ok := known[name]
		switch {
		case !ok && by != "":
			return fmt.Errorf("calendar %q, included by %q, is not defined", name, by)
		case !ok:
			return fmt.Errorf("calendar %q is not defined", name)
		}
		cs = append(cs, namedRules{name, r})
		for _, inc := range includes[name] {
			if err := add(inc, name); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range names {
		if err := add(name, ""); err != nil {
			return nil, err
		}
	}
	return cs, nil
}
