package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// flagDown is a task state whose paused flags and polls fail while down is
// set, as a store that went away would: fires then fail on their flag.
type flagDown struct {
	taskstate.Store
	down atomic.Bool
}

var errFlagDown = errors.New("store down")

func (f *flagDown) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	if f.down.Load() {
		return taskstate.Pause{}, errFlagDown
	}
	return f.Store.Paused(ctx, task)
}

func (f *flagDown) Poll(ctx context.Context) (taskstate.Poll, error) {
	if f.down.Load() {
		return taskstate.Poll{}, errFlagDown
	}
	return f.Store.Poll(ctx)
}

// A browser in Asia/Kolkata shows the node, its driver and its cron zone
// in the header; times in its own zone, named, with UTC on hover; the
// cluster's last fires as a strip coloured by outcome; and a task's page
// (#task=NAME) with the audit (counts, a strip, a row per failed fire) and
// the fires recorded, the failed ones among them.
func TestConsoleTaskPage(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(100)
	store := &flagDown{Store: inner}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", State: store, Location: paris,
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Logger: slog.New(slog.DiscardHandler)})
	var n atomic.Int32
	if err := s.Add(scheduling.NewTask(func(context.Context) error {
		if n.Add(1) == 2 {
			return errors.New("ledger locked")
		}
		return nil
	}, scheduling.Cron("@every 1m"), scheduling.Lock("k"), scheduling.Name("report"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	step := func(d time.Duration) {
		t.Helper()
		if err := schedulingtest.Step(context.Background(), fc, d, 10*time.Second, s); err != nil {
			t.Fatal(err)
		}
	}
	step(3 * time.Minute) // 00:01 ok, 00:02 error, 00:03 ok
	store.down.Store(true)
	step(2 * time.Minute) // 00:04, 00:05 fail on the flag
	store.down.Store(false)
	step(4 * time.Minute) // past the audit's horizon for 00:05

	h, err := New(Options{Scheduler: s})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.NewInZone(t, "Asia/Kolkata"), srv.URL+"/#task=report")

	if got := browsertest.Eval[string](page, `document.getElementById("node").textContent`); got != "node-a · locks.InProcessDriver (this process only) · cron zone Europe/Paris" {
		t.Errorf("header %q, want the node, the driver and the zone", got)
	}
	if got := page.Cell("report", browsertest.ColNext); got != "2026-01-01 05:40:00 GMT+5:30" {
		t.Errorf("next fire %q, want 00:10 UTC in Kolkata's time", got)
	}
	next := `document.querySelector('#tasks tbody tr[data-task="report"]').cells[3].querySelector("time")`
	if got := browsertest.Eval[string](page, next+`.title`); got != "UTC 2026-01-01T00:10:00Z" {
		t.Errorf("next fire's title %q, want the UTC instant", got)
	}
	rects := `[...document.querySelector('#tasks tbody tr[data-task="report"]').cells[6].querySelectorAll("svg.strip rect")]`
	if got := browsertest.Eval[string](page, rects+`.map(r => r.getAttribute("class")).join(" ")`); got != "s-ok s-error s-ok s-failed s-failed s-ok s-ok s-ok s-ok" {
		t.Errorf("strip of the cluster's fires: %q, want them oldest first, coloured by outcome", got)
	}
	if got := browsertest.Eval[string](page, rects+`[3].textContent`); !strings.HasPrefix(got, "failed: lock · 2026-01-01 05:34:00 GMT+5:30 · node-a · reading whether the task is paused") {
		t.Errorf("the failed fire's tooltip %q, want its outcome, local time, node and error", got)
	}

	page.WaitFor("the task's page", `!document.getElementById("history").hidden && document.getElementById("history-task").textContent === "report"`)
	page.WaitFor("the audit", `document.getElementById("audit-summary").textContent.includes("missed")`)
	if got := browsertest.Eval[string](page, `document.getElementById("audit-summary").textContent`); !strings.Contains(got, ": 7 ran · 0 skipped · 2 failed · 0 missed") ||
		!strings.HasPrefix(got, "From 2026-01-01 05:31:00 GMT+5:30 to ") {
		t.Errorf("audit summary %q, want from the first fire, 7 ran and 2 failed", got)
	}
	rows := `[...document.querySelectorAll("#audit tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	got := browsertest.Eval[[]string](page, rows)
	if len(got) != 2 || !strings.HasPrefix(got[0], "2026-01-01 05:35:00 GMT+5:30|failed|failed: lock|node-a|reading whether the task is paused") {
		t.Errorf("audit rows %q, want the two failed fires, newest first", got)
	}
	if n := browsertest.Eval[int](page, `document.querySelectorAll("#audit-strip svg rect.s-failed").length`); n != 2 {
		t.Errorf("%d failed instants in the audit's strip, want 2", n)
	}
	runs := `[...document.querySelectorAll("#runs tbody tr")].map(r => r.cells[7].textContent + "|" + r.cells[6].textContent)`
	if got := browsertest.Eval[[]string](page, runs); len(got) != 9 || got[4] != "failed: lock|-" || got[7] != "error|0 s" {
		t.Errorf("fires recorded %q, want 9, the failed ones without a duration", got)
	}
	if n := browsertest.Eval[int](page, `document.querySelectorAll("#durations svg.chart rect.bar").length`); n != 7 {
		t.Errorf("%d bars in the durations chart, want one per run, 7", n)
	}
	page.Do("closing the task's page", chromedp.Click(chromedp.ID("history-close")))
	page.WaitFor("the page closed", `document.getElementById("history").hidden && location.hash === ""`)
}
