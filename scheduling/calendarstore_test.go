package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// defineCalendar creates c in store through a scheduler that is not
// started, as a deploy's first node would before Start.
func defineCalendar(t *testing.T, c *cluster, cal taskstate.Calendar) {
	t.Helper()
	s := New(Config{Clock: c.fc, State: c.store, Logger: slog.New(c.logs), Node: "admin"})
	if err := s.CreateCalendar(context.Background(), cal); err != nil {
		t.Fatal(err)
	}
}

// minutesOf returns the minutes of the hour of fires.
func minutesOf(fires []time.Time) []int {
	var out []int
	for _, f := range fires {
		out = append(out, f.Minute())
	}
	slices.Sort(out)
	return out
}

// A fire a calendar excludes runs on no node, is recorded once as
// excluded by its calendar, and the audit shows it excluded, not missed;
// an update of the calendar on one node applies on every node from an
// instant they agree on.
func TestCalendarExcludesFiresInTheCluster(t *testing.T) {
	c := newCluster(t)
	defineCalendar(t, c, taskstate.Calendar{Name: "maintenance", CalendarRules: taskstate.CalendarRules{Windows: []string{"00:02-00:04"}}})
	var f fires
	c.start(3, func() []Task {
		return []Task{NewTask(f.task, Cron("@every 1m"), Lock("k"), Name("t"), Calendar("maintenance"))}
	})
	c.step(6*time.Minute, time.Second)
	if got := minutesOf(f.list()); !slices.Equal(got, []int{1, 4, 5, 6}) {
		t.Fatalf("runs at minutes %v, want 1, 4, 5, 6: 2 and 3 are in the calendar's window", got)
	}
	runs, err := c.store.Runs(context.Background(), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var excluded []int
	for _, r := range runs {
		if r.Outcome == string(OutcomeExcluded) {
			if r.Error != "calendar maintenance" {
				t.Fatalf("excluded record %+v, want error %q", r, "calendar maintenance")
			}
			excluded = append(excluded, r.Fire.Minute())
		}
	}
	if slices.Sort(excluded); !slices.Equal(excluded, []int{2, 3}) {
		t.Fatalf("excluded records at minutes %v, want 2 and 3, once each: %+v", excluded, runs)
	}
	a, err := c.nodes[1].Audit(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if a.Missed != 0 || a.Excluded != 2 {
		t.Fatalf("audit %+v, want 2 excluded and none missed", a)
	}

	// At 00:06, the window moves to 00:08-00:09 from another node.
	up := taskstate.Calendar{Name: "maintenance", CalendarRules: taskstate.CalendarRules{Windows: []string{"00:08-00:09"}}}
	if err := c.nodes[2].UpdateCalendar(context.Background(), up); err != nil {
		t.Fatal(err)
	}
	c.step(4*time.Minute, time.Second)
	if got := minutesOf(f.list()); !slices.Equal(got, []int{1, 4, 5, 6, 7, 9, 10}) {
		t.Fatalf("runs at minutes %v, want 7, 9 and 10 after the update: 8 is in the new window", got)
	}
	cals, err := c.nodes[0].Calendars(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cals) != 1 || !slices.Equal(cals[0].Windows, up.Windows) || !slices.Equal(cals[0].UsedBy, []string{"task t"}) {
		t.Fatalf("Calendars = %+v, want maintenance with the new window, used by task t", cals)
	}
	if s, _ := c.nodes[0].Schedules(context.Background()); len(s) != 0 {
		t.Fatalf("Schedules = %+v: a calendar's document is not a schedule", s)
	}
}

// A calendar is refused where it would leave a fire unjudged: a task
// naming one that is not defined fails Start (code) or is refused
// (stored); a calendar in use cannot be deleted; bad rules name the field.
func TestCalendarRules(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	s := New(Config{Driver: c.driver, Clock: c.fc, State: c.store, Logger: slog.New(c.logs), Node: "node-a"})
	defer s.Stop(ctx)
	mustAdd(t, s, NewTask(noop, Cron("@daily"), Lock("k"), Name("payroll"), Calendar("eu-holidays")))
	var ve *ValidationError
	if err := s.Start(); !errors.As(err, &ve) || !strings.Contains(err.Error(), `calendar "eu-holidays" is not defined`) {
		t.Fatalf("Start with an undefined calendar = %v, want a ValidationError naming it", err)
	}
	if err := s.CreateCalendar(ctx, taskstate.Calendar{Name: "eu-holidays", CalendarRules: taskstate.CalendarRules{
		Dates: []string{"2026-12-25"}, Include: []string{"weekends"}}}); !errors.Is(err, ErrUnknownCalendar) || !strings.Contains(err.Error(), "weekends") {
		t.Fatalf("CreateCalendar including an undefined calendar = %v, want ErrUnknownCalendar naming it", err)
	}
	if err := s.CreateCalendar(ctx, taskstate.Calendar{Name: "weekends", CalendarRules: taskstate.CalendarRules{
		Weekdays: []string{"sat", "sundy"}}}); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), `weekdays[1]`) ||
		!strings.Contains(err.Error(), "sundy") {
		t.Fatalf("CreateCalendar with a bad weekday = %v, want ErrInvalid naming weekdays[1] and the value", err)
	}
	for _, cal := range []taskstate.Calendar{
		{Name: "weekends", CalendarRules: taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}}},
		{Name: "eu-holidays", CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25"}, Include: []string{"weekends"}}},
	} {
		if err := s.CreateCalendar(ctx, cal); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateCalendar(ctx, taskstate.Calendar{Name: "weekends"}); !errors.Is(err, ErrCalendarExists) {
		t.Fatalf("CreateCalendar of a defined name = %v, want ErrCalendarExists", err)
	}
	mustStart(t, s)
	if err := s.DeleteCalendar(ctx, "weekends"); !errors.Is(err, ErrCalendarInUse) || !strings.Contains(err.Error(), "calendar eu-holidays") {
		t.Fatalf("DeleteCalendar of an included calendar = %v, want ErrCalendarInUse naming eu-holidays", err)
	}
	if err := s.DeleteCalendar(ctx, "eu-holidays"); !errors.Is(err, ErrCalendarInUse) || !strings.Contains(err.Error(), "task payroll") {
		t.Fatalf("DeleteCalendar of a calendar a task names = %v, want ErrCalendarInUse naming the task", err)
	}
	if err := s.Handle("report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	sc := taskstate.Schedule{Name: "r", Handler: "report", Cron: "@daily", Lock: "r", Options: map[string]string{"calendar": "us-holidays"}}
	if err := s.CreateSchedule(ctx, sc); !errors.Is(err, ErrUnknownCalendar) || !strings.Contains(err.Error(), "us-holidays") {
		t.Fatalf("CreateSchedule naming an undefined calendar = %v, want ErrUnknownCalendar naming it", err)
	}
	if err := s.DeleteCalendar(ctx, "nope"); !errors.Is(err, ErrUnknownCalendar) {
		t.Fatalf("DeleteCalendar of an undefined calendar = %v, want ErrUnknownCalendar", err)
	}
	if err := s.CreateSchedule(ctx, taskstate.Schedule{Name: calendarPrefix + "x", Handler: "report", Cron: "@daily"}); !errors.Is(err, taskstate.ErrInvalid) {
		t.Fatalf("CreateSchedule with the calendars' prefix = %v, want ErrInvalid", err)
	}
}

// Bounds: a task fires from its startAt, only before its endAt, and is
// then completed: listed, with no next fire.
func TestBoundsAndCompleted(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1m"), Name("t"), StartAt("2026-01-01T00:03"), EndAt("2026-01-01T00:06:00Z")))
	mustStart(t, s)
	step(t, fc, 10*time.Minute, time.Second, s)
	if got := minutesOf(f.list()); !slices.Equal(got, []int{3, 4, 5}) {
		t.Fatalf("runs at minutes %v, want 3, 4 and 5: from startAt, before endAt", got)
	}
	if ti := s.Tasks(); len(ti) != 1 || !ti[0].Completed || !ti[0].Next.IsZero() {
		t.Fatalf("tasks %+v, want t completed, with no next fire", ti)
	}
}

func TestVocabularyValidation(t *testing.T) {
	s, _, _, _ := newTest(t, false)
	err := s.Add(NewTask(noop, Cron("@daily"), Name("a"), StartAt("2027-01-15"), EndAt("2027-01-01")),
		NewTask(noop, Cron("@daily"), Name("b"), MaxRuns(3)),
		NewTask(noop, Cron("@daily"), Name("c"), StartAt("tomorrow")),
		NewTask(noop, Cron("@daily"), Name("d"), Calendar("x")),
		NewTask(noop, Cron("@daily"), Name("e"), PauseAfterFailures(0)))
	for _, want := range []string{"endAt", "must be after startAt", "maxRuns", "needs lock", `"tomorrow"`, "must be an RFC 3339 instant",
		"calendar", "needs a task state store", "pauseAfterFailures", "must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Add = %v, want it to say %q", err, want)
		}
	}
}

