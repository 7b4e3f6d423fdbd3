package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// calendarNode is node-a on a fake clock at epoch, in UTC, with the
// calendar "maintenance" (00:02 to 00:04 daily) defined before Start, the
// task "sweep" every minute that names it, and a handler with secret.
func calendarNode(t *testing.T, tasks ...scheduling.Task) (*fakenode.Node, *Handler, taskstate.Store) {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store, Location: time.UTC})
	if err := n.S.CreateCalendar(context.Background(), taskstate.Calendar{Name: "maintenance", Note: "the nightly window",
		CalendarRules: taskstate.CalendarRules{Windows: []string{"00:02-00:04"}}}); err != nil {
		t.Fatal(err)
	}
	n.Start(t, append([]scheduling.Task{scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"),
		scheduling.Lock("sweep"), scheduling.Name("sweep"), scheduling.Calendar("maintenance"))}, tasks...)...)
	h, err := New(Options{Scheduler: n.S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return n, h, store
}

// The calendars' routes: list, read, create, update and delete with the
// token, each refusal with its status and a message naming the field, the
// value and the rule, or what uses the calendar.
func TestCalendarsAPI(t *testing.T) {
	_, h, _ := calendarNode(t)
	weekends := `{"name": "weekends", "weekdays": ["sat", "sun"], "note": "no runs on weekends"}`
	for _, c := range []struct {
		name, method, path, auth, body string
		code                           int
		want                           string
	}{
		{"no token", "POST", "/calendars", "", weekends, http.StatusUnauthorized, "bearer token"},
		{"wrong token", "PUT", "/calendars/maintenance", "nope", weekends, http.StatusUnauthorized, "bearer token"},
		{"delete without a token", "DELETE", "/calendars/maintenance", "", "", http.StatusUnauthorized, "bearer token"},
		{"empty body", "POST", "/calendars", secret, "", http.StatusBadRequest, "body: empty; want the JSON object {\\\"name\\\": string"},
		{"unknown field", "POST", "/calendars", secret, `{"name": "x", "weekday": ["sat"]}`, http.StatusBadRequest, `unknown field \"weekday\"`},
		{"two values", "POST", "/calendars", secret, weekends + weekends, http.StatusBadRequest, "more than one JSON value"},
		{"a list as a string", "POST", "/calendars", secret, `{"name": "x", "dates": "2026-12-25"}`, http.StatusBadRequest, "dates"},
		{"bad weekday", "POST", "/calendars", secret, `{"name": "x", "weekdays": ["sat", "sundy"]}`, http.StatusBadRequest, `weekdays[1] \"sundy\"`},
		{"bad window", "POST", "/calendars", secret, `{"name": "x", "windows": ["22:00-25:00"]}`, http.StatusBadRequest, `22:00-25:00`},
		{"bad date", "POST", "/calendars", secret, `{"name": "x", "dates": ["2026-02-30"]}`, http.StatusBadRequest, `2026-02-30`},
		{"empty rule", "POST", "/calendars", secret, `{"name": "x", "cron": [" "]}`, http.StatusBadRequest, `cron[0] \" \" must not be empty`},
		{"no name", "POST", "/calendars", secret, `{"weekdays": ["sat"]}`, http.StatusBadRequest, "name"},
		{"undefined include", "POST", "/calendars", secret, `{"name": "x", "include": ["holidays"]}`, http.StatusBadRequest,
			`include[0] \"holidays\" is not defined; create it first`},
		{"exists", "POST", "/calendars", secret, `{"name": "maintenance", "windows": ["01:00-02:00"]}`, http.StatusConflict, "update it instead"},
		{"update of none", "PUT", "/calendars/holidays", secret, `{"dates": ["2026-12-25"]}`, http.StatusNotFound, `unknown calendar: \"holidays\": create it first`},
		{"update with a bad rule", "PUT", "/calendars/maintenance", secret, `{"weekdays": ["someday"]}`, http.StatusBadRequest, `\"someday\"`},
		{"update with an undefined include", "PUT", "/calendars/maintenance", secret, `{"include": ["holidays"]}`, http.StatusBadRequest,
			`include[0] \"holidays\" is not defined`},
		{"another name in the body", "PUT", "/calendars/maintenance", secret, `{"name": "other", "weekdays": ["sat"]}`, http.StatusBadRequest,
			`\"name\" \"other\" is not the path's \"maintenance\"`},
		{"delete in use", "DELETE", "/calendars/maintenance", secret, "", http.StatusConflict, `calendar \"maintenance\" is named by task sweep`},
		{"delete none", "DELETE", "/calendars/holidays", secret, "", http.StatusNotFound, `unknown calendar: \"holidays\"`},
		{"GET none", "GET", "/calendars/holidays", "", "", http.StatusNotFound, `unknown calendar: \"holidays\" (GET /calendars lists them)`},
		{"PATCH", "PATCH", "/calendars/maintenance", secret, "", http.StatusMethodNotAllowed, "use GET to read the calendar, PUT to update it, DELETE to delete it"},
		{"DELETE the list", "DELETE", "/calendars", secret, "", http.StatusMethodNotAllowed, "DELETE is not allowed on /calendars"},
	} {
		code, body := serve(t, h, c.method, c.path, c.auth, c.body)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %s %s = %d %s; want %d with %q", c.name, c.method, c.path, code, body, c.code, c.want)
		}
	}

	code, body := serve(t, h, "POST", "/calendars", secret, weekends)
	var got CalendarJSON
	if decode(t, body, &got); code != http.StatusCreated || got.Name != "weekends" || !slices.Equal(got.Weekdays, []string{"sat", "sun"}) ||
		got.Note != "no runs on weekends" || got.Node != "node-a" || !got.Updated.Equal(epoch) || got.Problem != "" ||
		got.Dates == nil || got.UsedBy == nil || !strings.Contains(string(body), `"usedBy": []`) {
		t.Fatalf("POST /calendars = %d %s; want 201 with the calendar as stored, by node-a at %v, its empty lists []", code, body, epoch)
	}
	code, body = serve(t, h, "POST", "/calendars", secret, `{"name": "holidays", "dates": ["2026-12-25"], "include": ["weekends"]}`)
	if code != http.StatusCreated {
		t.Fatalf("POST a calendar including weekends = %d %s, want 201", code, body)
	}
	if code, body := serve(t, h, "DELETE", "/calendars/weekends", secret, ""); code != http.StatusConflict ||
		!strings.Contains(string(body), "calendar holidays") {
		t.Errorf("DELETE of an included calendar = %d %s; want 409 naming the calendar that includes it", code, body)
	}

	var list CalendarsJSON
	code, body = serve(t, h, "GET", "/calendars", "", "")
	if decode(t, body, &list); code != http.StatusOK || list.Node != "node-a" || len(list.Calendars) != 3 ||
		list.Calendars[0].Name != "holidays" || list.Calendars[1].Name != "maintenance" || list.Calendars[2].Name != "weekends" ||
		!slices.Equal(list.Calendars[1].UsedBy, []string{"task sweep"}) || !slices.Equal(list.Calendars[2].UsedBy, []string{"calendar holidays"}) ||
		!slices.Equal(list.Calendars[1].Windows, []string{"00:02-00:04"}) || list.Calendars[1].Note != "the nightly window" {
		t.Fatalf("GET /calendars = %d %s; want holidays, maintenance (used by task sweep) and weekends (by calendar holidays)", code, body)
	}
	code, body = serve(t, h, "GET", "/calendars/maintenance", "", "")
	got = CalendarJSON{}
	if decode(t, body, &got); code != http.StatusOK || got.Name != "maintenance" || !slices.Equal(got.UsedBy, []string{"task sweep"}) {
		t.Fatalf("GET /calendars/maintenance = %d %s", code, body)
	}

	// A PUT replaces the whole calendar: the note it leaves out is dropped.
	code, body = serve(t, h, "PUT", "/calendars/maintenance", secret, `{"windows": ["00:05-00:06"], "weekdays": ["sun"]}`)
	got = CalendarJSON{}
	if decode(t, body, &got); code != http.StatusOK || !slices.Equal(got.Windows, []string{"00:05-00:06"}) || !slices.Equal(got.Weekdays, []string{"sun"}) ||
		got.Note != "" || got.From.Before(epoch) {
		t.Fatalf("PUT = %d %s; want 200 with the new rules, no note, in force from now on", code, body)
	}

	code, body = serve(t, h, "DELETE", "/calendars/holidays", secret, "")
	var del CalendarActionJSON
	if decode(t, body, &del); code != http.StatusOK || del != (CalendarActionJSON{Calendar: "holidays", Action: "delete-calendar", Status: "deleted"}) {
		t.Fatalf("DELETE = %d %s, want 200 deleted", code, body)
	}
	if code, body := serve(t, h, "DELETE", "/calendars/weekends", secret, ""); code != http.StatusOK {
		t.Fatalf("DELETE weekends once holidays is gone = %d %s, want 200", code, body)
	}
	if code, body := serve(t, h, "GET", "/calendars/holidays", "", ""); code != http.StatusNotFound {
		t.Errorf("GET a deleted calendar = %d %s, want 404", code, body)
	}
}

