package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/taskstate"
)

// backfilling is a real Handler, with the token secret, on the backfill
// tests' scenario (fakenode.Backfilling: node-a at epoch, "report" locked
// with its first run blocked at the gate and instant 0 already run,
// "plain" unlocked).
type backfilling struct {
	*fakenode.Backfilling
	h *Handler
}

func newBackfilling(t *testing.T) *backfilling {
	t.Helper()
	b := &backfilling{Backfilling: fakenode.StartBackfilling(t, epoch)}
	var err error
	b.h, err = New(Options{Scheduler: b.S, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored returns the store's last backfill of report.
func (b *backfilling) stored(t *testing.T) (taskstate.Backfill, bool) {
	t.Helper()
	p, err := b.Store.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := p.Backfills["report"]
	return got, ok
}

// rangeBody is the body of a backfill of [from, to] with the extra fields.
func rangeBody(from, to time.Time, extra string) string {
	return fmt.Sprintf(`{"from": %q, "to": %q%s}`, from.Format(time.RFC3339), to.Format(time.RFC3339), extra)
}

// post serves POST path with body and the bearer token auth ("" for no
// header), and returns the status, the headers and the raw body.
func post(t *testing.T, h http.Handler, path, auth, body string) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("POST %s: content type %q, body %s", path, ct, rec.Body)
	}
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// decode unmarshals body into a generic map and into v, if not nil.
func decode(t *testing.T, body []byte, v any) map[string]any {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
	}
	return raw
}

// A backfill over HTTP: 202 with the backfill as started; every task of
// GET /scheduledtasks shows its last backfill as "backfill", with its
// progress, from the node's next poll (a task without one has no such
// key); a second backfill while it runs is a 409, naming it; a cancel is a
// 200 that the store holds, a second one a 409; the runs of a backfill are
// marked "backfill": true in the history and the task's last run; a forced
// backfill with an overlap policy shows both.
func TestBackfillOverHTTP(t *testing.T) {
	b := newBackfilling(t)
	in := b.Instants
	code, _, body := post(t, b.h, "/scheduledtasks/report/backfill", secret, rangeBody(in[0], in[9], ""))
	var started BackfillJSON
	raw := decode(t, body, &started)
	if code != http.StatusAccepted || started.ID == "" || started.Task != "report" || !started.From.Equal(in[0]) || !started.To.Equal(in[9]) ||
		started.Total != 10 || started.State != taskstate.BackfillRunning || started.Node != "node-a" || !started.Created.Equal(epoch) {
		t.Fatalf("POST backfill: %d %s; want 202 with the backfill of 10 instants, running", code, body)
	}
	for key, want := range map[string]any{"id": started.ID, "task": "report", "from": "2025-12-31T14:00:00Z", "to": "2025-12-31T23:00:00Z",
		"total": 10.0, "taken": 0.0, "refused": 0.0, "state": "running", "node": "node-a", "created": "2026-01-01T00:00:00Z"} {
		if raw[key] != want {
			t.Errorf("POST backfill: %q is %v, want %v", key, raw[key], want)
		}
	}
	for _, key := range []string{"force", "overlap", "cursor"} {
		if v, ok := raw[key]; ok {
			t.Errorf("POST backfill: %q is %v, want it absent (not forced, the task's overlap, nothing taken yet)", key, v)
		}
	}

	// The first instant ran already (node-b's run): refused; the second's
	// run blocks.
	b.StepTo(t, 3*time.Second)
	tasks, rawTasks := listTasks(t, b.h, 2)
	bf := tasks["report"].Backfill
	if bf == nil || bf.ID != started.ID || bf.State != taskstate.BackfillRunning || bf.Taken != 1 || bf.Refused != 1 || !bf.Cursor.Equal(in[1]) {
		t.Fatalf("report's backfill %+v, want %s running, 1 taken, 1 refused, at %v", bf, started.ID, in[1])
	}
	if got, _ := rawTasks["report"]["backfill"].(map[string]any); got["cursor"] != "2025-12-31T15:00:00Z" || got["taken"] != 1.0 || got["refused"] != 1.0 {
		t.Errorf("report's raw backfill %v, want cursor 15:00, 1 taken, 1 refused", got)
	}
	if v, ok := rawTasks["plain"]["backfill"]; ok {
		t.Errorf("plain's backfill %v, want no key: it never had one", v)
	}

	code, _, body = post(t, b.h, "/scheduledtasks/report/backfill", secret, rangeBody(in[0], in[9], ""))
	if msg, _ := decode(t, body, nil)["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "a backfill of the task is running") ||
		!strings.Contains(msg, started.ID) {
		t.Errorf("a second backfill while one runs: %d %s; want 409 naming the running one", code, body)
	}

	code, _, body = post(t, b.h, "/scheduledtasks/report/cancel-backfill", secret, "")
	if got := decode(t, body, nil); code != http.StatusOK || got["task"] != "report" || got["action"] != "cancel-backfill" || got["status"] != "cancelled" {
		t.Fatalf("POST cancel-backfill: %d %s; want 200, cancelled", code, body)
	}
	if got, _ := b.stored(t); got.ID != started.ID || got.State != taskstate.BackfillCancelled {
		t.Errorf("the store's backfill after the cancel: %+v, want %s cancelled", got, started.ID)
	}
	code, _, body = post(t, b.h, "/scheduledtasks/report/cancel-backfill", secret, "")
	if msg, _ := decode(t, body, nil)["error"].(string); code != http.StatusConflict || !strings.Contains(msg, `no backfill running: task "report"`) {
		t.Errorf("a second cancel: %d %s; want 409, no backfill running", code, body)
	}

	// The run in flight finishes; no further instant runs.
	b.Gate.Open()
	b.StepTo(t, 6*time.Second)
	tasks, _ = listTasks(t, b.h, 2)
	if bf := tasks["report"].Backfill; bf == nil || bf.State != taskstate.BackfillCancelled || bf.Taken != 1 || bf.Refused != 1 {
		t.Errorf("report's backfill once cancelled: %+v, want cancelled, 1 taken, 1 refused", bf)
	}
	if l := tasks["report"].LastRun; l == nil || !l.Backfill || !l.Fire.Equal(in[1]) || l.Outcome != "ok" {
		t.Errorf("report's last run %+v, want the backfill's run of %v", l, in[1])
	}
	runs := taskRuns(t, b.h, "report")
	if len(runs.Runs) != 2 || !runs.Runs[0].Backfill || !runs.Runs[0].Fire.Equal(in[1]) || runs.Runs[0].Token == 0 || runs.Runs[1].Backfill {
		t.Fatalf("runs %+v; want the backfill's run of %v, under a lock, then node-b's run, not a backfill's", runs.Runs, in[1])
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks/report/runs", nil))
	if !strings.Contains(rec.Body.String(), `"backfill": true,`) || !strings.Contains(rec.Body.String(), `"backfill": false,`) {
		t.Errorf("GET runs: %s; want backfill true on the backfill's run, false on the other", rec.Body)
	}

	// Forced, with an overlap policy, by the query form: it runs the
	// instants that ran, and is done.
	code, _, body = post(t, b.h, "/scheduledtasks/backfill?name=report", secret, rangeBody(in[0], in[2], `, "force": true, "overlap": "skip"`))
	raw = decode(t, body, &started)
	if code != http.StatusAccepted || raw["force"] != true || raw["overlap"] != "skip" || started.Total != 3 {
		t.Fatalf("POST a forced backfill: %d %s; want 202 with force and overlap", code, body)
	}
	b.StepTo(t, 9*time.Second)
	tasks, _ = listTasks(t, b.h, 2)
	if bf := tasks["report"].Backfill; bf == nil || bf.ID != started.ID || bf.State != taskstate.BackfillDone || bf.Taken != 3 || bf.Refused != 0 || !bf.Force {
		t.Errorf("the forced backfill %+v, want done, 3 taken, none refused", bf)
	}
}

// A backfill the handler or the scheduler cannot start is refused with a
// message that names the field, the value and the rule, and starts
// nothing: 400 for the body and the range, 404 for an unknown task, 401
// and 403 for the token, 405 for another method.
func TestBackfillRefusals(t *testing.T) {
	b := newBackfilling(t)
	in := b.Instants
	ok := rangeBody(in[0], in[9], "")
	for _, c := range []struct {
		path, auth, body string
		code             int
		want             string
	}{
		{"/scheduledtasks/report/backfill", secret, "", http.StatusBadRequest, `body: empty; want the JSON object {"from": RFC 3339, "to": RFC 3339, "force": bool, "overlap": string}`},
		{"/scheduledtasks/report/backfill", secret, "{", http.StatusBadRequest, `body: not the JSON object {"from"`},
		{"/scheduledtasks/report/backfill", secret, `{"from": 1}`, http.StatusBadRequest, `body: not the JSON object`},
		{"/scheduledtasks/report/backfill", secret, rangeBody(in[0], in[9], `, "forse": true`), http.StatusBadRequest, `json: unknown field "forse"`},
		{"/scheduledtasks/report/backfill", secret, ok + ok, http.StatusBadRequest, "body: more than one JSON value"},
		{"/scheduledtasks/report/backfill", secret, `{"to": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest,
			`body: "from" is missing: want the range's first instant, RFC 3339 such as 2026-01-01T00:00:00Z`},
		{"/scheduledtasks/report/backfill", secret, `{"from": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest, `body: "to" is missing`},
		{"/scheduledtasks/report/backfill", secret, `{"from": "yesterday", "to": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest,
			`body: "from" "yesterday": must be an RFC 3339 time such as 2026-01-01T00:00:00Z`},
		{"/scheduledtasks/report/backfill", secret, `{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01 01:00:00"}`, http.StatusBadRequest,
			`body: "to" "2026-01-01 01:00:00": must be an RFC 3339 time`},
		{"/scheduledtasks/report/backfill", secret, rangeBody(in[9], in[0], ""), http.StatusBadRequest, "to must not be before from"},
		{"/scheduledtasks/report/backfill", secret, rangeBody(in[0].Add(time.Minute), in[0].Add(time.Minute), ""), http.StatusBadRequest,
			`holds no instant of the schedule "0 * * * *"`},
		{"/scheduledtasks/report/backfill", secret, rangeBody(in[0], in[9], `, "overlap": "cancel-previous"`), http.StatusBadRequest,
			`overlap "cancel-previous": refused for a backfill`},
		{"/scheduledtasks/report/backfill", secret, rangeBody(in[0], in[9], `, "overlap": "queue"`), http.StatusBadRequest, `overlap "queue": must be one of`},
		{"/scheduledtasks/report/backfill", secret, `{"from": "` + strings.Repeat("x", 8<<10) + `"}`, http.StatusBadRequest, "request body too large"},
		{"/scheduledtasks/plain/backfill", secret, ok, http.StatusBadRequest, "task plain: needs lock"},
		{"/scheduledtasks/nope/backfill", secret, ok, http.StatusNotFound, `"nope"`},
		{"/scheduledtasks/nope/cancel-backfill", secret, "", http.StatusNotFound, `"nope"`},
		{"/scheduledtasks/report/cancel-backfill", secret, "", http.StatusConflict, `no backfill running: task "report"`},
		{"/scheduledtasks/report/backfill", "", ok, http.StatusUnauthorized, "missing or wrong bearer token"},
		{"/scheduledtasks/report/backfill", "wrong", ok, http.StatusUnauthorized, "missing or wrong bearer token"},
		{"/scheduledtasks/report/cancel-backfill", "", "", http.StatusUnauthorized, "missing or wrong bearer token"},
	} {
		code, _, body := post(t, b.h, c.path, c.auth, c.body)
		if msg, _ := decode(t, body, nil)["error"].(string); code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("POST %s %.60q: %d %s; want %d with %q", c.path, c.body, code, body, c.code, c.want)
		}
	}
	if got, ok := b.stored(t); ok {
		t.Errorf("the store holds the backfill %+v after refusals only", got)
	}

	noToken := quietHandler(t, b.S)
	if code, _, body := post(t, noToken, "/scheduledtasks/report/backfill", "anything", ok); code != http.StatusForbidden {
		t.Errorf("POST backfill with no token configured: %d %s; want 403", code, body)
	}
	for _, action := range []string{"backfill", "cancel-backfill"} {
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks/report/"+action, nil))
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodPost {
			t.Errorf("GET %s: %d, Allow %q; want 405, POST", action, rec.Code, rec.Header().Get("Allow"))
		}
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks/report/bogus", nil))
	if !strings.Contains(rec.Body.String(), "run, pause, resume, backfill and cancel-backfill (POST)") {
		t.Errorf("GET an unknown action: %s; want the actions listed", rec.Body)
	}
}
