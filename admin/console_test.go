package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// The tasks table's columns, as the page orders them.
const (
	colName = iota
	colCron
	colLock
	colNext
	colPaused
	colLastRun
	colClusterLastRun
)

// consoleOn serves the console page of a real Handler at / and api (the
// admin contract's test fixture, until the Handler serves the control API
// itself) at every other path.
func consoleOn(t *testing.T, api http.Handler) *httptest.Server {
	t.Helper()
	h, err := New(Options{Scheduler: scheduling.New(scheduling.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h)
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// js returns v as a JavaScript literal.
func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cell is the JavaScript expression of the text in column col of the
// named task's row; null while there is no such row.
func cell(t *testing.T, task string, col int) string {
	return fmt.Sprintf(`(() => { const r = [...document.querySelectorAll("#tasks tbody tr")].find(r => r.dataset.task === %s);
		return r ? r.cells[%d].textContent : null })()`, js(t, task), col)
}

// waitFor waits until the JavaScript expression cond is true in the tab,
// and fails the test with what it waited for and the page's state if it
// does not come within 30 seconds.
func waitFor(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("message").textContent + " | " +
			document.getElementById("updated").textContent + " | " + document.getElementById("tasks").tBodies[0].innerText`))
		t.Fatalf("waiting for %s: %v; the page shows: %s", what, err, state)
	}
}

// eval returns the value of the JavaScript expression expr in the tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// do runs chromedp actions in the tab.
func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// act clicks the named task's button for verb, and answers the token
// dialog with token when it is not "".
func act(t *testing.T, tab context.Context, task, verb, token string) {
	t.Helper()
	button := chromedp.CSS(fmt.Sprintf(`#tasks tbody tr[data-task=%s] button[data-action=%q]`, js(t, task), verb))
	do(t, tab, "clicking "+verb+" of "+task, chromedp.Click(button))
	if token != "" {
		do(t, tab, "answering the token dialog", chromedp.WaitVisible(chromedp.ID("token-input")),
			chromedp.SendKeys(chromedp.ID("token-input"), token), chromedp.Click(chromedp.ID("token-ok")))
	}
}

// message waits for the page's status line to show text and reports
// whether it shows it as an error.
func message(t *testing.T, tab context.Context, text string) bool {
	t.Helper()
	waitFor(t, tab, "the message "+text, `document.getElementById("message").textContent === `+js(t, text))
	return eval[bool](t, tab, `document.getElementById("message").className === "error"`)
}

func TestConsolePageHeaders(t *testing.T) {
	h, err := New(Options{Scheduler: scheduling.New(scheduling.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(rec.Body.String(), "<title>ndigo console</title>") {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'sha256-", "style-src 'sha256-", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	// Only / is the page: other paths stay 404.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nothing-here", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %d, want 404", rec.Code)
	}
}

// The page shows the real handler's tasks, mounted under a prefix, with
// names and errors as text, never as markup.
func TestConsoleShowsTheHandlersTasks(t *testing.T) {
	const hostile = `<img src=x onerror="window.pwned=1">`
	s, fc := newScheduler(t,
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
			scheduling.Lock("payroll-window"), scheduling.LockTTL(30*time.Second), scheduling.Name("Payroll.Close")),
		scheduling.NewTask(func(context.Context) error { return fmt.Errorf("<script>window.pwned=2</script>") },
			scheduling.Cron("@every 1s"), scheduling.Name(hostile)),
	)
	if err := schedulingtest.Step(context.Background(), fc, time.Second, 0, s); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Scheduler: s})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tab := browsertest.New(t)
	do(t, tab, "loading the console", chromedp.Navigate(srv.URL+"/admin/"))
	waitFor(t, tab, "both tasks", cell(t, hostile, colName)+` !== null && `+cell(t, "Payroll.Close", colName)+` !== null`)
	for _, c := range []struct {
		task string
		col  int
		want string
	}{
		{"Payroll.Close", colName, "Payroll.Close"},
		{"Payroll.Close", colCron, "@every 1s"},
		{"Payroll.Close", colLock, "payroll-window"},
		{"Payroll.Close", colNext, "2026-01-01T00:00:02Z"},
		{hostile, colName, hostile},
		{hostile, colLock, "-"},
		{hostile, colLastRun, "error on node-a2026-01-01T00:00:01Z<script>window.pwned=2</script>"},
	} {
		if got := eval[string](t, tab, cell(t, c.task, c.col)); got != c.want {
			t.Errorf("%s, column %d: %q, want %q", c.task, c.col, got, c.want)
		}
	}
	if got := eval[string](t, tab, cell(t, "Payroll.Close", colLastRun)); !strings.HasPrefix(got, "ok on node-a, token ") {
		t.Errorf("Payroll.Close's last run: %q, want ok on node-a with its token", got)
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#tasks img, #tasks script").length + (window.pwned || 0)`); n != 0 {
		t.Errorf("a task's name or error ran as markup (%d)", n)
	}
}

// A handler without the control API has no paused or clusterLastRun
// fields: the page says paused is unknown, and shows the rest.
func TestConsoleWithoutControlFields(t *testing.T) {
	old := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"tasks": []map[string]any{
			{"name": "Payroll.Close", "cron": "@every 1s", "lock": "", "next": nil, "lastRun": nil},
		}})
	})
	srv := consoleOn(t, old)
	tab := browsertest.New(t)
	do(t, tab, "loading the console", chromedp.Navigate(srv.URL))
	waitFor(t, tab, "the task", cell(t, "Payroll.Close", colName)+` !== null`)
	if got := eval[string](t, tab, cell(t, "Payroll.Close", colPaused)); got != "unknown" {
		t.Errorf("paused: %q, want unknown", got)
	}
	if got := eval[string](t, tab, cell(t, "Payroll.Close", colClusterLastRun)); got != "-" {
		t.Errorf("the cluster's last run: %q, want -", got)
	}
}

