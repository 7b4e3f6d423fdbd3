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
	"github.com/ndigo/ndigo/internal/redisnode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
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
	// Only / is the page: other paths stay 404, and a path no route takes
	// answers JSON, as the API does (405 keeping Allow).
	for _, c := range []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodGet, "/nothing-here", http.StatusNotFound, "no route for GET /nothing-here"},
		{http.MethodPost, "/locks", http.StatusMethodNotAllowed, "POST is not allowed on /locks (allowed: GET, HEAD)"},
	} {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		var body ErrorJSON
		err := json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.code || rec.Header().Get("Content-Type") != "application/json" || err != nil || body.Error != c.want {
			t.Errorf("%s %s: %d %q %q, %v; want %d with the JSON error %q", c.method, c.path, rec.Code,
				rec.Header().Get("Content-Type"), rec.Body.String(), err, c.code, c.want)
		}
		if c.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
			t.Errorf("%s %s: no Allow header", c.method, c.path)
		}
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

	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/admin/")
	for _, c := range []struct {
		task string
		col  browsertest.Column
		want string
	}{
		{"Payroll.Close", browsertest.ColName, "Payroll.Close"},
		{"Payroll.Close", browsertest.ColCron, "@every 1s"},
		{"Payroll.Close", browsertest.ColLock, "payroll-window"},
		{"Payroll.Close", browsertest.ColNext, "2026-01-01T00:00:02Z"},
		{hostile, browsertest.ColName, hostile},
		{hostile, browsertest.ColLock, "-"},
		{hostile, browsertest.ColLastRun, "error on node-a2026-01-01T00:00:01Z<script>window.pwned=2</script>"},
	} {
		if got := page.Cell(c.task, c.col); got != c.want {
			t.Errorf("%s, column %d: %q, want %q", c.task, c.col, got, c.want)
		}
	}
	if got := page.Cell("Payroll.Close", browsertest.ColLastRun); !strings.HasPrefix(got, "ok on node-a, token ") {
		t.Errorf("Payroll.Close's last run: %q, want ok on node-a with its token", got)
	}
	if n := browsertest.Eval[int](page, `document.querySelectorAll("#tasks img, #tasks script").length + (window.pwned || 0)`); n != 0 {
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
	page := browsertest.OpenConsole(t, browsertest.New(t), consoleOn(t, old).URL)
	if got := page.Cell("Payroll.Close", browsertest.ColPaused); got != "unknown" {
		t.Errorf("paused: %q, want unknown", got)
	}
	if got := page.Cell("Payroll.Close", browsertest.ColClusterLastRun); got != "-" {
		t.Errorf("the cluster's last run: %q, want -", got)
	}
}

