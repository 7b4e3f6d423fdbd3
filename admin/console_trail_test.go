package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/scheduling"
)

// trailRows is the JavaScript expression of the console's trail, a row
// each, top first: its time, actor, action, target, note and node cells,
// "|" between.
const trailRows = `[...document.querySelectorAll("#trail tbody tr")].map(r => [...r.cells].slice(0, 6).map(c => c.textContent).join("|"))`

// trailRow is the JavaScript expression of the trail's row of the action
// numbered seq.
func trailRow(seq int) string {
	return fmt.Sprintf(`document.querySelector('#trail tbody tr[data-seq="%d"]')`, seq)
}

// eventsAsked serves h, and keeps the after of each GET /events.
type eventsAsked struct {
	h     http.Handler
	mu    sync.Mutex
	after []string
}

func (e *eventsAsked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/events" {
		e.mu.Lock()
		e.after = append(e.after, r.URL.Query().Get("after"))
		e.mu.Unlock()
	}
	e.h.ServeHTTP(w, r)
}

// distinct returns the afters asked, each once, in the order first asked.
func (e *eventsAsked) distinct() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, a := range e.after {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// rawAfter returns the compacted JSON of what the action numbered seq made,
// as GET /events gives it.
func rawAfter(t *testing.T, h http.Handler, seq int64) string {
	t.Helper()
	code, body := serve(t, h, "GET", "/events", "", "")
	var list struct {
		Events []struct {
			Seq   int64           `json:"seq"`
			After json.RawMessage `json:"after"`
		} `json:"events"`
	}
	if err := json.Unmarshal(body, &list); err != nil || code != http.StatusOK {
		t.Fatalf("GET /events: %d %s", code, body)
	}
	for _, e := range list.Events {
		if e.Seq == seq {
			var b bytes.Buffer
			if err := json.Compact(&b, e.After); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
	}
	t.Fatalf("GET /events lists no action %d: %s", seq, body)
	return ""
}

// The console's Trail panel lists the control actions made through the
// handler with two named tokens, newest first: time, actor, action,
// target, note and node; what an action replaced and made shows on demand,
// an integer beyond 2^53 in it unrounded. An action made while the page is
// open shows at its next load, which asks only for the actions after the
// last one listed; a note of markup shows as text.
func TestConsoleTrail(t *testing.T) {
	n := nightlyNode(t)
	if err := n.S.Handle("sweep", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Scheduler: n.S, Tokens: map[string]Token{"ops": "ops-token", "ci.deploy": "ci-token"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	minute := 0
	act := func(method, path, token, body string) {
		t.Helper()
		if code, answer := serve(t, h, method, path, token, body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, code, answer)
		}
		minute++
		n.StepTo(t, time.Duration(minute)*time.Minute)
	}
	act("POST", "/scheduledtasks/nightly/run", "ci-token", "")
	act("POST", "/scheduledtasks/nightly/pause", "ops-token", `{"note": "ledger migration\nback at 14:00"}`)
	act("POST", "/calendars", "ci-token", `{"name": "holidays", "dates": ["2026-12-25"]}`)
	act("POST", "/schedules", "ops-token", `{"name": "sweep", "handler": "sweep", "cron": "@daily", "args": {"id": 9007199254740993}}`)
	act("PUT", "/schedules/sweep", "ci-token", `{"name": "sweep", "handler": "sweep", "cron": "@hourly", "args": {"id": 9007199254740993}}`)
	act("POST", "/scheduledtasks/nightly/resume", "ops-token", `{"note": "migrated", "by": "alice"}`)

	asked := &eventsAsked{h: h}
	srv := httptest.NewServer(asked)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
	page.WaitFor("the trail", trailRows+`.length > 0`)
	want := []string{
		"2026-01-01 00:05:00 UTC|ops: alice|resume|nightly|migrated|node-a",
		"2026-01-01 00:04:00 UTC|ci.deploy|update-schedule|sweep|-|node-a",
		"2026-01-01 00:03:00 UTC|ops|create-schedule|sweep|-|node-a",
		"2026-01-01 00:02:00 UTC|ci.deploy|create-calendar|holidays|-|node-a",
		"2026-01-01 00:01:00 UTC|ops|pause|nightly|ledger migration\nback at 14:00|node-a",
		"2026-01-01 00:00:00 UTC|ci.deploy|run|nightly|-|node-a",
	}
	if got := browsertest.Eval[[]string](page, trailRows); !slices.Equal(got, want) {
		t.Errorf("the trail shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// What the update replaced and made, on demand, as the API gives it.
	update := trailRow(5)
	if got := browsertest.Eval[string](page, update+`.cells[6].querySelector("summary").textContent + "|" + `+update+`.cells[6].querySelector("details").open`); got != "before / after|false" {
		t.Errorf("the update's before and after: %q, want them folded under %q", got, "before / after")
	}
	page.Do("unfolding the update's before and after", chromedp.Click(chromedp.CSS(`#trail tbody tr[data-seq="5"] summary`)))
	values := browsertest.Eval[[]string](page, `[...`+update+`.querySelectorAll("details pre")].map(p => p.textContent)`)
	if after := rawAfter(t, h, 5); len(values) != 2 || values[1] != after || !strings.Contains(after, `"id":9007199254740993`) ||
		!strings.Contains(values[0], `"cron":"@daily"`) || !strings.Contains(values[0], `"id":9007199254740993`) {
		t.Errorf("the update's before and after %q, want the @daily spec, then %s, the id unrounded", values, after)
	}
	if !browsertest.Eval[bool](page, `document.getElementById("trail-dropped").hidden && document.getElementById("trail-message").hidden`) {
		t.Error("the trail says it dropped actions, or shows a message")
	}

	// An action made while the page is open shows at its next load, the
	// page not reloaded; a note of markup is text.
	browsertest.Eval[bool](page, `window.notReloaded = true`)
	const markup = `<img src=x onerror="document.title='xss'">`
	act("POST", "/scheduledtasks/nightly/pause", "ci-token", `{"note": `+browsertest.JS(t, markup)+`}`)
	page.WaitFor("the pause with markup", trailRows+`.length === 7`)
	want = append([]string{"2026-01-01 00:06:00 UTC|ci.deploy|pause|nightly|" + markup + "|node-a"}, want...)
	if got := browsertest.Eval[[]string](page, trailRows); !slices.Equal(got, want) {
		t.Errorf("the trail shows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !browsertest.Eval[bool](page, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}
	if got := browsertest.Eval[int](page, `document.querySelectorAll("#trail img, #trail [onerror]").length`); got != 0 {
		t.Errorf("the note's markup made %d elements in the trail, want none", got)
	}
	act("POST", "/scheduledtasks/nightly/resume", "ops-token", "")
	page.WaitFor("the resume", trailRows+`.length === 8`)
	if got := browsertest.Eval[string](page, trailRows+`[0]`); got != "2026-01-01 00:07:00 UTC|ops|resume|nightly|-|node-a" {
		t.Errorf("the trail's top row %q, want the resume by ops", got)
	}
	// Each load asks for the actions after the newest one listed: once
	// from the start, then after 6, then after 7 (and after 8 if a load
	// ran since).
	if got := asked.distinct(); !slices.Equal(got, []string{"0", "6", "7"}) && !slices.Equal(got, []string{"0", "6", "7", "8"}) {
		t.Errorf("GET /events asked with after %q, want 0 once, then 6, then 7", got)
	}
	asked.mu.Lock()
	defer asked.mu.Unlock()
	if got := slices.Index(asked.after[1:], "0"); got >= 0 {
		t.Errorf("GET /events asked again from the start, at its load %d: %q", got+2, asked.after)
	}
}

// A long trail shows its newest actions at the first load, at most 200,
// and says how many older ones it does not show; a new action pushes the
// oldest row out.
func TestConsoleTrailKeepsTheNewest(t *testing.T) {
	n := nightlyNode(t)
	ctx := context.Background()
	const actions = 1205 // more than a GET /events lists at once
	for i := range actions {
		control := n.S.Pause
		if i%2 == 1 {
			control = n.S.Resume
		}
		if err := control(ctx, "nightly", scheduling.By("ops"), scheduling.WithNote(fmt.Sprint("action ", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	_, page := nightlyConsole(t, n)
	page.WaitFor("the trail", trailRows+`.length > 0`)
	rows := browsertest.Eval[[]string](page, trailRows)
	if len(rows) != 200 || !strings.HasSuffix(rows[0], "|pause|nightly|action 1205|node-a") || !strings.HasSuffix(rows[199], "|resume|nightly|action 1006|node-a") {
		t.Errorf("the trail shows %d rows, from %q to %q; want 200, from action 1205 to 1006", len(rows), rows[0], rows[len(rows)-1])
	}
	dropped := `document.getElementById("trail-dropped")`
	if got := browsertest.Eval[string](page, `(`+dropped+`.hidden ? "hidden: " : "") + `+dropped+`.textContent`); got !=
		"1005 older actions are not shown: the page keeps the newest 200; ndigo events lists them all." {
		t.Errorf("the trail says %q", got)
	}

	// One more: it shows on top, and the oldest row goes.
	if err := n.S.Resume(ctx, "nightly", scheduling.By("ops"), scheduling.WithNote("action 1206")); err != nil {
		t.Fatal(err)
	}
	page.WaitFor("action 1206", trailRows+`[0].endsWith("|resume|nightly|action 1206|node-a")`)
	rows = browsertest.Eval[[]string](page, trailRows)
	if len(rows) != 200 || !strings.HasSuffix(rows[199], "|pause|nightly|action 1007|node-a") {
		t.Errorf("the trail shows %d rows, to %q; want 200, to action 1007", len(rows), rows[len(rows)-1])
	}
	if got := browsertest.Eval[string](page, dropped+`.textContent`); !strings.HasPrefix(got, "1006 older actions are not shown") {
		t.Errorf("the trail says %q, want 1006 not shown", got)
	}
}

// A node without a task state keeps no trail: the panel says so, in the
// muted colour of what a node does not have, and no error shows.
func TestConsoleTrailNotKept(t *testing.T) {
	s, _ := newScheduler(t)
	srv := httptest.NewServer(quietHandler(t, s))
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
	msg := `document.getElementById("trail-message")`
	page.WaitFor("the trail's message", `!`+msg+`.hidden`)
	if got := browsertest.Eval[string](page, msg+`.className + "|" + `+msg+`.textContent`); got !=
		"none|This node keeps no trail of control actions: 501 Not Implemented: scheduling: no task state store: the trail of control actions is kept in the task state" {
		t.Errorf("the trail panel says %q", got)
	}
	if got := browsertest.Eval[string](page, color(t, "#trail-message", "color")); got == "rgb(185, 28, 28)" {
		t.Errorf("the trail's message is red, %s", got)
	}
	hidden := `["trail", "trail-empty", "trail-dropped", "message", "health"].filter(id => !document.getElementById(id).hidden)`
	if got := browsertest.Eval[[]string](page, hidden); len(got) != 0 {
		t.Errorf("%q shown, want none: no table, no error banner", got)
	}
}
