package scheduling

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// Every DST policy across real transitions: Europe/Paris and
// America/New_York (an hour each way), Australia/Lord_Howe (half an hour
// each way) and Pacific/Apia, which skipped 30 December 2011 whole. Each
// case lists the fires of one wall-clock spec over the day around the
// change, in UTC, under once/twice and shift/skip.
func TestDSTPolicies(t *testing.T) {
	for _, c := range []struct {
		zone, cron string
		from       string // a UTC instant before the change
		span       time.Duration
		// The fires under each policy, as UTC "15:04" (or "01-02 15:04").
		want map[string][]string
	}{
		{"Europe/Paris", "30 2 * * *", "2026-03-28T12:00:00Z", 48 * time.Hour, map[string][]string{
			// 02:30 on the 29th does not exist: 02:00 CET jumps to 03:00 CEST (01:00Z).
			"once,shift": {"03-29 01:00", "03-30 00:30"}, "once,skip": {"03-30 00:30"},
			"twice,shift": {"03-29 01:00", "03-30 00:30"}, "twice,skip": {"03-30 00:30"}}},
		{"Europe/Paris", "30 2 * * *", "2026-10-24T12:00:00Z", 48 * time.Hour, map[string][]string{
			// 02:30 on the 25th happens at 00:30Z (CEST) and 01:30Z (CET).
			"once,shift": {"10-25 00:30", "10-26 01:30"}, "once,skip": {"10-25 00:30", "10-26 01:30"},
			"twice,shift": {"10-25 00:30", "10-25 01:30", "10-26 01:30"}, "twice,skip": {"10-25 00:30", "10-25 01:30", "10-26 01:30"}}},
		{"America/New_York", "15 1,2 * * *", "2026-11-01T00:00:00Z", 24 * time.Hour, map[string][]string{
			// 01:15 happens at 05:15Z (EDT) and 06:15Z (EST); 02:15 once, at 07:15Z.
			"once,shift": {"11-01 05:15", "11-01 07:15"}, "twice,skip": {"11-01 05:15", "11-01 06:15", "11-01 07:15"}}},
		{"America/New_York", "15,45 1 * * *", "2026-11-01T00:00:00Z", 24 * time.Hour, map[string][]string{
			// Under twice, 01:45 of the first pass comes before 01:15 of the
			// second, and both 01:15s and 01:45s fire, in that order.
			"twice,shift": {"11-01 05:15", "11-01 05:45", "11-01 06:15", "11-01 06:45"},
			"once,shift":  {"11-01 05:15", "11-01 05:45"}}},
		{"America/New_York", "15 2 * * *", "2026-03-08T00:00:00Z", 36 * time.Hour, map[string][]string{
			"once,shift": {"03-08 07:00", "03-09 06:15"}, "once,skip": {"03-09 06:15"}}},
		{"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T00:00:00Z", 48 * time.Hour, map[string][]string{
			// 02:00 +11 falls back to 01:30 +10:30: 01:45 happens at 14:45Z and 15:15Z.
			"once,shift": {"04-04 14:45", "04-05 15:15"}, "twice,shift": {"04-04 14:45", "04-04 15:15", "04-05 15:15"}}},
		{"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T00:00:00Z", 48 * time.Hour, map[string][]string{
			// 02:00 +10:30 springs forward to 02:30 +11: 02:15 does not exist.
			"once,shift": {"10-03 15:30", "10-04 15:15"}, "once,skip": {"10-04 15:15"}}},
		{"Pacific/Apia", "0 12 * * *", "2011-12-29T12:00:00Z", 72 * time.Hour, map[string][]string{
			// 29 Dec 23:59:59 -10 became 31 Dec 00:00 +14: the 30th has no noon.
			"once,shift": {"12-29 22:00", "12-30 10:00", "12-30 22:00", "12-31 22:00"},
			"once,skip":  {"12-29 22:00", "12-30 22:00", "12-31 22:00"}}},
	} {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		from, _ := time.Parse(time.RFC3339, c.from)
		for policy, want := range c.want {
			p, err := parseDST(policy)
			if err != nil {
				t.Fatal(err)
			}
			base, err := parseSchedule(c.cron, loc)
			if err != nil {
				t.Fatal(err)
			}
			s := withDST(base, p)
			var got []string
			for at := s.Next(from); !at.IsZero() && at.Before(from.Add(c.span)); at = s.Next(at) {
				got = append(got, at.UTC().Format("01-02 15:04"))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s %q under %s from %s: fires %v, want %v", c.zone, c.cron, policy, c.from, got, want)
			}
		}
	}
}

// Both spec forms take the policy, one of each part or either; a bad one
// fails validation naming the option; a schedule that follows elapsed time
// ignores it; the Spec shows what was chosen, "" for the default.
func TestDSTOption(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	s := New(Config{Clock: clockwork.NewFakeClockAt(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC)), Location: paris})
	noop := func(context.Context) error { return nil }
	mustAdd(t, s,
		NewTask(noop, Cron("30 2 * * *"), DST("twice"), Name("twice")),
		NewTask(noop, Cron("30 2 * * *"), DST("once,shift"), Name("default")),
		NewTask(noop, Cron("*/30 * * * *"), DST("twice,skip"), Name("elapsed")))
	specs := map[string]string{}
	for _, ti := range s.Tasks() {
		specs[ti.Name] = ti.Spec.DST
	}
	if specs["twice"] != "twice,shift" || specs["default"] != "" || specs["elapsed"] != "twice,skip" {
		t.Errorf("specs' DST %v, want twice,shift, \"\" for the default, twice,skip", specs)
	}
	for policy, want := range map[string]string{
		"thrice":     `option dst = "thrice": must be once or twice, shift or skip, or one of each ("twice,skip"): it "thrice" is none of once, twice`,
		"once,twice": `option dst = "once,twice": must be once or twice, shift or skip, or one of each ("twice,skip"): it names the repeated hour's policy twice`,
		"":           `option dst: must be once or twice`,
	} {
		err := s.Add(NewTask(noop, Cron("30 2 * * *"), DST(policy), Name("bad")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DST(%q): %v, want %q", policy, err, want)
		}
	}
}