// wantMessage checks that the page's status line shows want, as an error
// or not.
func wantMessage(t *testing.T, page *browsertest.Console, want string, isError bool) {
	t.Helper()
	if got, gotError := page.Message(want); got != want || gotError != isError {
		t.Errorf("the page says %q (as an error: %v), want %q (%v)", got, gotError, want, isError)
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
	browser := browsertest.New(t)
	pageA := browsertest.OpenConsole(t, browser, consoleOn(t, cluster.Node("a")).URL)
	pageB := browsertest.OpenConsole(t, browsertest.Tab(t, browser), consoleOn(t, cluster.Node("b")).URL)
	for _, page := range []*browsertest.Console{pageA, pageB} {
		page.WaitCell("Payroll.Close not paused", "Payroll.Close", browsertest.ColPaused, "no")
	}
	if got, want := pageA.Cell("Payroll.Close", browsertest.ColClusterLastRun), "ok on b, token 72026-01-01T01:00:00Z"; got != want {
		t.Errorf("node a's page: the cluster's last run %q, want %q", got, want)
	}
	if got, want := pageA.Cell("Payroll.Close", browsertest.ColLastRun), "error on a, token 6, manual2026-01-01T00:59:59Zbooks do not balance"; got != want {
		t.Errorf("node a's page: its own last run %q, want %q", got, want)
	}

	pageA.Act("Payroll.Close", "pause", "wrong-"+token)
	wantMessage(t, pageA, "pause Payroll.Close: 401 Unauthorized: "+admintest.WrongTokenMessage, true)
	if task, _ := cluster.Task("Payroll.Close"); task.Paused {
		t.Fatal("paused with a wrong token")
	}
	// The refused token is forgotten: the next click asks again.
	pageA.Act("Payroll.Close", "pause", token)
	wantMessage(t, pageA, "Payroll.Close paused: every node skips its fires until it is resumed.", false)
	pageA.WaitCell("node a's page to show Payroll.Close paused", "Payroll.Close", browsertest.ColPaused, "paused")
	pageB.WaitCell("node b's page to show Payroll.Close paused", "Payroll.Close", browsertest.ColPaused, "paused")

	// Node a's tab kept the accepted token: no dialog this time.
	pageA.Act("Payroll.Close", "run", "")
	wantMessage(t, pageA, "Run of Payroll.Close requested: one node runs it as soon as it can, under its lock.", false)
	if n := cluster.RunRequests("Payroll.Close"); n != 1 {
		t.Errorf("%d run requests, want 1", n)
	}
	pageB.Act("Payroll.Close", "resume", token)
	wantMessage(t, pageB, "Payroll.Close resumed: it runs again from its next fire.", false)
	pageA.WaitCell("node a's page to show Payroll.Close resumed", "Payroll.Close", browsertest.ColPaused, "no")

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
	page := browsertest.OpenConsole(t, browsertest.New(t), consoleOn(t, cluster.Node("a")).URL)
	const name = "billing/export daily"
	page.Cell(name, browsertest.ColName)
	page.Do("opening the history", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task=`+browsertest.JS(t, name)+`] button.link`)))
	page.WaitFor("no runs yet", `document.getElementById("history-message").textContent === "No runs recorded yet."`)
	if got := browsertest.Eval[string](page, `document.getElementById("history-task").textContent`); got != name {
		t.Errorf("the history is titled %q, want %q", got, name)
	}

	// The start's nanoseconds are cut to the millisecond.
	cluster.AddRun(name, admintest.Run{Fire: epoch2, Manual: true, Node: "c", Token: 12, Start: epoch2.Add(1234567),
		Duration: 2 * time.Second, Outcome: "error", Error: "export <failed>"})
	rows := `[...document.querySelectorAll("#runs tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`
	page.WaitFor("the new run", rows+`.length === 1`)
	want := "2026-01-01T01:00:00Z|manual|c|12|2026-01-01T01:00:00.001Z|2s|error|export <failed>"
	if got := browsertest.Eval[[]string](page, rows); len(got) != 1 || got[0] != want {
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
	page := browsertest.OpenConsole(t, browsertest.New(t), consoleOn(t, cluster.Node("a")).URL)
	page.Act("Payroll.Close", "pause", "anything")
	wantMessage(t, page, "pause Payroll.Close: 403 Forbidden: "+admintest.NoTokenMessage, true)
}

// With the Redis of the lock driver and the store killed, the page shows a
// banner naming both failing checks within a refresh, and the fire that
// failed in the task's row with the node's counts; before, neither.
func TestConsoleShowsAFailingBackend(t *testing.T) {
	n := redisnode.Start(t, "console", epoch)
	n.Step(t)
	h, err := New(Options{Scheduler: n.S, Checks: BackendChecks(n.Driver, n.Store)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
	if got := page.Cell(redisnode.Task, browsertest.ColLastFire); !strings.HasPrefix(got, "ok on node-a") || !strings.Contains(got, "runs 1 · skips 0 · failures 0") {
		t.Fatalf("last fire with Redis up: %q, want the run and its counts", got)
	}
	if hidden := browsertest.Eval[bool](page, `document.getElementById("health").hidden`); !hidden {
		t.Fatal("the health banner shows while every check passes")
	}

	n.Server.Kill()
	n.Step(t)
	page.WaitFor("the banner naming both backends", `(() => { const b = document.getElementById("health");
		return !b.hidden && b.textContent.startsWith("This node cannot reach locks (") && b.textContent.includes("taskstate (") })()`)
	page.WaitFor("the failed fire in its row", page.CellExpr(redisnode.Task, browsertest.ColLastFire)+`.startsWith("failed: lock on node-a")`)
	if got := page.Cell(redisnode.Task, browsertest.ColLastFire); !strings.Contains(got, "failures 1") {
		t.Fatalf("last fire with Redis down: %q, want one failure counted", got)
	}
}
