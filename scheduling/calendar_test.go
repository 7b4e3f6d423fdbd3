package scheduling

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

func mustCompile(t *testing.T, c taskstate.Calendar) *calendarRules {
	t.Helper()
	r, err := compileCalendar(c)
	if err != nil {
		t.Fatalf("compileCalendar(%+v): %v", c, err)
	}
	return r
}

func TestCompileCalendarErrors(t *testing.T) {
	cases := []struct {
		rules taskstate.CalendarRules
		want  []string // in the error, besides the calendar's name
	}{
		{taskstate.CalendarRules{Dates: []string{"2026-12-25", "2026-02-30"}}, []string{`dates[1] "2026-02-30"`, dateRule}},
		{taskstate.CalendarRules{Dates: []string{"25/12/2026"}}, []string{`dates[0] "25/12/2026"`, "must be a date"}},
		{taskstate.CalendarRules{Dates: []string{" "}}, []string{`dates[0] " "`, "must not be empty", "invalid"}},
		{taskstate.CalendarRules{Weekdays: []string{"sat", "Sonntag"}}, []string{`weekdays[1] "Sonntag"`, weekdayRule}},
		{taskstate.CalendarRules{Windows: []string{"22:00-06:00", "09:00-09:00", "x"}}, []string{`windows[1] "09:00-09:00"`, "names no time or the whole day"}},
		{taskstate.CalendarRules{Windows: []string{"00:00-24:00"}}, []string{`windows[0]`, "the whole day"}},
		{taskstate.CalendarRules{Windows: []string{"25:00-06:00"}}, []string{`windows[0] "25:00-06:00"`, "not a time of day", "must be a daily window"}},
		{taskstate.CalendarRules{Windows: []string{"22:00"}}, []string{`windows[0] "22:00"`, "no - or /"}},
		{taskstate.CalendarRules{Windows: []string{"2026-12-27T00:00/2026-12-24T12:00"}}, []string{`windows[0]`, "end must be after its start"}},
		{taskstate.CalendarRules{Windows: []string{"2026-12-24T12:00/tomorrow"}}, []string{`windows[0]`, "not a wall time", "dated one"}},
		{taskstate.CalendarRules{Cron: []string{"0 9 * * *", "61 * * * *"}}, []string{`cron[1] "61 * * * *"`, cronRule, "minute field"}},
		{taskstate.CalendarRules{Cron: []string{"0 0 9 * * *"}}, []string{`cron[0] "0 0 9 * * *"`, "five fields"}},
		{taskstate.CalendarRules{Cron: []string{"@daily"}}, []string{`cron[0] "@daily"`, cronRule}},
		{taskstate.CalendarRules{Cron: []string{"TZ=UTC 0 9 * * *"}}, []string{`cron[0]`, "zone of the task"}},
		{taskstate.CalendarRules{Cron: []string{"0 0 30 2 *"}}, []string{`cron[0]`, "matches no day"}},
		{taskstate.CalendarRules{Cron: []string{", * * * *"}}, []string{`cron[0]`, "names no value"}},
		{taskstate.CalendarRules{Include: []string{"a", ""}}, []string{`include[1] ""`, "must not be empty"}},
	}
	for _, c := range cases {
		_, err := compileCalendar(taskstate.Calendar{Name: "hols", CalendarRules: c.rules})
		if err == nil {
			t.Errorf("%+v: no error", c.rules)
			continue
		}
		for _, w := range append(c.want, `calendar "hols"`) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", c.rules, err, w)
			}
		}
	}
	if _, err := compileCalendar(taskstate.Calendar{Name: ".."}); !errors.Is(err, taskstate.ErrInvalid) {
		t.Errorf(`name "..": %v, want ErrInvalid`, err)
	}
	r := mustCompile(t, taskstate.Calendar{Name: "ok", CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25"},
		Weekdays: []string{"SAT", "sunday", " Tue "}, Windows: []string{"22:00-06:00", "12:00:30-13:00", "18:00-24:00", "2026-12-24/2026-12-27T00:00"},
		Cron: []string{"*/5 9-17 * * 1-5"}, Include: []string{"other"}}})
	if r.weekdays != 1<<time.Saturday|1<<time.Sunday|1<<time.Tuesday || len(r.daily) != 3 || len(r.dated) != 1 || len(r.cron) != 1 {
		t.Errorf("compiled %+v", r)
	}
}

