package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

const secret = "s3cr3t-token-value"

// controlled is a handler on a started scheduler with a task state store,
// its fake clock, and the handler's log.
type controlled struct {
	h   *Handler
	s   *scheduling.Scheduler
	fc  *clockwork.FakeClock
	log *syncbuf.Buffer
}

// name is the test task's name: a dot, a slash and a space, as clients must
// escape.
const name = "Payroll.Close/eu west"

func newControlled(t *testing.T, token Token) controlled {
	t.Helper()
	return newControlledWith(t, Options{Token: token})
}

// newControlledWith is newControlled with the handler's options (its
// Scheduler and Logger set here).
func newControlledWith(t *testing.T, opts Options) controlled {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", Logger: slog.New(slog.DiscardHandler),
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), State: store})
	if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"),
		scheduling.Lock("payroll"), scheduling.Name(name))); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	buf := &syncbuf.Buffer{}
	opts.Scheduler, opts.Logger = s, slog.New(slog.NewJSONHandler(buf, nil))
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return controlled{h: h, s: s, fc: fc, log: buf}
}

// do serves method path with the given Authorization header ("" for none)
// and returns the status, headers and JSON body.
func (c controlled) do(t *testing.T, method, path, auth string) (int, http.Header, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = "192.0.2.7:5555"
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: content type %q, body %s", method, path, ct, rec.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, rec.Body)
	}
	return rec.Code, rec.Header(), body
}

func taskPath(action string) string { return "/scheduledtasks/" + url.PathEscape(name) + "/" + action }

func TestControlNeedsTheToken(t *testing.T) {
	c := newControlled(t, secret)
	for _, action := range []string{"run", "pause", "resume"} {
		for auth, why := range map[string]string{"": "no header", "Bearer wrong": "wrong token",
			"Bearer " + secret + "x": "longer token", "Basic " + secret: "another scheme", secret: "no scheme"} {
			code, hdr, body := c.do(t, http.MethodPost, taskPath(action), auth)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") ||
				!strings.Contains(fmt.Sprint(body["error"]), "bearer token") {
				t.Errorf("POST %s with %s: %d %v %v; want 401 with WWW-Authenticate: Bearer", action, why, code, hdr, body)
			}
		}
	}
	if paused, _ := c.s.ClusterTasks(context.Background()); paused[0].Paused {
		t.Fatal("a refused pause paused the task")
	}
	logs := c.log.String()
	if n := strings.Count(logs, "missing or wrong bearer token"); n != 15 {
		t.Errorf("%d refusals logged, want 15", n)
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the log shows the token: %s", logs)
	}
}

func TestControlWithoutATokenIsForbidden(t *testing.T) {
	c := newControlled(t, "")
	code, _, body := c.do(t, http.MethodPost, taskPath("pause"), "Bearer anything")
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(body["error"]), "admin.token") {
		t.Fatalf("POST pause with no token configured: %d %v; want 403 saying to set admin.token", code, body)
	}
	if code, _, _ := c.do(t, http.MethodGet, taskPath("runs"), ""); code != http.StatusOK {
		t.Errorf("GET runs with no token configured: %d, want 200: reading needs no token", code)
	}
}