// The preview lists the next instants with their jitter, what a calendar
// excludes, what DST does, and ends at the task's end.
func TestNextFires(t *testing.T) {
	c := newCluster(t)
	defineCalendar(t, c, taskstate.Calendar{Name: "weekends", CalendarRules: taskstate.CalendarRules{Weekdays: []string{"sat", "sun"}}})
	c.start(1, func() []Task {
		return []Task{
			NewTask(noop, Cron("CRON_TZ=Europe/Paris 30 2 * * *"), Lock("k"), Name("night"), Calendar("weekends"),
				StartAt("2026-03-27"), EndAt("2026-03-31")),
			NewTask(noop, Cron("CRON_TZ=Europe/Paris 30 2 * * *"), Name("twice"), DST("twice"), StartAt("2026-10-24")),
			NewTask(noop, Cron("@every 1m"), Name("jittered"), Jitter(30*time.Second)),
		}
	})
	s := c.nodes[0]
	got, err := s.NextFires("night", 10)
	if err != nil {
		t.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	var lines []string
	for _, f := range got {
		lines = append(lines, f.Fire.In(paris).Format("Mon 01-02 15:04")+" "+f.Skip+"|"+f.DST)
	}
	want := []string{
		"Fri 03-27 02:30 |",
		"Sat 03-28 02:30 excluded: calendar weekends|",
		"Sun 03-29 03:00 excluded: calendar weekends|shifted to 03:00: the wall time it names is skipped by clocks springing forward (dst shift)",
		"Mon 03-30 02:30 |",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("NextFires(night) =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	got, err = s.NextFires("twice", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].DST == "" || got[2].DST == "" || got[1].Fire.In(paris).Hour() != 2 || got[0].DST != "" {
		t.Fatalf("NextFires(twice) = %+v, want the 25 October 02:30 twice, noted", got)
	}
	got, err = s.NextFires("jittered", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		if f.Start.Before(f.Fire) || !f.Start.Before(f.Fire.Add(30*time.Second)) || f.Skip != "" {
			t.Fatalf("NextFires(jittered) = %+v, want each start within 30s after its fire", got)
		}
	}
	if _, err := s.NextFires("night", 0); err == nil || !strings.Contains(err.Error(), "n 0 must be in [1, 1000]") {
		t.Fatalf("NextFires(night, 0) = %v, want the rule", err)
	}
}

// A task with pauseAfterFailures 3 is paused after its third failed fire
// in a row, whatever node ran each, and not before.
func TestPauseAfterFailures(t *testing.T) {
	c := newCluster(t)
	var calls atomic.Int32
	fail := func(context.Context) error {
		if calls.Add(1) == 2 {
			return nil // the second fire succeeds: the count starts again
		}
		return errors.New("ledger down")
	}
	c.start(2, func() []Task {
		return []Task{NewTask(fail, Cron("@every 1m"), Lock("k"), Name("t"), PauseAfterFailures(3))}
	})
	c.step(4*time.Minute, time.Second)
	if p, _ := c.store.Paused(context.Background(), "t"); p.Paused {
		t.Fatalf("paused after fires failed, succeeded, failed, failed: want 3 failures in a row first")
	}
	c.step(time.Minute, time.Second)
	if p, _ := c.store.Paused(context.Background(), "t"); !p.Paused || p.By != "scheduler" || !strings.Contains(p.Note, "3 failed fires in a row") || !strings.Contains(p.Note, "ledger down") {
		t.Fatalf("pause %+v after 3 failed fires in a row, want paused by the scheduler with a note that says so", p)
	}
	before := calls.Load()
	c.step(3*time.Minute, time.Second)
	if n := calls.Load(); n != before {
		t.Fatalf("%d runs after the automatic pause", n-before)
	}
}

// A task with maxRuns 5 runs 5 times in the cluster, whatever node runs
// each, and is then completed on every node.
func TestMaxRunsInTheCluster(t *testing.T) {
	c := newCluster(t)
	var f fires
	c.start(3, func() []Task {
		return []Task{NewTask(f.task, Cron("@every 1m"), Lock("k"), Name("t"), MaxRuns(5))}
	})
	c.step(10*time.Minute, time.Second)
	if got := minutesOf(f.list()); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("runs at minutes %v, want 1 to 5, once each", got)
	}
	for i, s := range c.nodes {
		if ti := s.Tasks(); !ti[0].Completed {
			t.Fatalf("node-%d's task %+v, want completed", i, ti[0])
		}
		if nf, err := s.NextFires("t", 2); err != nil || len(nf) != 2 || nf[0].Skip != "beyond maxRuns" {
			t.Fatalf("node-%d's NextFires = %+v, %v; want each beyond maxRuns", i, nf, err)
		}
	}
}

// The task list's next fire is the preview's first that runs, which
// nextRun computes (the function the property test checks against a
// brute-force walk).
func TestNextIsTheFirstFireThatRuns(t *testing.T) {
	c := newCluster(t)
	defineCalendar(t, c, taskstate.Calendar{Name: "nights", CalendarRules: taskstate.CalendarRules{
		Windows: []string{"20:00-08:00"}, Weekdays: []string{"wed"}}})
	c.start(1, func() []Task {
		return []Task{NewTask(noop, Cron("CRON_TZ=America/New_York 0 * * * *"), Lock("k"), Name("hourly"), Calendar("nights"))}
	})
	s := c.nodes[0]
	for range 3 {
		nf, err := s.NextFires("hourly", MaxNextFires)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(nf, func(f NextFire) bool { return f.Skip == "" })
		if ti := s.Tasks(); i < 0 || !ti[0].Next.Equal(nf[i].Fire) {
			t.Fatalf("Tasks' next %v, want the preview's first fire that runs (%d skipped before it): %+v", ti[0].Next, i, nf[:i+1])
		}
		c.step(36*time.Hour, time.Hour)
	}
}