func TestCalendarExcludes(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	ny := mustLoc(t, "America/New_York")
	santiago := mustLoc(t, "America/Santiago")
	at := func(loc *time.Location, s string) time.Time {
		t.Helper()
		w, ok := parseWall(s)
		if !ok {
			t.Fatalf("wall %q", s)
		}
		return wallInstant(w, loc)
	}
	cases := []struct {
		name  string
		rules taskstate.CalendarRules
		loc   *time.Location
		t     time.Time
		want  bool
		until time.Time // when excluded
	}{
		{"wrapping window, before midnight", taskstate.CalendarRules{Windows: []string{"22:00-06:00"}}, paris,
			at(paris, "2026-06-01T23:00"), true, at(paris, "2026-06-02T06:00")},
		{"wrapping window, after midnight", taskstate.CalendarRules{Windows: []string{"22:00-06:00"}}, paris,
			at(paris, "2026-06-02T05:59:59"), true, at(paris, "2026-06-02T06:00")},
		{"wrapping window, its end", taskstate.CalendarRules{Windows: []string{"22:00-06:00"}}, paris, at(paris, "2026-06-02T06:00"), false, time.Time{}},
		{"wrapping window, its start", taskstate.CalendarRules{Windows: []string{"22:00-06:00"}}, paris,
			at(paris, "2026-06-02T22:00"), true, at(paris, "2026-06-03T06:00")},
		{"window to 24:00", taskstate.CalendarRules{Windows: []string{"18:00-24:00"}}, paris,
			at(paris, "2026-06-02T23:59"), true, at(paris, "2026-06-03T00:00")},
		// 2026-03-29 in Paris has 23 hours, 2026-10-25 25.
		{"date of 23 hours", taskstate.CalendarRules{Dates: []string{"2026-03-29"}}, paris,
			at(paris, "2026-03-29T00:00"), true, at(paris, "2026-03-29T03:00")}, // the change comes first
		{"date of 23 hours, after the change", taskstate.CalendarRules{Dates: []string{"2026-03-29"}}, paris,
			at(paris, "2026-03-29T03:00"), true, at(paris, "2026-03-30T00:00")},
		{"date of 25 hours", taskstate.CalendarRules{Dates: []string{"2026-10-25"}}, paris,
			at(paris, "2026-10-25T03:00"), true, at(paris, "2026-10-26T00:00")},
		{"weekday", taskstate.CalendarRules{Weekdays: []string{"sun"}}, paris, at(paris, "2026-10-25T12:00"), true, at(paris, "2026-10-26T00:00")},
		{"weekday, another day", taskstate.CalendarRules{Weekdays: []string{"sun"}}, paris, at(paris, "2026-10-26T00:00"), false, time.Time{}},
		// A window from 02:30 on the day New York skips 02:00 to 03:00
		// starts at 03:00 EDT: no instant reads 02:30 (time.Date would
		// make it 01:30 EST).
		{"window starting in a gap, before it", taskstate.CalendarRules{Windows: []string{"02:30-05:00"}}, ny,
			time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC), false, time.Time{}},
		{"window starting in a gap, at its end", taskstate.CalendarRules{Windows: []string{"02:30-05:00"}}, ny,
			time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), true, at(ny, "2026-03-08T05:00")},
		// Santiago skips 2026-09-06 00:00 to 01:00: the date starts at 01:00.
		{"date whose midnight is skipped, before", taskstate.CalendarRules{Dates: []string{"2026-09-06"}}, santiago,
			time.Date(2026, 9, 6, 3, 59, 0, 0, time.UTC), false, time.Time{}},
		{"date whose midnight is skipped", taskstate.CalendarRules{Dates: []string{"2026-09-06"}}, santiago,
			time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC), true, at(santiago, "2026-09-07T00:00")},
		// Both passes of New York's repeated 01:00-02:00 read 01:30.
		{"repeated hour, first pass", taskstate.CalendarRules{Windows: []string{"01:15-01:45"}}, ny,
			time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), true, time.Date(2026, 11, 1, 5, 45, 0, 0, time.UTC)},
		{"repeated hour, second pass", taskstate.CalendarRules{Windows: []string{"01:15-01:45"}}, ny,
			time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), true, time.Date(2026, 11, 1, 6, 45, 0, 0, time.UTC)},
		// The window ends at 01:15 of the second pass; until is the change,
		// where its wall clock goes back.
		{"window across a fall-back", taskstate.CalendarRules{Windows: []string{"2026-11-01T01:00/2026-11-01T01:15"}}, ny,
			time.Date(2026, 11, 1, 5, 10, 0, 0, time.UTC), true, time.Date(2026, 11, 1, 5, 15, 0, 0, time.UTC)},
		{"window to a time in the repeated hour", taskstate.CalendarRules{Windows: []string{"2026-11-01T00:00/2026-11-01T01:30"}}, ny,
			time.Date(2026, 11, 1, 5, 45, 0, 0, time.UTC), false, time.Time{}},
		{"window to a time in the repeated hour, from before", taskstate.CalendarRules{Windows: []string{"2026-11-01T00:00/2026-11-01T01:30"}}, ny,
			time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), true, time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)},
		{"dated window", taskstate.CalendarRules{Windows: []string{"2026-12-24T12:00/2026-12-27T00:00"}}, paris,
			at(paris, "2026-12-24T12:00"), true, at(paris, "2026-12-27T00:00")},
		{"dated window, its end", taskstate.CalendarRules{Windows: []string{"2026-12-24T12:00/2026-12-27T00:00"}}, paris,
			at(paris, "2026-12-27T00:00"), false, time.Time{}},
		{"cron, the matching minutes at once", taskstate.CalendarRules{Cron: []string{"0-29 9 * * *"}}, paris,
			at(paris, "2026-06-01T09:10:30"), true, at(paris, "2026-06-01T09:30")},
		{"cron, another minute", taskstate.CalendarRules{Cron: []string{"0-29 9 * * *"}}, paris, at(paris, "2026-06-01T09:30"), false, time.Time{}},
		{"rules together: the latest until", taskstate.CalendarRules{Windows: []string{"09:00-10:00"}, Cron: []string{"* 9-11 * * *"}}, paris,
			at(paris, "2026-06-01T09:10"), true, at(paris, "2026-06-01T12:00")},
	}
	for _, c := range cases {
		r := mustCompile(t, taskstate.Calendar{Name: "c", CalendarRules: c.rules})
		got, until := r.excludes(c.t, c.loc)
		if got != c.want || !until.Equal(c.until) {
			t.Errorf("%s: excludes(%v) = %v, %v; want %v, %v", c.name, c.t.In(c.loc), got, until.In(c.loc), c.want, c.until.In(c.loc))
		}
	}
}