// Without a token configured, a calendar's change is refused with 403;
// without a task state store, the calendars' routes answer 501.
func TestCalendarsRefusedWithoutTokenOrStore(t *testing.T) {
	_, h, _ := calendarNode(t)
	open, err := New(Options{Scheduler: h.s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := serve(t, open, "POST", "/calendars", "x", `{"name": "w", "weekdays": ["sat"]}`); code != http.StatusForbidden ||
		!strings.Contains(string(body), "task control is off") {
		t.Errorf("POST /calendars with no token configured = %d %s, want 403", code, body)
	}
	s, _ := newScheduler(t)
	bare, err := New(Options{Scheduler: s, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]string{{"GET", "/calendars", ""}, {"POST", "/calendars", `{"name": "w", "weekdays": ["sat"]}`},
		{"DELETE", "/calendars/w", ""}, {"GET", "/calendars/w", ""}} {
		if code, body := serve(t, bare, c[0], c[1], secret, c[2]); code != http.StatusNotImplemented || !strings.Contains(string(body), "taskstate.Store") &&
			!strings.Contains(string(body), "no calendars are stored") {
			t.Errorf("%s %s without a store = %d %s, want 501 saying why", c[0], c[1], code, body)
		}
	}
}

// A stored schedule naming a calendar that is not defined is refused with
// 400, naming it.
func TestScheduleNamingAnUndefinedCalendar(t *testing.T) {
	n, h, _ := calendarNode(t)
	if err := n.S.Handle("report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	code, body := serve(t, h, "POST", "/schedules", secret, `{"name": "r", "handler": "report", "cron": "@daily", "options": {"calendar": "holidays"}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "holidays") {
		t.Errorf("POST /schedules naming an undefined calendar = %d %s, want 400 naming it", code, body)
	}
}

// GET /scheduledtasks/{name}/next lists the next instants with what the
// task's options do to each: the calendar's exclusions skip; n bounds
// them, 10 without it, and a bad n is refused naming the value and the
// rule.
func TestNextFiresAPI(t *testing.T) {
	_, h, _ := calendarNode(t)
	code, body := serve(t, h, "GET", "/scheduledtasks/sweep/next", "", "")
	var next NextFiresJSON
	if decode(t, body, &next); code != http.StatusOK || next.Task != "sweep" || len(next.Fires) != 10 {
		t.Fatalf("GET next = %d %s; want 200 with 10 fires", code, body)
	}
	for i, f := range next.Fires {
		at := epoch.Add(time.Duration(i+1) * time.Minute)
		want := ""
		if i == 1 || i == 2 {
			want = "excluded: calendar maintenance" // 00:02 and 00:03
		}
		if !f.Fire.Equal(at) || !f.Start.Equal(at) || f.Skip != want || f.DST != "" || f.Fire.Location() != time.UTC {
			t.Errorf("fire %d = %+v; want %v, skip %q", i, f, at, want)
		}
	}
	if !strings.Contains(string(body), `"skip": ""`) || !strings.Contains(string(body), `"dst": ""`) {
		t.Errorf("GET next: skip and dst not always present: %s", body)
	}
	code, body = serve(t, h, "GET", "/scheduledtasks/next?name=sweep&n=3", "", "")
	if decode(t, body, &next); code != http.StatusOK || len(next.Fires) != 3 {
		t.Errorf("GET next?name=sweep&n=3 = %d %s; want 3 fires", code, body)
	}
	for _, c := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/scheduledtasks/sweep/next?n=0", http.StatusBadRequest, `query: n \"0\" must be an integer from 1 to 1000 (scheduling.MaxNextFires)`},
		{"GET", "/scheduledtasks/sweep/next?n=1001", http.StatusBadRequest, `n \"1001\" must be an integer from 1 to 1000`},
		{"GET", "/scheduledtasks/sweep/next?n=ten", http.StatusBadRequest, `n \"ten\" must be an integer`},
		{"GET", "/scheduledtasks/sweep/next?n=1&n=2", http.StatusBadRequest, "2 values of n"},
		{"GET", "/scheduledtasks/nope/next", http.StatusNotFound, "unknown task"},
		{"POST", "/scheduledtasks/sweep/next", http.StatusMethodNotAllowed, "use GET"},
	} {
		if code, body := serve(t, h, c.method, c.path, secret, ""); code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s = %d %s; want %d with %q", c.method, c.path, code, body, c.code, c.want)
		}
	}
}

// A task past its one-off instant or its endAt is listed completed, with
// no next fire and no instant to preview; the others are not. Its
// calendar and bounds show as written.
func TestCompletedTasks(t *testing.T) {
	n, h, _ := calendarNode(t,
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@at 2026-01-01T00:00:30Z"), scheduling.Name("once")),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 20s"), scheduling.Name("ended"), scheduling.Lock("ended"),
			scheduling.EndAt("2026-01-01T00:00:50Z"), scheduling.MaxRuns(5), scheduling.PauseAfterFailures(3)))
	tasks, raw := listTasks(t, h, 3)
	if tasks["once"].Completed || tasks["ended"].Completed || raw["sweep"]["completed"] != false {
		t.Fatalf("before their end: %+v", tasks)
	}
	if e := tasks["ended"]; e.EndAt != "2026-01-01T00:00:50Z" || e.MaxRuns != 5 || e.PauseAfterFailures != 3 || e.StartAt != "" ||
		tasks["sweep"].Calendar != "maintenance" {
		t.Errorf("the bounds and calendar as listed: %+v, %+v", e, tasks["sweep"])
	}
	n.StepTo(t, time.Minute)
	tasks, _ = listTasks(t, h, 3)
	if o := tasks["once"]; !o.Completed || o.Next != nil || tasks["sweep"].Completed {
		t.Fatalf("after its instant: once %+v, sweep %+v; want once completed, with no next fire", o, tasks["sweep"])
	}
	if e := tasks["ended"]; !e.Completed || e.Next != nil {
		t.Errorf("ended, whose next instant is past its endAt: %+v; want completed", e)
	}
	code, body := serve(t, h, "GET", "/scheduledtasks/once/next", "", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"fires": []`) {
		t.Errorf("GET next of a completed task = %d %s; want 200 with no fire", code, body)
	}
}

// The audit counts the instants a calendar excluded apart, and lists each
// as excluded by its calendar, never missed; the history records them
// once, as excluded with the calendar.
func TestAuditShowsExcludedFires(t *testing.T) {
	n, h, _ := calendarNode(t)
	n.StepTo(t, 8*time.Minute)
	code, body := serve(t, h, "GET", "/scheduledtasks/sweep/audit", "", "")
	var a AuditJSON
	if decode(t, body, &a); code != http.StatusOK || a.Excluded != 2 || a.Missed != 0 {
		t.Fatalf("GET audit = %d %s; want 2 excluded, none missed", code, body)
	}
	var excluded []string
	for _, f := range a.Fires {
		if f.Status == "excluded" {
			if f.Outcome != "excluded" || f.Detail != "calendar maintenance" {
				t.Errorf("excluded instant %+v: want outcome excluded, detail calendar maintenance", f)
			}
			excluded = append(excluded, f.Fire.Format("15:04"))
		}
	}
	if slices.Sort(excluded); !slices.Equal(excluded, []string{"00:02", "00:03"}) {
		t.Errorf("excluded instants %v, want 00:02 and 00:03: %s", excluded, body)
	}
	var runs []string
	for _, r := range taskRuns(t, h, "sweep").Runs {
		if r.Outcome == "excluded" {
			runs = append(runs, r.Fire.Format("15:04")+" "+r.Error)
		}
	}
	if slices.Sort(runs); !slices.Equal(runs, []string{"00:02 calendar maintenance", "00:03 calendar maintenance"}) {
		t.Errorf("excluded records %v", runs)
	}
}
