package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// scheduleRows is the JavaScript expression of the console's stored
// schedules, a row each: the name, then the text of the handler, cron,
// lock, options, args, updated and "on this node" cells, "|" between.
const scheduleRows = `[...document.querySelectorAll("#schedules tbody tr")].map(r => r.dataset.schedule + ":" +
	[...r.cells].slice(1, 8).map(c => c.textContent).join("|"))`

// scheduleResult is the JavaScript expression of the line under the
// schedule form.
const scheduleResult = `document.getElementById("schedule-result")`

// scheduleButton is the selector of the button for action (edit, delete)
// in the named schedule's row.
func scheduleButton(t *testing.T, name, action string) chromedp.CSS {
	return chromedp.CSS(`#schedules tbody tr[data-schedule=` + browsertest.JS(t, name) + `] button[data-action=` + browsertest.JS(t, action) + `]`)
}

// typeInto replaces the value of each field of the schedule form (by id)
// with the text typed into it.
func typeInto(t *testing.T, page *browsertest.Console, fields ...[2]string) {
	for _, f := range fields {
		browsertest.Eval[string](page, `document.getElementById(`+browsertest.JS(t, f[0])+`).value = ""`)
		page.Do("typing into "+f[0], chromedp.SendKeys(chromedp.ID(f[0]), f[1]))
	}
}

// answerToken types token into the token dialog and confirms it.
func answerToken(page *browsertest.Console, token string) {
	page.Do("answering the token dialog", chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), token), chromedp.Click(chromedp.ID("token-ok")))
}

// wantResult waits for the line under the schedule form to start with
// prefix, and checks that it is want, as an error or not.
func wantResult(t *testing.T, page *browsertest.Console, prefix, want string, isError bool) {
	t.Helper()
	page.WaitFor("the form's result "+prefix, `!`+scheduleResult+`.hidden && `+scheduleResult+`.textContent.startsWith(`+browsertest.JS(t, prefix)+`)`)
	got := browsertest.Eval[string](page, scheduleResult+`.textContent`)
	gotError := browsertest.Eval[bool](page, scheduleResult+`.classList.contains("error")`)
	if got != want || gotError != isError {
		t.Errorf("the form says\n%q (as an error: %v)\nwant\n%q (%v)", got, gotError, want, isError)
	}
}

// apiError returns the message of h's answer to method path with body, an
// error that stores nothing, as the console shows it after what.
func apiError(t *testing.T, h http.Handler, what, method, path, body string) string {
	t.Helper()
	code, raw := serve(t, h, method, path, secret, body)
	var e ErrorJSON
	if err := json.Unmarshal(raw, &e); err != nil || code != http.StatusBadRequest {
		t.Fatalf("%s %s %s = %d %s, want a 400", method, path, body, code, raw)
	}
	return what + ": 400 Bad Request: " + e.Error
}

// storedSchedule returns the stored schedule named name as s sees it, and
// whether there is one.
func storedSchedule(t *testing.T, s *scheduling.Scheduler, name string) (scheduling.ScheduleInfo, bool) {
	t.Helper()
	infos, err := s.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == name {
			return i, true
		}
	}
	return scheduling.ScheduleInfo{}, false
}

// taskOf returns s's task named name, nil if it has none.
func taskOf(s *scheduling.Scheduler, name string) *scheduling.TaskInfo {
	for _, ti := range s.Tasks() {
		if ti.Name == name {
			return &ti
		}
	}
	return nil
}