func TestResolveCalendars(t *testing.T) {
	rules := func() *calendarRules { return &calendarRules{} }
	known := map[string]*calendarRules{"a": rules(), "b": rules(), "c": rules()}
	includes := map[string][]string{"a": {"b"}, "b": {"c", "a"}, "c": {"c"}}
	cs, err := resolveCalendars([]string{"a", "c"}, known, includes)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.name)
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("set %v, want a, b, c once each", names)
	}
	if _, err := resolveCalendars([]string{"a", "x"}, known, includes); err == nil || err.Error() != `calendar "x" is not defined` {
		t.Errorf("missing x: %v", err)
	}
	includes["c"] = []string{"gone"}
	if _, err := resolveCalendars([]string{"a"}, known, includes); err == nil || !strings.Contains(err.Error(), `"gone", included by "c"`) {
		t.Errorf("missing include: %v", err)
	}
	if cs, err := resolveCalendars(nil, known, includes); err != nil || len(cs) != 0 {
		t.Errorf("no names: %v, %v", cs, err)
	}
	// The first calendar that excludes names the exclusion; until is the
	// latest of those that exclude.
	paris := mustLoc(t, "Europe/Paris")
	sat := mustCompile(t, taskstate.Calendar{Name: "weekend", CalendarRules: taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}}})
	night := mustCompile(t, taskstate.Calendar{Name: "night", CalendarRules: taskstate.CalendarRules{Windows: []string{"22:00-07:00"}}})
	set := calendarSet{{"night", night}, {"weekend", sat}}
	name, until := set.excludedBy(time.Date(2026, 6, 6, 23, 0, 0, 0, paris), paris) // a Saturday
	if want := time.Date(2026, 6, 7, 7, 0, 0, 0, paris); name != "night" || !until.Equal(want) {
		t.Errorf("excludedBy = %q, %v; want night, %v", name, until, want)
	}
	if name, until := set.excludedBy(time.Date(2026, 6, 8, 12, 0, 0, 0, paris), paris); name != "" || !until.IsZero() {
		t.Errorf("Monday noon: excludedBy = %q, %v", name, until)
	}
}

