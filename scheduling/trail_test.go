package scheduling

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/taskstate"
)

// Every control action made through a scheduler is kept in the trail once,
// in order, with who made it, on which node, its note and what it changed;
// one made again with the key it was first made with is kept once; a key
// or a who the trail cannot keep refuses the action before it is made.
func TestControlActionsAreKeptInTheTrail(t *testing.T) {
	c := newCluster(t)
	noop := func(context.Context) error { return nil }
	c.start(1, func() []Task { return []Task{NewTask(noop, Cron("0 * * * *"), Lock("k"), Name("report"))} })
	s := c.nodes[0]
	var h handled
	if err := s.Handle("tenant-report", h.fn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := By("ops: ndigo CLI (alice)")
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("pause", s.Pause(ctx, "report", ops, WithNote("ledger migration"), WithKey("k-pause")))
	must("pause again with its key", s.Pause(ctx, "report", ops, WithNote("ledger migration"), WithKey("k-pause")))
	must("resume", s.Resume(ctx, "report", By("ci.deploy")))
	must("run", s.RunNow(ctx, "report", ops))
	_, err := s.Backfill(ctx, "report", epoch.Add(-3*3600e9), epoch.Add(-3600e9), BackfillOptions{}, ops)
	must("backfill", err)
	must("cancel", s.CancelBackfill(ctx, "report", ops))
	sc := acmeReport()
	must("create schedule", s.CreateSchedule(ctx, sc, ops))
	sc.Cron = "0 3 * * *"
	must("update schedule", s.UpdateSchedule(ctx, sc, ops))
	must("delete schedule", s.DeleteSchedule(ctx, sc.Name, ops))
	cal := taskstate.Calendar{Name: "holidays", CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25"}}, Note: "closed"}
	must("create calendar", s.CreateCalendar(ctx, cal, ops))
	cal.Dates = append(cal.Dates, "2026-12-26")
	must("update calendar", s.UpdateCalendar(ctx, cal, ops))
	must("delete calendar", s.DeleteCalendar(ctx, "holidays", ops))

	// Refused before the action: the flag stays as it is.
	if err := s.Pause(ctx, "report", By("bad\x01who")); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), `by "bad\x01who"`) {
		t.Errorf("Pause by a who with a control character: %v, want ErrInvalid naming it", err)
	}
	if err := s.RunNow(ctx, "report", WithKey(strings.Repeat("k", taskstate.MaxEventLabelLen+1))); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), "event key") {
		t.Errorf("RunNow with a key too long: %v, want ErrInvalid naming the key", err)
	}
	if p, _ := c.store.Paused(ctx, "report"); p.Paused {
		t.Error("a pause refused by the trail was made")
	}

	evs, err := s.Events(ctx, 0, MaxEvents)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ action, target, actor, before, after string }{
		{"pause", "report", "ops: ndigo CLI (alice)", "", `"paused":true`},
		{"resume", "report", "ci.deploy", "", `"paused":false`},
		{"run", "report", "ops: ndigo CLI (alice)", "", `"requested":`},
		{"backfill", "report", "ops: ndigo CLI (alice)", "", `"state":"running"`},
		{"cancel-backfill", "report", "ops: ndigo CLI (alice)", `"state":"running"`, `"state":"cancelled"`},
		{"create-schedule", sc.Name, "ops: ndigo CLI (alice)", "", `"cron":"@every 1m"`},
		{"update-schedule", sc.Name, "ops: ndigo CLI (alice)", `"cron":"@every 1m"`, `"cron":"0 3 * * *"`},
		{"delete-schedule", sc.Name, "ops: ndigo CLI (alice)", `"cron":"0 3 * * *"`, ""},
		{"create-calendar", "holidays", "ops: ndigo CLI (alice)", "", `"dates":["2026-12-25"]`},
		{"update-calendar", "holidays", "ops: ndigo CLI (alice)", `"dates":["2026-12-25"]`, `"dates":["2026-12-25","2026-12-26"]`},
		{"delete-calendar", "holidays", "ops: ndigo CLI (alice)", `"dates":["2026-12-25","2026-12-26"]`, ""},
	}
	if len(evs) != len(want) {
		for _, e := range evs {
			t.Logf("%d %s %s by %s", e.Seq, e.Action, e.Target, e.Actor)
		}
		t.Fatalf("%d events kept, want %d", len(evs), len(want))
	}
	for i, w := range want {
		e := evs[i]
		if e.Action != w.action || e.Target != w.target || e.Actor != w.actor || e.Node != s.Node() || e.At.IsZero() ||
			(i > 0 && e.Seq <= evs[i-1].Seq) || !strings.Contains(e.Before, w.before) || !strings.Contains(e.After, w.after) ||
			(w.before == "") != (e.Before == "") || (w.after == "") != (e.After == "") {
			t.Errorf("event %d: %+v, want %s %s by %s, before %q, after %q", i, e, w.action, w.target, w.actor, w.before, w.after)
		}
	}
	if evs[0].Key != "k-pause" || evs[0].Note != "ledger migration" || evs[1].Key == "" || evs[1].Key == evs[2].Key {
		t.Errorf("keys %q, %q, %q and note %q: want the key given, else one of each action's own", evs[0].Key, evs[1].Key, evs[2].Key, evs[0].Note)
	}
}
