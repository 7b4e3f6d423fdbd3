package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// serve serves method path with body and the bearer token auth ("" for no
// header), and returns the status and the raw body.
func serve(t *testing.T, h http.Handler, method, path, auth, body string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: content type %q, body %s", method, path, ct, rec.Body)
	}
	return rec.Code, rec.Body.Bytes()
}

// The schedules' routes: list, create, update and delete with the token,
// each refusal with its status and a message naming the field, the value
// and the rule; a created schedule is a task of the node at once.
func TestSchedulesAPI(t *testing.T) {
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store})
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.Name("nightly")))
	if err := n.S.Handle("tenant-report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Scheduler: n.S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	acme := `{"name": "report-acme", "handler": "tenant-report", "cron": "0 2 * * *", "lock": "report:acme",
		"options": {"lockTtl": "5m"}, "args": {"tenant": "acme"}}`

	for _, c := range []struct {
		name, method, path, auth, body string
		code                           int
		want                           string
	}{
		{"no token", "POST", "/schedules", "", acme, http.StatusUnauthorized, "bearer token"},
		{"wrong token", "DELETE", "/schedules/report-acme", "nope", "", http.StatusUnauthorized, "bearer token"},
		{"empty body", "POST", "/schedules", secret, "", http.StatusBadRequest, "body: empty"},
		{"unknown field", "POST", "/schedules", secret, `{"name": "x", "schedule": "@daily"}`, http.StatusBadRequest, `unknown field \"schedule\"`},
		{"bad option", "POST", "/schedules", secret, `{"name": "x", "handler": "tenant-report", "cron": "@daily", "lock": "k2", "options": {"lockTtl": "-1s"}}`,
			http.StatusBadRequest, `task \"x\": option lockTtl = \"-1s\": must be positive`},
		{"misspelt option", "POST", "/schedules", secret, `{"name": "x", "handler": "tenant-report", "cron": "@daily", "options": {"jiter": "5s"}}`,
			http.StatusBadRequest, `did you mean \"jitter\"?`},
		{"unknown handler", "POST", "/schedules", secret, `{"name": "x", "handler": "export", "cron": "@daily"}`, http.StatusBadRequest, `handler \"export\"`},
		{"empty cron", "POST", "/schedules", secret, `{"name": "x", "handler": "tenant-report"}`, http.StatusBadRequest, `cron \"\" must not be empty`},
		{"a code task's name", "POST", "/schedules", secret, `{"name": "nightly", "handler": "tenant-report", "cron": "@daily"}`, http.StatusConflict, "declared in code"},
		{"update of none", "PUT", "/schedules/report-beta", secret, `{"handler": "tenant-report", "cron": "@daily"}`, http.StatusNotFound, "unknown schedule"},
		{"delete a code task", "DELETE", "/schedules/nightly", secret, "", http.StatusConflict, "remove it from the code and deploy"},
		{"delete none", "DELETE", "/schedules/report-beta", secret, "", http.StatusNotFound, "unknown schedule"},
		{"GET one", "GET", "/schedules/report-acme", secret, "", http.StatusMethodNotAllowed, "use PUT"},
	} {
		code, body := serve(t, h, c.method, c.path, c.auth, c.body)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %s %s = %d %s; want %d with %q", c.name, c.method, c.path, code, body, c.code, c.want)
		}
	}

	code, body := serve(t, h, "POST", "/schedules", secret, acme)
	var got ScheduleJSON
	if decode(t, body, &got); code != http.StatusCreated || got.Name != "report-acme" || got.Node != "node-a" || compact(t, got.Args) != `{"tenant":"acme"}` ||
		got.Options["lockTtl"] != "5m" || got.Problem != "" || !got.Updated.Equal(epoch) {
		t.Fatalf("POST /schedules = %d %s; want 201 with the schedule as stored, by node-a at %v", code, body, epoch)
	}
	if code, body := serve(t, h, "POST", "/schedules", secret, acme); code != http.StatusConflict {
		t.Errorf("a second POST of the name = %d %s, want 409", code, body)
	}
	var tasks TasksJSON
	_, body = serve(t, h, "GET", "/scheduledtasks", "", "")
	if decode(t, body, &tasks); len(tasks.Tasks) != 2 || tasks.Tasks[1].Name != "report-acme" || tasks.Tasks[1].Handler != "tenant-report" ||
		tasks.Tasks[0].Handler != "" || tasks.Tasks[1].LockTTL != "5m0s" {
		t.Fatalf("GET /scheduledtasks after the create = %s; want nightly and report-acme, run by tenant-report", body)
	}

	code, body = serve(t, h, "PUT", "/schedules/report-acme", secret, `{"handler": "tenant-report", "cron": "0 3 * * *"}`)
	got = ScheduleJSON{}
	if decode(t, body, &got); code != http.StatusOK || got.Cron != "0 3 * * *" || got.Lock != "" || len(got.Options) != 0 || compact(t, got.Args) != "null" {
		t.Fatalf("PUT = %d %s; want 200 with the new schedule, unlocked, no options or args", code, body)
	}
	if code, body := serve(t, h, "PUT", "/schedules/report-acme", secret, `{"name": "report-beta", "handler": "tenant-report", "cron": "@daily"}`); code != http.StatusBadRequest ||
		!strings.Contains(string(body), "is not the path's") {
		t.Errorf("PUT with another name in the body = %d %s, want 400", code, body)
	}

	// A schedule this node cannot run (another build's handler) is listed
	// with its problem.
	other := taskstate.Schedule{Name: "export-acme", Handler: "tenant-export", Cron: "@hourly", Updated: epoch}
	if err := store.CreateSchedule(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	var list SchedulesJSON
	code, body = serve(t, h, "GET", "/schedules", "", "")
	if decode(t, body, &list); code != http.StatusOK || list.Node != "node-a" || len(list.Schedules) != 2 ||
		list.Schedules[0].Name != "export-acme" || !strings.Contains(list.Schedules[0].Problem, `handler "tenant-export", which this node has not registered`) ||
		list.Schedules[1].Problem != "" {
		t.Fatalf("GET /schedules = %d %s; want export-acme with its missing handler, and report-acme", code, body)
	}

	code, body = serve(t, h, "DELETE", "/schedules/report-acme", secret, "")
	if code != http.StatusOK || !strings.Contains(string(body), `"status": "deleted"`) {
		t.Fatalf("DELETE = %d %s, want 200 deleted", code, body)
	}
	_, body = serve(t, h, "GET", "/scheduledtasks", "", "")
	if decode(t, body, &tasks); len(tasks.Tasks) != 1 {
		t.Fatalf("GET /scheduledtasks after the delete = %s; want nightly alone", body)
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