func TestParseBound(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	ny := mustLoc(t, "America/New_York")
	cases := []struct {
		v    string
		loc  *time.Location
		want time.Time
	}{
		{"2027-01-15T09:00:00Z", paris, time.Date(2027, 1, 15, 9, 0, 0, 0, time.UTC)},
		{"2027-01-15T09:00:00+05:30", paris, time.Date(2027, 1, 15, 3, 30, 0, 0, time.UTC)},
		{"2027-01-15T09:00", paris, time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)},
		{"2027-01-15T09:00:30", paris, time.Date(2027, 1, 15, 8, 0, 30, 0, time.UTC)},
		{" 2027-01-15 ", paris, time.Date(2027, 1, 14, 23, 0, 0, 0, time.UTC)},
		// In a gap, the end of the gap; in a repeated hour, its first pass.
		{"2026-03-08T02:30", ny, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)},
		{"2026-11-01T01:30", ny, time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := parseBound("startAt", c.v, c.loc)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseBound(%q, %v) = %v, %v; want %v", c.v, c.loc, got, err, c.want)
		}
	}
	for _, v := range []string{"", "tomorrow", "2027-13-01", "2027-01-15 09:00", "15/01/2027"} {
		_, err := parseBound("endAt", v, paris)
		if err == nil || !strings.Contains(err.Error(), "endAt "+strconv.Quote(v)) || !strings.Contains(err.Error(), "must be an RFC 3339 instant") {
			t.Errorf("parseBound(%q): %v", v, err)
		}
	}
}

func TestAtSchedule(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	want := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	for _, expr := range []string{"@at 2027-01-15T09:00:00 Europe/Paris", "@at 2027-01-15T09:00", "@at 2027-01-15T08:00:00Z",
		"@at  2027-01-15T03:00-05:00", "TZ=Europe/Paris @at 2027-01-15T09:00", "@at 2027-01-15T17:00 Asia/Tokyo"} {
		loc := paris
		if strings.HasSuffix(expr, "T09:00") && strings.HasPrefix(expr, "TZ=") {
			loc = time.UTC // the prefix's zone, not the default
		}
		s, err := parseSchedule(expr, loc)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		if got := s.Next(want.Add(-time.Hour)); !got.Equal(want) {
			t.Errorf("%q: Next = %v, want %v", expr, got, want)
		}
		if got := s.Next(want); !got.IsZero() {
			t.Errorf("%q: Next(at) = %v, want none", expr, got)
		}
	}
	// The default zone is loc.
	s := mustParse(t, "@at 2027-01-15T09:00", time.UTC)
	if got := s.Next(time.Time{}); !got.Equal(want.Add(time.Hour)) {
		t.Errorf("in UTC: %v", got)
	}
	// A past instant never fires: the task waits for nothing.
	s = mustParse(t, "@at 2020-01-01T00:00:00Z", nil)
	if got := nextRun(s, nil, bounds{}, paris, time.Now(), 10*365*24*time.Hour); !got.IsZero() {
		t.Errorf("past @at fires at %v", got)
	}
	for expr, says := range map[string]string{
		"@at":                                    "needs an instant",
		"@at 2027-01-15T09:00 Europe/Nowhere":    `zone "Europe/Nowhere" must be an IANA zone name`,
		"@at 2027-01-15T09:00Z Europe/Paris":     "takes no zone",
		"@at 15/01/2027":                         `the instant "15/01/2027" must be an RFC 3339 instant`,
		"@at 2027-01-15T09:00 Europe/Paris more": "needs an instant and an optional zone",
		"at 2027-01-15T09:00":                    `did you mean "@at 2027-01-15T09:00"?`,
	} {
		_, err := parseSchedule(expr, paris)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v; want it to say %s", expr, err, says)
		}
	}
	// "@at" is no hint for a cron expression with a bad first field.
	if _, err := parseSchedule("61 * * * *", paris); err == nil || strings.Contains(err.Error(), "@at") {
		t.Errorf("61 * * * *: %v", err)
	}
}

