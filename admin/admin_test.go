package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/backendnode"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, backendnode.DialProbe)
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newScheduler returns a started scheduler on a fake clock at epoch, in a
// zone other than UTC so that the UTC timestamps show.
func newScheduler(t *testing.T, tasks ...scheduling.Task) (*scheduling.Scheduler, *clockwork.FakeClock) {
	t.Helper()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	fc := clockwork.NewFakeClockAt(epoch.In(paris))
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", Logger: slog.New(slog.DiscardHandler), Location: paris,
		Driver: locks.NewInProcessDriver(locks.WithClock(fc))})
	if err := s.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s, fc
}

// quietHandler returns a Handler on s whose logs are discarded.
func quietHandler(t *testing.T, s *scheduling.Scheduler) *Handler {
	t.Helper()
	h, err := New(Options{Scheduler: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// listTasks returns h's GET /scheduledtasks, decoded, and each task as raw
// keys, by name. It fails the test unless the answer is 200 with n tasks.
func listTasks(t *testing.T, h http.Handler, n int) (map[string]TaskJSON, map[string]map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks", nil))
	var typed TasksJSON
	var raw struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &typed); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /scheduledtasks: %d %v: %s", rec.Code, err, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(typed.Tasks) != n || len(raw.Tasks) != n {
		t.Fatalf("GET /scheduledtasks: %v, want %d tasks: %s", err, n, rec.Body)
	}
	byName, rawByName := map[string]TaskJSON{}, map[string]map[string]any{}
	for i, task := range typed.Tasks {
		byName[task.Name], rawByName[task.Name] = task, raw.Tasks[i]
	}
	return byName, rawByName
}

// taskRuns returns h's GET /scheduledtasks/{name}/runs, decoded. It fails
// the test unless the answer is 200.
func taskRuns(t *testing.T, h http.Handler, name string) RunsJSON {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks/"+url.PathEscape(name)+"/runs", nil))
	var runs RunsJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &runs); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET runs of %s: %d %v %s", name, rec.Code, err, rec.Body)
	}
	return runs
}

// get serves GET path with h and decodes the JSON body into a generic map.
func get(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: content type %q", path, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, rec.Body)
	}
	return rec.Code, body
}

func TestScheduledTasks(t *testing.T) {
	failure := errors.New("books do not balance")
	s, fc := newScheduler(t,
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
			scheduling.Lock("payroll-window"), scheduling.LockTTL(30*time.Second), scheduling.Name("close")),
		scheduling.NewTask(func(context.Context) error { return failure }, scheduling.Cron("@every 1s"),
			scheduling.Name("fails")),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("0 2 * * *"),
			scheduling.Name("nightly")),
	)
	h, err := New(Options{Scheduler: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := schedulingtest.Step(context.Background(), fc, time.Second, 0, s); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, h, "/scheduledtasks")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	tasks := body["tasks"].([]any)
	if len(tasks) != 3 {
		t.Fatalf("%d tasks: %v", len(tasks), tasks)
	}
	closeTask := tasks[0].(map[string]any)
	for key, want := range map[string]any{"name": "close", "cron": "@every 1s", "lock": "payroll-window", "lockTtl": "30s"} {
		if closeTask[key] != want {
			t.Errorf("close.%s = %v, want %v", key, closeTask[key], want)
		}
	}
	if next, _ := closeTask["next"].(string); next != "2026-01-01T00:00:02Z" {
		t.Errorf("close.next = %v, want the 2s fire in RFC 3339 UTC", closeTask["next"])
	}
	last := closeTask["lastRun"].(map[string]any)
	if last["outcome"] != "ok" || last["node"] != "node-a" || last["fire"] != "2026-01-01T00:00:01Z" ||
		last["start"] != "2026-01-01T00:00:01Z" || last["duration"] != "0s" || last["token"].(float64) <= 0 ||
		last["attempt"] != 1.0 || last["manual"] != false {
		t.Errorf("close.lastRun = %v", last)
	}
	failed := tasks[1].(map[string]any)["lastRun"].(map[string]any)
	if failed["outcome"] != "error" || failed["error"] != failure.Error() {
		t.Errorf("fails.lastRun = %v", failed)
	}
	if _, has := failed["token"]; has {
		t.Errorf("an unlocked run shows a token: %v", failed)
	}
	nightly := tasks[2].(map[string]any)
	if nightly["lastRun"] != nil || nightly["lastFire"] != nil || nightly["lock"] != "" || nightly["retries"] != 0.0 ||
		nightly["retryBackoff"] != "" || nightly["retryMaxBackoff"] != "" || nightly["retryAt"] != nil ||
		nightly["overlap"] != "skip" || nightly["maxConcurrent"] != 0.0 || nightly["waitingFire"] != nil {
		t.Errorf("never-fired unlocked task: %v", nightly)
	}
	// Every documented field is present, whether it applies or not.
	for _, key := range []string{"name", "type", "method", "cron", "lock", "lockTtl", "lockWait", "maxRunTime", "renew",
		"retries", "retryBackoff", "retryMaxBackoff", "overlap", "maxConcurrent", "next", "retryAt", "waitingFire", "running", "waiting", "runs", "skips", "failures", "lastFire", "lastRun"} {
		if _, ok := nightly[key]; !ok {
			t.Errorf("field %q missing: %v", key, nightly)
		}
	}
	// 02:00 in the scheduler's zone (Paris) is 01:00 UTC.
	if _, err := time.Parse(time.RFC3339, nightly["next"].(string)); err != nil || nightly["next"] != "2026-01-01T01:00:00Z" {
		t.Errorf("nightly.next = %v (%v)", nightly["next"], err)
	}
}