func TestPauseResumeAndRunOverHTTP(t *testing.T) {
	c := newControlled(t, secret)
	ctx := context.Background()
	auth := "Bearer " + secret
	code, _, body := c.do(t, http.MethodPost, taskPath("pause"), auth)
	if code != http.StatusOK || body["task"] != name || body["action"] != "pause" || body["paused"] != true {
		t.Fatalf("POST pause: %d %v", code, body)
	}
	_, _, tasks := c.do(t, http.MethodGet, "/scheduledtasks", "")
	task := tasks["tasks"].([]any)[0].(map[string]any)
	if task["paused"] != true || task["clusterLastRun"] != nil {
		t.Fatalf("GET /scheduledtasks after pause: %v; want paused, clusterLastRun null", task)
	}
	code, _, body = c.do(t, http.MethodPost, taskPath("run"), auth)
	if code != http.StatusAccepted || body["action"] != "run" || body["status"] != "requested" {
		t.Fatalf("POST run: %d %v; want 202 requested", code, body)
	}
	if err := schedulingtest.Step(ctx, c.fc, 2*time.Second, time.Second, c.s); err != nil {
		t.Fatal(err)
	}
	code, _, runs := c.do(t, http.MethodGet, taskPath("runs"), "")
	list, _ := runs["runs"].([]any)
	if code != http.StatusOK || runs["task"] != name || len(list) != 1 {
		t.Fatalf("GET runs: %d %v; want the one manual run", code, runs)
	}
	run := list[0].(map[string]any)
	if run["manual"] != true || run["node"] != "node-a" || run["outcome"] != "ok" || run["token"].(float64) < 1 || run["attempt"] != 1.0 ||
		run["fire"] != "2026-01-01T00:00:00Z" || run["duration"] != "0s" {
		t.Errorf("run %v: want a manual ok run on node-a with a token, fired when requested", run)
	}
	_, _, tasks = c.do(t, http.MethodGet, "/scheduledtasks", "")
	task = tasks["tasks"].([]any)[0].(map[string]any)
	if last, _ := task["clusterLastRun"].(map[string]any); last["token"] != run["token"] {
		t.Errorf("clusterLastRun %v, want the manual run", task["clusterLastRun"])
	}
	code, _, body = c.do(t, http.MethodPost, taskPath("resume"), auth)
	if code != http.StatusOK || body["action"] != "resume" || body["paused"] != false {
		t.Fatalf("POST resume: %d %v", code, body)
	}
	logs := c.log.String()
	for _, action := range []string{"pause", "run", "resume"} {
		if !strings.Contains(logs, `"action":"`+action+`","actor":"admin","remote":"192.0.2.7:5555"`) {
			t.Errorf("no log line of %s with its actor and the remote address in %s", action, logs)
		}
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the log shows the token: %s", logs)
	}
}

func TestControlErrorsAreJSON(t *testing.T) {
	c := newControlled(t, secret)
	auth := "Bearer " + secret
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodPost, "/scheduledtasks/Nope.Task/pause", http.StatusNotFound, ""},
		{http.MethodPost, "/scheduledtasks/Nope.Task/run", http.StatusNotFound, ""},
		{http.MethodGet, "/scheduledtasks/Nope.Task/runs", http.StatusNotFound, ""},
		{http.MethodGet, taskPath("bogus"), http.StatusNotFound, ""},
		{http.MethodGet, taskPath("pause"), http.StatusMethodNotAllowed, "POST"},
		{http.MethodPut, taskPath("run"), http.StatusMethodNotAllowed, "POST"},
		{http.MethodDelete, taskPath("runs"), http.StatusMethodNotAllowed, "GET"},
		{http.MethodPost, "/scheduledtasks", http.StatusMethodNotAllowed, "GET"},
	} {
		code, hdr, body := c.do(t, tc.method, tc.path, auth)
		if code != tc.code || hdr.Get("Allow") != tc.allow || body["error"] == "" {
			t.Errorf("%s %s: %d Allow %q %v; want %d Allow %q and an error message", tc.method, tc.path, code,
				hdr.Get("Allow"), body, tc.code, tc.allow)
		}
	}
	_, _, body := c.do(t, http.MethodPost, "/scheduledtasks/Nope.Task/pause", auth)
	if !strings.Contains(fmt.Sprint(body["error"]), `"Nope.Task"`) {
		t.Errorf("404 body %v, want the unknown name", body)
	}
}

func TestTokenIsRedacted(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", Token: secret}
	b, _ := json.Marshal(cfg)
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("config", "cfg", cfg, "token", cfg.Token)
	for what, s := range map[string]string{"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg),
		"%#v": fmt.Sprintf("%#v", cfg), "json": string(b), "slog": log.String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, "[REDACTED]") {
			t.Errorf("%s shows %s, want the token redacted", what, s)
		}
	}
}