// One node's console lists the stored schedules, with the problem of the
// one whose handler the node lacks (a rolling deploy) in a banner and its
// row, a handler and an error made of markup shown as text, and marks the
// tasks that run one with their handler. Its form refuses args that are
// not JSON itself, shows the API's refusal of a bad option verbatim, then
// creates the schedule; Edit fills the form, the number in the args beyond
// 2^53 as typed, and Save updates the schedule; Delete asks to confirm and
// deletes it.
func TestConsoleSchedules(t *testing.T) {
	ctx := context.Background()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store})
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.Name("nightly")))
	if err := n.S.Handle("tenant-report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	const acmeArgs = `{"tenant":"acme","id":12345678901234567891}`
	if err := n.S.CreateSchedule(ctx, taskstate.Schedule{Name: "report-acme", Handler: "tenant-report", Cron: "0 2 * * *", Lock: "report:acme",
		Options: map[string]string{"lockTtl": "5m"}, Args: json.RawMessage(`{"tenant": "acme", "id": 12345678901234567891}`)}); err != nil {
		t.Fatal(err)
	}
	// Another build's schedule: its handler is not registered here.
	const hostile = `<img src=x onerror="window.pwned=1">`
	if err := store.CreateSchedule(ctx, taskstate.Schedule{Name: "export-acme", Handler: hostile, Cron: "@hourly", Node: "node-z",
		Updated: epoch.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	export, _ := storedSchedule(t, n.S, "export-acme")
	if !strings.Contains(export.Problem, "which this node has not registered") {
		t.Fatalf("export-acme's problem %q, want its handler missing", export.Problem)
	}
	h, err := New(Options{Scheduler: n.S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")

	page.WaitFor("the stored schedules", scheduleRows+`.length === 2`)
	want := []string{
		"export-acme:" + hostile + "|@hourly|-|-|-|2025-12-31 23:00:00 UTC by node-z|not run on this node: " + export.Problem,
		"report-acme:tenant-report|0 2 * * *|report:acme|lockTtl=5m|" + acmeArgs + "|2026-01-01 00:00:00 UTC by node-a|runs on this node",
	}
	if got := browsertest.Eval[[]string](page, scheduleRows); !slices.Equal(got, want) {
		t.Errorf("stored schedules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	problems := `document.getElementById("schedules-problems")`
	if got := browsertest.Eval[string](page, `(`+problems+`.hidden ? "hidden: " : "") + `+problems+`.textContent`); !strings.HasPrefix(got,
		"node-a does not run 1 of the 2 stored schedules: export-acme. A node without a schedule's handler (an older build, in a rolling deploy)") {
		t.Errorf("the banner of the schedules not run: %q", got)
	}
	if got := browsertest.Eval[string](page, `[...document.querySelectorAll("#schedules tbody tr")].map(r => r.className).join(",")`); got != "not-run," {
		t.Errorf("rows' classes %q, want export-acme's marked not run", got)
	}
	if got := page.Cell("report-acme", browsertest.ColName); got != "report-acmehandler tenant-report" {
		t.Errorf("report-acme's name cell %q, want its handler's badge", got)
	}
	if got := page.Cell("nightly", browsertest.ColName); got != "nightly" {
		t.Errorf("nightly's name cell %q, want no badge", got)
	}
	if n := browsertest.Eval[int](page, `document.querySelectorAll("#stored img").length + (window.pwned || 0)`); n != 0 {
		t.Errorf("a schedule's handler or problem ran as markup (%d)", n)
	}

	// Args that are not JSON are refused before any request, token included.
	typeInto(t, page, [2]string{"schedule-name", "report-beta"}, [2]string{"schedule-handler", "tenant-report"}, [2]string{"schedule-cron", "@hourly"},
		[2]string{"schedule-lock", "report:beta"}, [2]string{"schedule-options", "lockTtl=-1s"}, [2]string{"schedule-args", "{tenant"})
	page.Do("creating", chromedp.Click(chromedp.ID("schedule-submit")))
	page.WaitFor("the args refused", scheduleResult+`.textContent.startsWith("create schedule: args: not JSON: ")`)
	if open := browsertest.Eval[bool](page, `document.getElementById("token-dialog").open`); open {
		t.Error("the token was asked for a schedule the page cannot send")
	}
	// The API refuses the option: its message shows under the form.
	typeInto(t, page, [2]string{"schedule-args", `{"tenant": "beta"}`})
	wantBad := apiError(t, h, "create schedule report-beta", "POST", "/schedules",
		`{"name":"report-beta","handler":"tenant-report","cron":"@hourly","lock":"report:beta","options":{"lockTtl":"-1s"},"args":{"tenant": "beta"}}`)
	if !strings.Contains(wantBad, `option lockTtl = "-1s": must be positive`) {
		t.Fatalf("the API's refusal %q does not name the option, its value and the rule", wantBad)
	}
	page.Do("creating", chromedp.Click(chromedp.ID("schedule-submit")))
	answerToken(page, secret)
	wantResult(t, page, "create schedule report-beta: ", wantBad, true)
	if _, ok := storedSchedule(t, n.S, "report-beta"); ok {
		t.Fatal("report-beta stored with a bad option")
	}
	// The tab kept the token: no dialog this time.
	typeInto(t, page, [2]string{"schedule-options", "lockTtl=5m\noverlap=buffer-one"})
	page.Do("creating", chromedp.Click(chromedp.ID("schedule-submit")))
	wantResult(t, page, "Schedule report-beta created", "Schedule report-beta created: every node with the handler tenant-report runs it, "+
		"this one from its next fire, the others from their next poll.", false)
	beta, ok := storedSchedule(t, n.S, "report-beta")
	if !ok || beta.Handler != "tenant-report" || beta.Cron != "@hourly" || beta.Lock != "report:beta" || beta.Node != "node-a" ||
		len(beta.Options) != 2 || beta.Options["lockTtl"] != "5m" || beta.Options["overlap"] != "buffer-one" || compact(t, beta.Args) != `{"tenant":"beta"}` {
		t.Fatalf("report-beta as stored: %+v (%v)", beta, ok)
	}
	if got := browsertest.Eval[string](page, `document.getElementById("schedule-name").value + "|" + document.getElementById("schedule-form-title").textContent`); got != "|New schedule" {
		t.Errorf("the form after the create: %q, want it empty for a new schedule", got)
	}
	page.WaitCell("report-beta's task with its badge", "report-beta", browsertest.ColName, "report-betahandler tenant-report")
	page.WaitFor("report-beta listed", scheduleRows+`.length === 3`)

	// Edit fills the form, the args as stored; Save sends PUT.
	page.Do("editing report-acme", chromedp.Click(scheduleButton(t, "report-acme", "edit")))
	form := `["schedule-form-title", "schedule-name", "schedule-handler", "schedule-cron", "schedule-lock", "schedule-options", "schedule-args", "schedule-submit"].
		map(id => { const e = document.getElementById(id); return e.value !== undefined && e.tagName !== "BUTTON" ? e.value : e.textContent }).join("|") +
		"|" + document.getElementById("schedule-name").readOnly`
	if got, want := browsertest.Eval[string](page, form), "Edit schedule report-acme|report-acme|tenant-report|0 2 * * *|report:acme|lockTtl=5m|"+acmeArgs+"|Save|true"; got != want {
		t.Errorf("the form to edit report-acme:\n%q\nwant\n%q", got, want)
	}
	typeInto(t, page, [2]string{"schedule-cron", "0 3 * * *"}, [2]string{"schedule-options", `{"lockTtl": "10m"}`})
	page.Do("saving", chromedp.Click(chromedp.ID("schedule-submit")))
	wantResult(t, page, "Schedule report-acme updated", "Schedule report-acme updated: every node runs the new spec, this one from its next fire, "+
		"the others from their next poll; a run of the old in flight goes on.", false)
	acme, _ := storedSchedule(t, n.S, "report-acme")
	if acme.Cron != "0 3 * * *" || acme.Lock != "report:acme" || len(acme.Options) != 1 || acme.Options["lockTtl"] != "10m" || compact(t, acme.Args) != acmeArgs {
		t.Fatalf("report-acme after the edit: %+v; want cron 0 3 * * *, lockTtl 10m, its args as they were", acme)
	}
	if ti := taskOf(n.S, "report-acme"); ti == nil || ti.Spec.Cron != "0 3 * * *" {
		t.Errorf("the node's task report-acme after the edit: %+v, want cron 0 3 * * *", ti)
	}
	page.WaitCell("report-acme's task on its new cron", "report-acme", browsertest.ColCron, "0 3 * * *")
	page.WaitFor("report-acme listed with its new cron and option", scheduleRows+`.includes(`+browsertest.JS(t,
		"report-acme:tenant-report|0 3 * * *|report:acme|lockTtl=10m|"+acmeArgs+"|2026-01-01 00:00:00 UTC by node-a|runs on this node")+`)`)

	// A refused update shows the API's message; Cancel edit empties the form.
	page.Do("editing report-beta", chromedp.Click(scheduleButton(t, "report-beta", "edit")))
	typeInto(t, page, [2]string{"schedule-cron", "every day"})
	wantBad = apiError(t, h, "update schedule report-beta", "PUT", "/schedules/report-beta",
		`{"name":"report-beta","handler":"tenant-report","cron":"every day","lock":"report:beta","options":{"lockTtl":"5m","overlap":"buffer-one"},"args":{"tenant":"beta"}}`)
	page.Do("saving", chromedp.Click(chromedp.ID("schedule-submit")))
	wantResult(t, page, "update schedule report-beta: ", wantBad, true)
	if got, _ := storedSchedule(t, n.S, "report-beta"); got.Cron != "@hourly" {
		t.Errorf("report-beta's cron %q after a refused update", got.Cron)
	}
	page.Do("cancelling the edit", chromedp.Click(chromedp.ID("schedule-cancel")))
	if got := browsertest.Eval[string](page, form); got != "New schedule|||||||Create|false" {
		t.Errorf("the form after Cancel edit: %q, want it empty", got)
	}

	// Delete asks first: Cancel keeps the schedule, Delete deletes it.
	page.Do("deleting report-beta", chromedp.Click(scheduleButton(t, "report-beta", "delete")), chromedp.WaitVisible(chromedp.ID("confirm-ok")))
	if got := browsertest.Eval[string](page, `document.getElementById("confirm-text").textContent + "|" + document.getElementById("confirm-ok").textContent`); !strings.HasPrefix(got,
		"Delete the stored schedule report-beta? Every node stops firing it from its next poll;") || !strings.HasSuffix(got, "|Delete") {
		t.Errorf("the confirmation asks %q", got)
	}
	page.Do("cancelling", chromedp.Click(chromedp.ID("confirm-cancel")), chromedp.WaitNotVisible(chromedp.ID("confirm-ok")))
	if _, ok := storedSchedule(t, n.S, "report-beta"); !ok {
		t.Fatal("report-beta deleted though the deletion was cancelled")
	}
	page.Do("deleting report-beta", chromedp.Click(scheduleButton(t, "report-beta", "delete")), chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	wantResult(t, page, "Schedule report-beta deleted", "Schedule report-beta deleted: no node fires it from its next poll; a run of it in flight finishes.", false)
	if _, ok := storedSchedule(t, n.S, "report-beta"); ok {
		t.Fatal("report-beta still stored after its deletion")
	}
	if ti := taskOf(n.S, "report-beta"); ti != nil {
		t.Errorf("the node still runs report-beta: %+v", ti)
	}
	page.WaitFor("report-beta's row gone", scheduleRows+`.length === 2 && !`+scheduleRows+`.some(r => r.startsWith("report-beta:"))`)
	page.WaitFor("report-beta's task gone", page.CellExpr("report-beta", browsertest.ColName)+` === null`)
}

// waitEveryNode steps the cluster's clock a second at a time (each node
// polls the store every second) until ok holds of the task sync-acme, nil
// if none, on every node; for 5 steps and 10 seconds at most.
func waitEveryNode(t *testing.T, c *backendnode.Cluster, what string, ok func(*scheduling.TaskInfo) bool) {
	t.Helper()
	// Bounded by polls (steps of the cluster's fake clock), not by wall
	// time: a loaded machine takes longer per step, not more steps.
	for step := 0; ; step++ {
		var pending []string
		for _, n := range c.Nodes {
			if !ok(taskOf(n.S, "sync-acme")) {
				pending = append(pending, n.Name+": "+taskString(taskOf(n.S, "sync-acme")))
			}
		}
		if len(pending) == 0 {
			t.Logf("%s: after %d polls", what, step)
			return
		}
		if step == 5 {
			t.Fatalf("%s: after %d polls, not on %s", what, step, strings.Join(pending, "; "))
		}
		c.Step(t)
	}
}

func taskString(ti *scheduling.TaskInfo) string {
	if ti == nil {
		return "no task"
	}
	return "cron " + ti.Spec.Cron
}

// The acceptance: an update and a delete through the console take
// effect on every node. Three nodes on one Redis, each with the handler;
// on node-a's console an edit of a schedule's cron, from every 2 seconds
// to every 3, is every node's task within a poll or two, and its deletion
// drops the task from every node and the schedule from the store.
func TestConsoleScheduleChangesReachEveryNode(t *testing.T) {
	ctx := context.Background()
	c := backendnode.Redis(t, "console-schedules", epoch, 3)
	for _, n := range c.Nodes {
		if err := n.S.Handle("tenant-sync", func(context.Context, json.RawMessage) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Options{Scheduler: c.Nodes[0].S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if err := c.Nodes[1].S.CreateSchedule(ctx, taskstate.Schedule{Name: "sync-acme", Handler: "tenant-sync", Cron: "@every 2s",
		Lock: "sync:acme", Args: json.RawMessage(`{"tenant":"acme"}`)}); err != nil {
		t.Fatal(err)
	}
	waitEveryNode(t, c, "sync-acme every 2s on every node", func(ti *scheduling.TaskInfo) bool {
		return ti != nil && ti.Spec.Cron == "@every 2s" && ti.Schedule != nil && ti.Schedule.Handler == "tenant-sync"
	})

	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/")
	page.WaitFor("sync-acme listed", scheduleRows+`.some(r => r.startsWith("sync-acme:tenant-sync|@every 2s|sync:acme|-|{\"tenant\":\"acme\"}|"))`)
	page.Do("editing sync-acme", chromedp.Click(scheduleButton(t, "sync-acme", "edit")))
	typeInto(t, page, [2]string{"schedule-cron", "@every 3s"})
	page.Do("saving", chromedp.Click(chromedp.ID("schedule-submit")))
	answerToken(page, secret)
	page.WaitFor("the update's result", scheduleResult+`.textContent.startsWith("Schedule sync-acme updated: ")`)
	waitEveryNode(t, c, "sync-acme every 3s on every node", func(ti *scheduling.TaskInfo) bool {
		return ti != nil && ti.Spec.Cron == "@every 3s" && ti.Schedule != nil && ti.Schedule.Cron == "@every 3s"
	})
	for _, n := range c.Nodes {
		if sc, ok := storedSchedule(t, n.S, "sync-acme"); !ok || sc.Cron != "@every 3s" || sc.Node != "node-a" || sc.Problem != "" || compact(t, sc.Args) != `{"tenant":"acme"}` {
			t.Errorf("%s sees sync-acme as %+v (%v), want every 3s, updated by node-a, its args kept", n.Name, sc, ok)
		}
	}

	page.Do("deleting sync-acme", chromedp.Click(scheduleButton(t, "sync-acme", "delete")), chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	page.WaitFor("the deletion's result", scheduleResult+`.textContent.startsWith("Schedule sync-acme deleted: ")`)
	waitEveryNode(t, c, "sync-acme gone from every node", func(ti *scheduling.TaskInfo) bool { return ti == nil })
	for _, n := range c.Nodes {
		scs, err := n.Store.Schedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(scs) != 0 {
			t.Errorf("%s's store still has %+v", n.Name, scs)
		}
	}
	page.WaitFor("sync-acme's row gone", scheduleRows+`.length === 0 && !document.getElementById("schedules-empty").hidden`)
}
