package scheduling

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/ndigo/ndigo/taskstate"
)

func FuzzParseSchedule(f *testing.F) {
	for _, seed := range []string{"0 2 * * *", "*/5 * * * * *", "@every 1m30s", "@hourly", "CRON_TZ=Europe/Paris 30 2 * * *",
		"TZ=America/New_York 0 9 * * MON-FRI", "61 * * * *", "0 0 30 2 *", "@every", "5-1 * * * *", "*/0 * * * *", "TZ=", "0 , 1 1 0",
		"@at 2027-01-15T09:00:00 Europe/Paris", "@at 2027-01-15T09:00Z", "@at 2026-03-29T02:30", "at 2027-01-15"} {
		f.Add(seed)
	}
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := parseSchedule(expr, time.UTC)
		if err != nil {
			return
		}
		// A schedule that parses fires after any instant, strictly later.
		prev := from
		for range 3 {
			next := s.Next(prev)
			if next.IsZero() {
				return
			}
			if !next.After(prev) {
				t.Fatalf("%q: Next(%v) = %v, not after it", expr, prev, next)
			}
			prev = next
		}
	})
}

// FuzzNextUTC checks the integer cron search against robfig's own, in UTC
// and in a fixed zone.
func FuzzNextUTC(f *testing.F) {
	for _, seed := range []string{"0 2 * * *", "*/7 * * * * *", "0 0 29 2 *", "0 0 31 * *", "15 10 * * MON-FRI",
		"0 0 1,15 * 3", "59 23 31 12 *", "0 0 * * 0", "30 */5 1-10 */2 *", "@yearly", "0 0 13 * 5", "1-5/2 * * * * *"} {
		f.Add(seed, int64(1767225600), int32(0))
		f.Add(seed, int64(4102444799), int32(3600*5+1800))
	}
	f.Fuzz(func(t *testing.T, expr string, unix int64, offset int32) {
		if unix < 0 || unix > 7258118400 || offset < -14*3600 || offset > 14*3600 {
			return // 1970 to 2200, real offsets
		}
		parsed, err := cronParser.Parse(expr)
		if err != nil {
			return
		}
		spec, ok := parsed.(*cron.SpecSchedule)
		if !ok {
			return
		}
		// robfig truncates to minutes on absolute time, which is wrong for
		// offsets that are not whole minutes (only historic zones have
		// them); real offsets are multiples of 15 minutes.
		offset = offset / 900 * 900
		from := time.Unix(unix, int64(unix%1000)*1e6)
		for _, loc := range []*time.Location{time.UTC, time.FixedZone("fixed", int(offset))} {
			ref := *spec
			ref.Location = loc
			utc := *spec
			utc.Location = time.UTC
			want := ref.Next(from)
			got := (&utcSchedule{spec: utc, loc: loc}).Next(from)
			if !got.Equal(want) {
				t.Fatalf("%q in %v from %v: got %v, robfig %v", expr, loc, from, got, want)
			}
		}
	})
}

// FuzzCompileCalendar checks that no calendar rule panics, at compile time
// or when judging an instant, and that until is after the instant.
func FuzzCompileCalendar(f *testing.F) {
	f.Add("2026-12-25", "sat", "22:00-06:00", "0 9 * * *")
	f.Add("2026-02-30", "Sonntag", "2026-12-24T12:00/2026-12-27T00:00", "61 * * * *")
	f.Add("", "", "24:00-01:00", "TZ=UTC 0 0 * * *")
	f.Add("0000-01-01", "SUN", "00:00-24:00", ", * * * *")
	loc, err := time.LoadLocation("America/Santiago")
	if err != nil {
		f.Fatal(err)
	}
	at := time.Date(2026, 9, 6, 3, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, date, weekday, window, cron string) {
		r, err := compileCalendar(taskstate.Calendar{Name: "f", CalendarRules: taskstate.CalendarRules{
			Dates: []string{date}, Weekdays: []string{weekday}, Windows: []string{window}, Cron: []string{cron}}})
		if err != nil {
			return
		}
		for _, tt := range []time.Time{at, at.Add(time.Hour), at.AddDate(0, 1, 0)} {
			if ex, until := r.excludes(tt, loc); ex && !until.After(tt) {
				t.Fatalf("excludes(%v) until %v, not after it", tt, until)
			}
		}
	})
}