// failingStore is a task state whose backend is down.
type failingStore struct{ taskstate.Store }

func (failingStore) Paused(context.Context, string) (taskstate.Pause, error) {
	return taskstate.Pause{}, errors.New("store down")
}

// With the task state unreachable, GET /scheduledtasks still shows this
// node's view, and says why the cluster's is missing.
func TestScheduledTasksWithoutTheState(t *testing.T) {
	store, _ := taskstate.NewInProcess(0)
	s := scheduling.New(scheduling.Config{Logger: slog.New(slog.DiscardHandler), State: failingStore{store}})
	if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"), scheduling.Name("report"))); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, quietHandler(t, s), "/scheduledtasks")
	tasks, _ := body["tasks"].([]any)
	if code != http.StatusOK || len(tasks) != 1 || !strings.Contains(fmt.Sprint(body["stateError"]), "store down") {
		t.Fatalf("GET /scheduledtasks with the store down: %d %v; want the task and stateError", code, body)
	}
	// Its health is unknown, and says why.
	if h, _ := tasks[0].(map[string]any)["health"].(map[string]any); h["state"] != "unknown" || !strings.Contains(fmt.Sprint(h["reason"]), "store down") {
		t.Errorf("health with the store down: %v; want unknown, with the store's error", h)
	}
	if code, body := get(t, quietHandler(t, s), "/scheduledtasks/report/health"); code != http.StatusServiceUnavailable && code != http.StatusInternalServerError ||
		!strings.Contains(fmt.Sprint(body["error"]), "store down") {
		t.Errorf("GET .../health with the store down: %d %v; want an error naming the store's", code, body)
	}
}

// A pause or resume keeps the note and who sent it, shown in the task
// list, by the token's holder ("admin" for Options.Token) and what the
// client says; without a body, by the holder; a bad note is a 400 naming it and
// changes nothing.
func TestPauseNoteOverHTTP(t *testing.T) {
	c := newControlled(t, secret)
	send := func(action, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, taskPath(action), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("POST %s: %v in %s", action, err, rec.Body)
		}
		return rec.Code, out
	}
	note := func() map[string]any {
		t.Helper()
		_, _, tasks := c.do(t, http.MethodGet, "/scheduledtasks", "")
		p, _ := tasks["tasks"].([]any)[0].(map[string]any)["pauseNote"].(map[string]any)
		return p
	}
	if code, body := send("pause", `{"note": "ledger migration\nback at 14:00", "by": "ndigo CLI (ops)"}`); code != http.StatusOK {
		t.Fatalf("POST pause with a note: %d %v", code, body)
	}
	if p := note(); p["paused"] != true || p["note"] != "ledger migration\nback at 14:00" || p["by"] != "admin: ndigo CLI (ops)" || p["at"] != "2026-01-01T00:00:00Z" {
		t.Fatalf("pauseNote %v, want the pause's note, by and at", p)
	}
	if code, body := send("resume", `{"note": "bad\u0001note"}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), "pause note") {
		t.Fatalf("POST resume with a control character in its note: %d %v, want 400 naming the note", code, body)
	}
	if code, body := send("resume", `{"note": "x", "who": "me"}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), `"who"`) {
		t.Fatalf("POST resume with an unknown field: %d %v, want 400 naming it", code, body)
	}
	if p := note(); p["paused"] != true {
		t.Fatalf("pauseNote %v after refused resumes, want the pause kept", p)
	}
	if code, body := send("resume", ""); code != http.StatusOK {
		t.Fatalf("POST resume without a body: %d %v", code, body)
	}
	if p := note(); p["paused"] != false || p["by"] != "admin" || p["note"] != nil {
		t.Fatalf("pauseNote %v after a resume without a body, want resumed by admin without a note", p)
	}
}