func TestLocks(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s, fc := newScheduler(t,
		scheduling.NewTask(func(context.Context) error {
			close(started)
			<-release
			return nil
		}, scheduling.Cron("@every 1h"), scheduling.Lock("payroll-window"), scheduling.Name("close")))
	h, err := New(Options{Scheduler: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, h, "/locks"); len(body["locks"].([]any)) != 0 {
		t.Fatalf("locks before any run: %v", body)
	}
	if err := fc.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Hour)
	<-started
	code, body := get(t, h, "/locks")
	locksHeld := body["locks"].([]any)
	if code != http.StatusOK || len(locksHeld) != 1 {
		t.Fatalf("status %d, locks %v", code, body)
	}
	l := locksHeld[0].(map[string]any)
	if l["key"] != "payroll-window" || l["task"] != "close" || l["token"].(float64) <= 0 ||
		l["since"] != "2026-01-01T01:00:00Z" || l["fire"] != "2026-01-01T01:00:00Z" {
		t.Fatalf("lock %v", l)
	}
	close(release)
	if err := schedulingtest.Settle(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func TestHealthz(t *testing.T) {
	s, _ := newScheduler(t)
	down := errors.New("disk full")
	h, err := New(Options{Scheduler: s, Checks: []Check{
		{Name: "ok-dep", Check: func(context.Context) error { return nil }},
		{Name: "disk", Check: func(context.Context) error { return down }},
		{Name: "slow", Check: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	}, CheckTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, h, "/healthz")
	if code != http.StatusServiceUnavailable || body["status"] != "unavailable" {
		t.Fatalf("status %d body %v, want 503 unavailable", code, body)
	}
	checks := body["checks"].(map[string]any)
	if checks["ok-dep"] != "ok" || checks["disk"] != "disk full" || !strings.Contains(checks["slow"].(string), "deadline") {
		t.Fatalf("checks %v", checks)
	}
	h, _ = New(Options{Scheduler: s, Checks: []Check{{Name: "ok-dep", Check: func(context.Context) error { return nil }}}})
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("healthy: %d %v", code, body)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	s, _ := newScheduler(t)
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{}, "Scheduler is nil"},
		{Options{Scheduler: s, CheckTimeout: -time.Second}, "CheckTimeout -1s"},
		{Options{Scheduler: s, Checks: []Check{{Name: "x"}}}, `Checks[0] (name "x")`},
		{Options{Scheduler: s, Routes: []Route{{Pattern: "GET /healthz", Handler: http.NotFoundHandler()}}}, "Routes[0]"},
	} {
		_, err := New(c.opts)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalid naming %q", c.opts, err, c.want)
		}
	}
}

// TestModuleServesWithChecks runs the module on its own address with a
// check of the checks group, which then fails.
func TestModuleServesWithChecks(t *testing.T) {
	var down atomic.Bool
	var server *Server
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(Check{Name: "store", Check: func(context.Context) error {
			if down.Load() {
				return errors.New("ping: connection refused")
			}
			return nil
		}}, fx.ResultTags(`group:"`+ChecksGroup+`"`))),
		fx.Supply(Config{Addr: "127.0.0.1:0"}),
		fx.Provide(func() *slog.Logger { return slog.New(slog.DiscardHandler) }),
		locks.Module,
		scheduling.Module,
		Module,
		Mount("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ndigo_up 1\n")
		})),
		fx.Populate(&server),
	)
	app.RequireStart()
	base := "http://" + server.Addr()
	fetch := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := fetch("/healthz"); code != http.StatusOK || !strings.Contains(body, `"store": "ok"`) {
		t.Fatalf("healthz with the store up: %d %s", code, body)
	}
	if code, body := fetch("/metrics"); code != http.StatusOK || body != "ndigo_up 1\n" {
		t.Fatalf("mounted route: %d %q", code, body)
	}
	if code, _ := fetch("/scheduledtasks"); code != http.StatusOK {
		t.Fatalf("scheduledtasks: %d", code)
	}
	down.Store(true)
	code, body := fetch("/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"store": "ping: connection refused"`) ||
		!strings.Contains(body, `"status": "unavailable"`) {
		t.Fatalf("healthz with the store down: %d %s", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
	app.RequireStop()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatalf("server still answers after stop")
	}
}

func TestModuleWithoutAddressServesNothing(t *testing.T) {
	var server *Server
	var h *Handler
	app := fxtest.New(t,
		fx.Provide(func() *slog.Logger { return slog.New(slog.DiscardHandler) }),
		scheduling.Module,
		Module,
		fx.Populate(&server, &h),
	)
	app.RequireStart()
	defer app.RequireStop()
	if server.Addr() != "" || h == nil {
		t.Fatalf("server at %q, handler %v", server.Addr(), h)
	}
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || len(body["checks"].(map[string]any)) != 0 {
		t.Fatalf("healthz without checks: %d %v", code, body)
	}
}

func TestModuleFailsStartOnATakenPort(t *testing.T) {
	taken := httptest.NewServer(http.NotFoundHandler())
	defer taken.Close()
	addr := strings.TrimPrefix(taken.URL, "http://")
	app := fx.New(fx.NopLogger,
		fx.Supply(Config{Addr: addr}),
		fx.Provide(func() *slog.Logger { return slog.New(slog.DiscardHandler) }),
		scheduling.Module,
		Module,
	)
	err := app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "admin: listen on "+addr) {
		t.Fatalf("start on a taken port: %v", err)
	}
}