var epoch2 = epoch.Add(time.Hour)

// consoleTasks are the fixture's tasks: one with a history of two runs on
// two nodes, one whose name needs escaping in a URL.
func consoleTasks() []admintest.Task {
	return []admintest.Task{
		{Name: "Payroll.Close", Cron: "@every 1s", Lock: "payroll-window", Next: epoch2.Add(time.Second), Runs: []admintest.Run{
			{Fire: epoch2, Node: "b", Token: 7, Start: epoch2, Duration: 1500 * time.Millisecond, Outcome: "ok"},
			{Fire: epoch2.Add(-time.Second), Manual: true, Node: "a", Token: 6, Start: epoch2.Add(-time.Second),
				Duration: time.Millisecond, Outcome: "error", Error: "books do not balance"},
		}},
		{Name: "billing/export daily", Cron: "@daily", Lock: "export"},
	}
}

// Two nodes' pages over one cluster: a pause clicked on one shows paused
// on the other; a wrong token is refused with the server's message and
// asked again; run and resume go through too.
func TestConsolePauseShowsOnAnotherNode(t *testing.T) {
	const token = "s3cret"
	cluster := admintest.NewCluster(token, consoleTasks()...)
	a, b := consoleOn(t, cluster.Node("a")), consoleOn(t, cluster.Node("b"))
	browser := browsertest.New(t)
	tabA, tabB := browser, browsertest.Tab(t, browser)
	do(t, tabA, "loading node a's console", chromedp.Navigate(a.URL))
	do(t, tabB, "loading node b's console", chromedp.Navigate(b.URL))
	for _, tab := range []context.Context{tabA, tabB} {
		waitFor(t, tab, "Payroll.Close not paused", cell(t, "Payroll.Close", colPaused)+` === "no"`)
	}
	if got, want := eval[string](t, tabA, cell(t, "Payroll.Close", colClusterLastRun)), "ok on b, token 72026-01-01T01:00:00Z"; got != want {
		t.Errorf("node a's page: the cluster's last run %q, want %q", got, want)
	}
	if got, want := eval[string](t, tabA, cell(t, "Payroll.Close", colLastRun)), "error on a, token 6, manual2026-01-01T00:59:59Zbooks do not balance"; got != want {
		t.Errorf("node a's page: its own last run %q, want %q", got, want)
	}

	act(t, tabA, "Payroll.Close", "pause", "wrong-"+token)
	if !message(t, tabA, "pause Payroll.Close: 401 Unauthorized: missing or wrong bearer token") {
		t.Error("the refusal is not shown as an error")
	}
	if task, _ := cluster.Task("Payroll.Close"); task.Paused {
		t.Fatal("paused with a wrong token")
	}
	// The refused token is forgotten: the next click asks again.
	act(t, tabA, "Payroll.Close", "pause", token)
	if message(t, tabA, "Payroll.Close paused: every node skips its fires until it is resumed.") {
		t.Error("the pause is shown as an error")
	}
	waitFor(t, tabA, "node a's page to show Payroll.Close paused", cell(t, "Payroll.Close", colPaused)+` === "paused"`)
	waitFor(t, tabB, "node b's page to show Payroll.Close paused", cell(t, "Payroll.Close", colPaused)+` === "paused"`)

	// Node a's tab kept the accepted token: no dialog this time.
	act(t, tabA, "Payroll.Close", "run", "")
	message(t, tabA, "Run of Payroll.Close requested: one node runs it as soon as it can, under its lock.")
	if n := cluster.RunRequests("Payroll.Close"); n != 1 {
		t.Errorf("%d run requests, want 1", n)
	}
	act(t, tabB, "Payroll.Close", "resume", token)
	message(t, tabB, "Payroll.Close resumed: it runs again from its next fire.")
	waitFor(t, tabA, "node a's page to show Payroll.Close resumed", cell(t, "Payroll.Close", colPaused)+` === "no"`)

	for _, r := range cluster.Requests() {
		if r.Method == http.MethodGet && r.Authorization != "" {
			t.Errorf("GET %s sent the token", r.Path)
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Authorization, "Bearer ") {
			t.Errorf("POST %s sent no bearer token", r.Path)
		}
	}
}

