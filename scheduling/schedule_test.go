package scheduling

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr string, loc *time.Location) schedule {
	t.Helper()
	s, err := parseSchedule(expr, loc)
	if err != nil {
		t.Fatalf("parseSchedule(%q): %v", expr, err)
	}
	return s
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// nexts returns the first n fires strictly after from.
func nexts(s schedule, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

func TestEveryIsOnTheEpochGrid(t *testing.T) {
	s := mustParse(t, "@every 7s", nil)
	// Two nodes that started at different times compute the same instants:
	// multiples of 7s since the Unix epoch, not start+7s as robfig's
	// ConstantDelaySchedule would.
	a := nexts(s, time.Unix(1000, 0), 3)
	b := nexts(s, time.Unix(1000, 900e6), 3)
	for i := range a {
		if !a[i].Equal(b[i]) {
			t.Fatalf("fire %d: node a %v, node b %v", i, a[i], b[i])
		}
		if a[i].Unix()%7 != 0 || a[i].Nanosecond() != 0 {
			t.Fatalf("fire %v is not a multiple of 7s since the epoch", a[i])
		}
	}
	if want := time.Unix(1001, 0); !a[0].Equal(want) {
		t.Fatalf("first fire after 1000s = %v, want %v", a[0], want)
	}
	// On a grid instant, Next is the following one.
	if got := s.Next(time.Unix(1001, 0)); !got.Equal(time.Unix(1008, 0)) {
		t.Fatalf("Next(1001s) = %v, want 1008s", got)
	}
	// Before the epoch the grid continues.
	if got := s.Next(time.Unix(-8, 0)); !got.Equal(time.Unix(-7, 0)) {
		t.Fatalf("Next(-8s) = %v, want -7s", got)
	}
	sub := mustParse(t, "CRON_TZ=Europe/Paris @every 250ms", nil)
	if got := sub.Next(time.Unix(10, 100e6)); !got.Equal(time.Unix(10, 250e6)) {
		t.Fatalf("@every 250ms: Next(10.1s) = %v, want 10.25s", got)
	}
}

func TestCronForms(t *testing.T) {
	utc := time.UTC
	from := time.Date(2026, 5, 4, 10, 17, 30, 0, utc) // a Monday
	cases := []struct {
		expr string
		want time.Time
	}{
		{"*/15 * * * *", time.Date(2026, 5, 4, 10, 30, 0, 0, utc)},
		{"45 * * * * *", time.Date(2026, 5, 4, 10, 17, 45, 0, utc)},
		{"0 2 * * *", time.Date(2026, 5, 5, 2, 0, 0, 0, utc)},
		{"@hourly", time.Date(2026, 5, 4, 11, 0, 0, 0, utc)},
		{"@daily", time.Date(2026, 5, 5, 0, 0, 0, 0, utc)},
		{"@weekly", time.Date(2026, 5, 10, 0, 0, 0, 0, utc)},
		{"0 9 * * MON-FRI", time.Date(2026, 5, 5, 9, 0, 0, 0, utc)},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", time.Date(2026, 5, 5, 0, 0, 0, 0, utc)},
		{"TZ=America/New_York 0 9 * * *", time.Date(2026, 5, 4, 13, 0, 0, 0, utc)},
	}
	for _, c := range cases {
		got := mustParse(t, c.expr, utc).Next(from)
		if !got.Equal(c.want) {
			t.Errorf("%q: Next(%v) = %v, want %v", c.expr, from, got.UTC(), c.want)
		}
	}
	// The default zone applies to expressions without a prefix.
	tokyo := mustLoc(t, "Asia/Tokyo")
	if got := mustParse(t, "0 9 * * *", tokyo).Next(from); !got.Equal(time.Date(2026, 5, 5, 0, 0, 0, 0, utc)) {
		t.Errorf("0 9 * * * in Tokyo: %v", got.UTC())
	}
}

func TestCronRejects(t *testing.T) {
	for _, expr := range []string{"", "   ", "61 * * * *", "* * * *", "* * * * * * *", "0 0 30 2 *",
		"@every", "@every 0s", "@every 1µs", "@every x", "@sometimes", "CRON_TZ=Mars/Base 0 2 * * *",
		"CRON_TZ=UTC", "0 , 1 1 0", ", * * * *", "* * * , *"} {
		if _, err := parseSchedule(expr, nil); err == nil {
			t.Errorf("parseSchedule(%q) accepted it", expr)
		}
	}
}

func TestFallBackFiresOnce(t *testing.T) {
	// Europe/Paris falls back on 2026-10-25: 03:00 CEST becomes 02:00 CET,
	// so 02:30 happens twice. robfig/cron alone fires at both.
	paris := mustLoc(t, "Europe/Paris")
	s := mustParse(t, "30 2 * * *", paris)
	got := nexts(s, time.Date(2026, 10, 24, 12, 0, 0, 0, paris), 3)
	want := []time.Time{
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST, the first occurrence
		time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC), // 02:30 CET the next day
		time.Date(2026, 10, 27, 1, 30, 0, 0, time.UTC),
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("fall back: fires %v, want %v", got, want)
		}
	}
	// Starting inside the repeated hour after the first 02:30 does not fire
	// the second one either.
	if got := s.Next(time.Date(2026, 10, 25, 1, 10, 0, 0, time.UTC)); !got.Equal(want[1]) {
		t.Fatalf("from 02:10 CET: %v, want %v", got.UTC(), want[1])
	}
	// New York falls back 2026-11-01 02:00 EDT -> 01:00 EST.
	ny := mustLoc(t, "America/New_York")
	got = nexts(mustParse(t, "30 1 * * *", ny), time.Date(2026, 10, 31, 12, 0, 0, 0, ny), 2)
	if want := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC); !got[0].Equal(want) || got[1].Sub(got[0]) != 25*time.Hour {
		t.Fatalf("New York fall back: %v", got)
	}
	// A spec that runs every hour follows elapsed time through the
	// repeated hour: each instant once, four half-hours between 02:00 CEST
	// and 03:00 CET.
	got = nexts(mustParse(t, "*/30 * * * *", paris), time.Date(2026, 10, 25, 1, 50, 0, 0, paris), 5)
	for i := 1; i < len(got); i++ {
		if got[i].Sub(got[i-1]) != 30*time.Minute {
			t.Fatalf("*/30 through fall back: %v", got)
		}
	}
}