// countingSchedule counts the calls of its schedule's Next.
type countingSchedule struct {
	schedule
	calls int
}

func (c *countingSchedule) Next(t time.Time) time.Time {
	c.calls++
	return c.schedule.Next(t)
}

func TestNextRun(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	cal := func(rules taskstate.CalendarRules) calendarSet {
		return calendarSet{{"c", mustCompile(t, taskstate.Calendar{Name: "c", CalendarRules: rules})}}
	}
	year := 365 * 24 * time.Hour
	from := time.Date(2026, 6, 5, 12, 0, 0, 0, paris) // a Friday
	// A schedule of every second excluded for a weekend costs a few calls.
	every := &countingSchedule{schedule: mustParse(t, "@every 1s", nil)}
	got := nextRun(every, cal(taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}, Windows: []string{"12:00-24:00"}}), bounds{}, paris, from, year)
	if want := time.Date(2026, 6, 8, 0, 0, 0, 0, paris); !got.Equal(want) || every.calls > 5 {
		t.Errorf("@every 1s: %v after %d calls, want %v after a few", got, every.calls, want)
	}
	daily := mustParse(t, "0 9 * * *", paris)
	cases := []struct {
		name string
		cs   calendarSet
		b    bounds
		want time.Time
	}{
		{"no rules", nil, bounds{}, time.Date(2026, 6, 6, 9, 0, 0, 0, paris)},
		{"start included", nil, bounds{start: time.Date(2026, 6, 10, 9, 0, 0, 0, paris)}, time.Date(2026, 6, 10, 9, 0, 0, 0, paris)},
		{"start before t", nil, bounds{start: time.Date(2026, 1, 1, 0, 0, 0, 0, paris)}, time.Date(2026, 6, 6, 9, 0, 0, 0, paris)},
		{"end excluded", nil, bounds{end: time.Date(2026, 6, 6, 9, 0, 0, 0, paris)}, time.Time{}},
		{"end after", nil, bounds{end: time.Date(2026, 6, 6, 9, 0, 0, 1, paris)}, time.Date(2026, 6, 6, 9, 0, 0, 0, paris)},
		{"weekend excluded", cal(taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}}), bounds{}, time.Date(2026, 6, 8, 9, 0, 0, 0, paris)},
		{"excluded up to the end", cal(taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}}), bounds{end: time.Date(2026, 6, 8, 9, 0, 0, 0, paris)}, time.Time{}},
		{"excluded for good", cal(taskstate.CalendarRules{Cron: []string{"* 9 * * *"}}), bounds{}, time.Time{}},
	}
	for _, c := range cases {
		if got := nextRun(daily, c.cs, c.b, paris, from, year); !got.Equal(c.want) {
			t.Errorf("%s: nextRun = %v, want %v", c.name, got, c.want)
		}
	}
	// Beyond the horizon: none.
	if got := nextRun(daily, nil, bounds{}, paris, from, time.Hour); !got.IsZero() {
		t.Errorf("within an hour: %v", got)
	}
}