// The history lists the cluster's runs of a task whose name needs
// escaping, and a new run shows on a later refresh.
func TestConsoleHistory(t *testing.T) {
	cluster := admintest.NewCluster("s3cret", consoleTasks()...)
	srv := consoleOn(t, cluster.Node("a"))
	tab := browsertest.New(t)
	do(t, tab, "loading the console", chromedp.Navigate(srv.URL))
	const name = "billing/export daily"
	waitFor(t, tab, "the task", cell(t, name, colName)+` !== null`)
	do(t, tab, "opening the history", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task=`+js(t, name)+`] button.link`)))
	waitFor(t, tab, "no runs yet", `document.getElementById("history-message").textContent === "No runs recorded yet."`)
	if got := eval[string](t, tab, `document.getElementById("history-task").textContent`); got != name {
		t.Errorf("the history is titled %q, want %q", got, name)
	}

	cluster.AddRun(name, admintest.Run{Fire: epoch2, Manual: true, Node: "c", Token: 12, Start: epoch2,
		Duration: 2 * time.Second, Outcome: "error", Error: "export <failed>"})
	rows := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	waitFor(t, tab, "the new run", rows+`.length === 1`)
	want := "2026-01-01T01:00:00Z|manual|c|12|2026-01-01T01:00:00Z|2s|error|export <failed>"
	if got := eval[[]string](t, tab, rows); len(got) != 1 || got[0] != want {
		t.Errorf("history rows %q, want [%q]", got, want)
	}
	var escaped bool
	for _, r := range cluster.Requests() {
		escaped = escaped || (r.Path == "/scheduledtasks/billing%2Fexport%20daily/runs" && r.Task == name)
	}
	if !escaped {
		t.Errorf("no GET of the escaped runs path in %+v", cluster.Requests())
	}
}

// A node without a configured token refuses changes with a message that
// says how to enable them, and the page shows it.
func TestConsoleShowsForbidden(t *testing.T) {
	cluster := admintest.NewCluster("", consoleTasks()...)
	srv := consoleOn(t, cluster.Node("a"))
	tab := browsertest.New(t)
	do(t, tab, "loading the console", chromedp.Navigate(srv.URL))
	waitFor(t, tab, "the task", cell(t, "Payroll.Close", colName)+` !== null`)
	act(t, tab, "Payroll.Close", "pause", "anything")
	if !message(t, tab, "pause Payroll.Close: 403 Forbidden: control endpoints are disabled: no admin token is configured; set admin.token to enable them") {
		t.Error("the refusal is not shown as an error")
	}
}
