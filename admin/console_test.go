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
	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/internal/browsertest"
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
		{"Payroll.Close", browsertest.ColNext, "2026-01-01 00:00:02 UTC"},
		{hostile, browsertest.ColName, hostile},
		{hostile, browsertest.ColLock, "-"},
		{hostile, browsertest.ColLastRun, "error on node-a2026-01-01 00:00:01 UTC · 0 s<script>window.pwned=2</script>"},
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
	if got, want := pageA.Cell("Payroll.Close", browsertest.ColClusterLastRun), "ok on b, token 72026-01-01 01:00:00 UTC · 1.5 s"; got != want {
		t.Errorf("node a's page: the cluster's last run %q, want %q", got, want)
	}
	if got, want := pageA.Cell("Payroll.Close", browsertest.ColLastRun), "error on a, token 6, manual2026-01-01 00:59:59 UTC · 1 msbooks do not balance"; got != want {
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
	want := "2026-01-01 01:00:00 UTC|manual|-|c|12|2026-01-01 01:00:00.001 UTC|2 s|error|export <failed>"
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

// With the server of the lock driver and the store killed under 2 nodes
// (Redis, then PostgreSQL), each node's /healthz answers 503 naming both
// backends, node-a's page shows a banner naming them within a refresh, and
// the fire that failed in the task's row with the node's counts; once the
// server is back, the fires that failed on both nodes are in the shared
// history and the audit finds them failed, none missed.
func TestConsoleShowsAnOutage(t *testing.T) {
	for _, backend := range []string{"redis", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			c := backendnode.Redis
			if backend == "postgres" {
				c = backendnode.Postgres
			}
			consoleOutage(t, c(t, "console", epoch, 2))
		})
	}
}

// waitHealthy waits until the node at u answers /healthz with 200, for 10s
// at most.
func waitHealthy(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := admintest.Send(t, "GET", u+"/healthz", "")
		switch {
		case code == http.StatusOK:
			return
		case time.Now().After(deadline):
			t.Fatalf("healthz 10s after the server's restart: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond) // polling a real server's reconnection, not a race
	}
}

func consoleOutage(t *testing.T, c *backendnode.Cluster) {
	var urls []string
	for _, n := range c.Nodes {
		h, err := New(Options{Scheduler: n.S, Checks: BackendChecks(n.Driver, n.Store)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	c.Step(t)
	for _, u := range urls {
		if code, body := admintest.Send(t, "GET", u+"/healthz", ""); code != http.StatusOK {
			t.Fatalf("healthz with the server up: %d %s", code, body)
		}
	}
	page := browsertest.OpenConsole(t, browsertest.New(t), urls[0]+"/")
	if got := page.Cell(backendnode.Task, browsertest.ColLastFire); !strings.Contains(got, " on node-") || !strings.Contains(got, "failures 0") {
		t.Fatalf("last fire with the server up: %q, want the fire and its counts", got)
	}
	if hidden := browsertest.Eval[bool](page, `document.getElementById("health").hidden`); !hidden {
		t.Fatal("the health banner shows while every check passes")
	}

	c.Server.Kill()
	const outage = 3
	var outageFires []time.Time
	for range outage {
		c.Step(t)
		outageFires = append(outageFires, c.Clock.Now())
	}
	for i, u := range urls {
		code, body := admintest.Send(t, "GET", u+"/healthz", "")
		var h HealthJSON
		if err := json.Unmarshal(body, &h); err != nil || code != http.StatusServiceUnavailable || h.Status != "unavailable" ||
			h.Checks[LocksCheck] == "ok" || h.Checks[TaskStateCheck] == "ok" || h.Checks[LocksCheck] == "" {
			t.Fatalf("node %d healthz with the server down: %d %s, want 503 naming locks and taskstate", i, code, body)
		}
	}
	page.WaitFor("the banner naming both backends", `(() => { const b = document.getElementById("health");
		return !b.hidden && b.textContent.startsWith("This node cannot reach locks (") && b.textContent.includes("taskstate (") })()`)
	// The page may have shown the first failures during the steps: it is
	// the count of all of them that it must come to.
	page.WaitFor("the failed fires in the task's row", fmt.Sprintf(`(() => { const c = %s;
		return c.startsWith("failed: lock on node-a") && c.includes("failures %d") })()`, page.CellExpr(backendnode.Task, browsertest.ColLastFire), outage))
	// The task list is the node's own view, and says so above the tasks.
	page.WaitFor("the line saying the cluster's task state is unavailable", `(() => { const p = document.getElementById("state-error");
		return !p.hidden && p.textContent.startsWith("The cluster's task state is unavailable, so Paused and the cluster's last fires are this node's own view: ") })()`)

	c.Server.Restart()
	// go-redis answers its last dial error until its probe, once a second,
	// finds the server back: the nodes come back when their checks pass.
	for _, u := range urls {
		waitHealthy(t, u)
	}
	page.WaitFor("the state line gone once the store is back", `document.getElementById("state-error").hidden`)
	// Past the audit's horizon (the lock TTL and a minute), stepping: the
	// first poll that gets through makes each node record what it kept.
	for range 70 {
		c.Step(t)
	}
	var runs RunsJSON
	_, body := admintest.Send(t, "GET", urls[1]+"/scheduledtasks/"+backendnode.Task+"/runs", "")
	if err := json.Unmarshal(body, &runs); err != nil {
		t.Fatal(err)
	}
	failed := map[string]map[time.Time]bool{}
	for _, r := range runs.Runs {
		if r.Outcome == string(scheduling.OutcomeLockFailed) {
			if failed[r.Node] == nil {
				failed[r.Node] = map[time.Time]bool{}
			}
			failed[r.Node][r.Fire] = true
			if r.Start != nil || r.Error == "" {
				t.Errorf("failed fire %+v, want no start and the error", r)
			}
		}
	}
	// A node may fail a fire or two more as its client reconnects, while
	// the other runs them.
	for _, n := range c.Nodes {
		for _, f := range outageFires {
			if !failed[n.Name][f] {
				t.Errorf("history %s: no failed fire of %s at %v, in the outage", body, n.Name, f)
			}
		}
	}
	var a AuditJSON
	_, body = admintest.Send(t, "GET", urls[0]+"/scheduledtasks/"+backendnode.Task+"/audit", "")
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	statuses := map[time.Time]string{}
	for _, f := range a.Fires {
		statuses[f.Fire] = f.Status
	}
	for _, fire := range outageFires {
		if statuses[fire] != string(scheduling.FireFailed) {
			t.Errorf("audit %s: the fire at %v is %q, want failed", body, fire, statuses[fire])
		}
	}
	if a.Failed < outage || a.Missed != 0 {
		t.Errorf("audit %s: %d failed, %d missed; want the %d of the outage at least, and none missed", body, a.Failed, a.Missed, outage)
	}
	page.WaitFor("no banner once the server is back", `document.getElementById("health").hidden`)
}
