package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// healthy runs three tasks on a fake clock to 00:01:31: good runs fine,
// bad fails, and stuck's first run is still going past its 30s budget.
func healthy(t *testing.T) *fakenode.Node {
	t.Helper()
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	n.Start(t,
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"), scheduling.Lock("g"), scheduling.Name("good")),
		scheduling.NewTask(func(context.Context) error { return errors.New("ledger locked") }, scheduling.Cron("@every 1m"), scheduling.Lock("b"),
			scheduling.Name("bad")),
		scheduling.NewTask(n.BlockFirst(), scheduling.Cron("@every 1m"), scheduling.Lock("s"), scheduling.Renew(), scheduling.Name("stuck"),
			scheduling.RunBudget(30*time.Second), scheduling.LateAfter(2*time.Minute)),
	)
	n.StepTo(t, time.Minute+31*time.Second)
	return n
}

// GET /scheduledtasks gives each task's health, its options as set, and
// GET /scheduledtasks/{name}/health one task's.
func TestHealthOverHTTP(t *testing.T) {
	n := healthy(t)
	h := quietHandler(t, n.S)
	code, body := get(t, h, "/scheduledtasks")
	if code != http.StatusOK {
		t.Fatalf("GET /scheduledtasks: %d %v", code, body)
	}
	got := map[string]map[string]any{}
	for _, task := range body["tasks"].([]any) {
		m := task.(map[string]any)
		got[m["name"].(string)] = m
	}
	for name, want := range map[string]string{"good": "ok", "bad": "failing", "stuck": "overrun"} {
		if h := got[name]["health"].(map[string]any); h["state"] != want {
			t.Errorf("%s's health %v, want %s", name, h, want)
		}
	}
	if s := got["stuck"]; s["runBudget"] != "30s" || s["lateAfter"] != "2m0s" {
		t.Errorf("stuck's health options %v %v, want runBudget 30s, lateAfter 2m0s", s["runBudget"], s["lateAfter"])
	}
	code, body = get(t, h, "/scheduledtasks/bad/health")
	if code != http.StatusOK || body["task"] != "bad" || body["state"] != "failing" || body["since"] != "2026-01-01T00:01:00Z" ||
		!strings.Contains(body["reason"].(string), "ledger locked") {
		t.Errorf("GET /scheduledtasks/bad/health: %d %v", code, body)
	}
	if code, _ := get(t, h, "/scheduledtasks/nope/health"); code != http.StatusNotFound {
		t.Errorf("GET /scheduledtasks/nope/health: %d, want 404", code)
	}
}

// The console's Health column shows each task's state, coloured by it,
// since when, and why in its title.
func TestConsoleShowsHealth(t *testing.T) {
	n := healthy(t)
	srv := httptest.NewServer(quietHandler(t, n.S))
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
	cell := func(task string) string {
		return `document.querySelector('#tasks tbody tr[data-task="` + task + `"]').cells[9]`
	}
	if got := page.Cell("good", browsertest.ColHealth); got != "ok" {
		t.Errorf("good's health %q, want ok", got)
	}
	if got := page.Cell("bad", browsertest.ColHealth); got != "failingsince 2026-01-01 00:01:00 UTC" {
		t.Errorf("bad's health %q, want failing since 00:01:00", got)
	}
	if got := browsertest.Eval[string](page, cell("bad")+`.className + "|" + `+cell("bad")+`.title`); !strings.HasPrefix(got, "health health-failing|") ||
		!strings.Contains(got, "ledger locked") {
		t.Errorf("bad's health cell %q, want class health-failing and the error in its title", got)
	}
	if got := page.Cell("stuck", browsertest.ColHealth); got != "overrunsince 2026-01-01 00:01:30 UTC" {
		t.Errorf("stuck's health %q, want overrun since 00:01:30", got)
	}
	if got := browsertest.Eval[string](page, `document.querySelector("#tasks thead tr").cells[9].textContent`); got != "Health" {
		t.Errorf("column 9 is %q, want Health", got)
	}
}