func TestSpringForwardFiresAtEndOfGap(t *testing.T) {
	// Europe/Paris springs forward on 2026-03-29: 02:00 CET becomes 03:00
	// CEST. A 02:30 job fires once that day, at 03:00 CEST; robfig/cron
	// alone skips the day.
	paris := mustLoc(t, "Europe/Paris")
	for _, expr := range []string{"30 2 * * *", "0 2 * * *"} {
		got := nexts(mustParse(t, expr, paris), time.Date(2026, 3, 28, 12, 0, 0, 0, paris), 2)
		if want := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC); !got[0].Equal(want) {
			t.Errorf("%q: first fire %v, want %v (03:00 CEST)", expr, got[0].UTC(), want)
		}
		if got[1].In(paris).Day() != 30 || got[1].In(paris).Hour() != 2 {
			t.Errorf("%q: second fire %v, want 2026-03-30 02:xx", expr, got[1].In(paris))
		}
	}
	// New York: 2026-03-08 02:00 EST becomes 03:00 EDT.
	ny := mustLoc(t, "America/New_York")
	got := mustParse(t, "30 2 * * *", ny).Next(time.Date(2026, 3, 7, 12, 0, 0, 0, ny))
	if want := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("New York: %v, want %v (03:00 EDT)", got.UTC(), want)
	}
	// Wall times both in and just after the gap fire once each.
	got2 := nexts(mustParse(t, "30 2,3 * * *", paris), time.Date(2026, 3, 29, 0, 0, 0, 0, paris), 2)
	if got2[0].In(paris).Hour() != 3 || got2[0].In(paris).Minute() != 0 || got2[1].In(paris).Minute() != 30 {
		t.Errorf("30 2,3: %v", got2)
	}
	// An every-hour spec has nothing to fire in the skipped hour.
	got = mustParse(t, "*/30 * * * *", paris).Next(time.Date(2026, 3, 29, 1, 40, 0, 0, paris))
	if want := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("*/30 across the gap: %v, want %v", got.UTC(), want)
	}
}

// A near miss of a descriptor gets a "did you mean" with the expression as
// meant; an expression that is no near miss gets none.
func TestDescriptorNearMisses(t *testing.T) {
	for expr, want := range map[string]string{
		"every 5s":     `did you mean "@every 5s"?`,
		"@evry 1m":     `did you mean "@every 1m"?`,
		"daily":        `did you mean "@daily"?`,
		"@dayly":       `did you mean "@daily"?`,
		"@Hourly":      `did you mean "@hourly"?`,
		"61 * * * *":   "",
		"@fortnightly": "",
	} {
		_, err := parseSchedule(expr, nil)
		switch {
		case err == nil:
			t.Errorf("parseSchedule(%q) accepted it", expr)
		case want == "" && strings.Contains(err.Error(), "did you mean"):
			t.Errorf("parseSchedule(%q): %v, want no hint", expr, err)
		case want != "" && !strings.HasSuffix(err.Error(), want):
			t.Errorf("parseSchedule(%q): %v, want it to end %s", expr, err, want)
		}
	}
}
