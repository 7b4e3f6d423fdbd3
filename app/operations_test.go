package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// startOperations starts an app with fw and one task, and returns the
// admin server's base URL ("" when it serves nothing).
func startOperations(t *testing.T, fw app.Framework) string {
	t.Helper()
	var srv *admin.Server
	a := app.New(logTo(io.Discard), fx.Supply(fw),
		fakeClock(clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Name("close-books"), scheduling.Cron("@daily"))
		}),
		fx.Populate(&srv))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	if srv.Addr() == "" {
		return ""
	}
	return "http://" + srv.Addr()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The configuration's admin section turns the endpoints and metrics on:
// admin.addr serves the admin handler, admin.metrics adds /metrics there
// with the task's counters at zero before its first fire.
func TestAdminSectionServesEndpointsAndMetrics(t *testing.T) {
	if base := startOperations(t, app.Framework{}); base != "" {
		t.Fatalf("no admin.addr: serving at %s", base)
	}

	base := startOperations(t, app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0"}})
	if code, body := get(t, base+"/scheduledtasks"); code != http.StatusOK || !strings.Contains(body, `"close-books"`) {
		t.Fatalf("/scheduledtasks = %d %s", code, body)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics without admin.metrics = %d, want 404", code)
	}

	base = startOperations(t, app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0", Metrics: true}})
	code, body := get(t, base+"/metrics")
	for _, want := range []string{
		`ndigo_task_fires_total{task="close-books"} 0`,
		`ndigo_task_skips_total{reason="already_run",task="close-books"} 0`,
		"go_goroutines ",
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics = %d, missing %q:\n%s", code, want, body)
		}
	}
}

// A configuration that fails to load fails Run with that one error, and
// nothing is printed: not on the log output, and not on stderr, where fx
// prints its own report when it cannot build the application's logger.
func TestBadConfigurationIsOneError(t *testing.T) {
	var out syncbuf.Buffer
	type appConfig struct {
		app.Framework `yaml:",inline"`
	}
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = stderr
	err = app.Run(context.Background(), logTo(&out),
		config.Module[appConfig](config.LoadOptions{Data: []byte("log: {level: loud}\n"), Path: "app.yaml"}))
	os.Stderr = saved
	if err == nil || strings.Count(err.Error(), `log.level "loud"`) != 1 {
		t.Fatalf("Run = %v, want the config error once", err)
	}
	printed, _ := os.ReadFile(stderr.Name())
	if out.String() != "" || len(printed) != 0 {
		t.Fatalf("logged %q, printed %q; want nothing", out.String(), printed)
	}
}

// healthz returns /healthz's status code and body, decoded.
func healthz(t *testing.T, base string) (int, admin.HealthJSON) {
	t.Helper()
	code, body := get(t, base+"/healthz")
	var h admin.HealthJSON
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("/healthz: %v in %s", err, body)
	}
	return code, h
}

// /healthz checks the lock driver and the task state store the scheduler
// runs on, on Redis and on PostgreSQL alike: 200 while the server runs, 503
// naming both checks while it is down (with the address, never the
// password), and 200 again once it is back.
func TestHealthzChecksTheBackends(t *testing.T) {
	const password = "hunter2-healthz"
	for _, tc := range []struct {
		name   string
		driver string
		start  func(t *testing.T) (fw app.Framework, module fx.Option, addr string, kill, restart, pause, resume func())
	}{
		{"redis", "redislocks (namespace healthz)", func(t *testing.T) (app.Framework, fx.Option, string, func(), func(), func(), func()) {
			srv := redistest.Start(t)
			fw := app.Framework{Redis: app.Redis{URL: config.SecretURL("redis://" + srv.Addr() + "/0"), Namespace: "healthz"}}
			return fw, redislocks.Module, srv.Addr(), srv.Kill, srv.Restart, srv.Pause, srv.Resume
		}},
		{"postgres", "pglocks (namespace healthz)", func(t *testing.T) (app.Framework, fx.Option, string, func(), func(), func(), func()) {
			srv := pgtest.Start(t)
			// Trust authentication ignores the password; the answers must
			// not show it.
			url := strings.Replace(srv.URL(), "postgres@", "postgres:"+password+"@", 1)
			fw := app.Framework{Postgres: app.Postgres{URL: config.SecretURL(url), Namespace: "healthz"}}
			return fw, pglocks.Module, srv.Addr(), srv.Kill, srv.Restart, srv.Pause, srv.Resume
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw, module, addr, kill, restart, pause, resume := tc.start(t)
			fw.Admin = app.Admin{Addr: "127.0.0.1:0"}
			var server *admin.Server
			a := app.New(logTo(io.Discard), fx.Supply(fw), module, fx.Populate(&server))
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = a.Stop(context.Background()) }()
			defer http.DefaultClient.CloseIdleConnections()
			base := "http://" + server.Addr()
			want := map[string]string{admin.LocksCheck: "ok", admin.TaskStateCheck: "ok"}
			if code, h := healthz(t, base); code != http.StatusOK || h.Status != "ok" || h.Driver != tc.driver || !maps.Equal(h.Checks, want) {
				t.Fatalf("/healthz with the server up: %d %+v; want 200 ok from %s with checks %v", code, h, tc.driver, want)
			}
			kill()
			code, h := healthz(t, base)
			if code != http.StatusServiceUnavailable || h.Status != "unavailable" || len(h.Checks) != 2 {
				t.Fatalf("/healthz with the server down: %d %+v; want 503 unavailable", code, h)
			}
			for _, name := range []string{admin.LocksCheck, admin.TaskStateCheck} {
				if msg := h.Checks[name]; !strings.Contains(msg, strings.Fields(tc.driver)[0]+": ") || !strings.Contains(msg, addr) || strings.Contains(msg, password) {
					t.Errorf("check %q with the server down: %q; want the driver's error naming %s, without the password", name, msg, addr)
				}
			}
			restart()
			if code, h := healthz(t, base); code != http.StatusOK || !maps.Equal(h.Checks, want) {
				t.Fatalf("/healthz after the restart: %d %+v; want 200 with checks %v", code, h, want)
			}

			// A server that hangs (stopped, its connections open) fails both
			// checks at their timeout, together: within one CheckTimeout,
			// where one after the other they would take two.
			pause()
			start := time.Now()
			code, h = healthz(t, base)
			took := time.Since(start)
			resume()
			if code != http.StatusServiceUnavailable || len(h.Checks) != 2 || took >= 2*admin.DefaultCheckTimeout {
				t.Fatalf("/healthz with the server hung: %d %+v after %v; want 503 within %v", code, h, took, 2*admin.DefaultCheckTimeout)
			}
			for _, name := range []string{admin.LocksCheck, admin.TaskStateCheck} {
				if msg := h.Checks[name]; !strings.Contains(msg, "deadline exceeded") || !strings.Contains(msg, addr) {
					t.Errorf("check %q with the server hung: %q; want its timeout, naming %s", name, msg, addr)
				}
			}
			if code, h := healthz(t, base); code != http.StatusOK || !maps.Equal(h.Checks, want) {
				t.Fatalf("/healthz after the server resumed: %d %+v; want 200 with checks %v", code, h, want)
			}
		})
	}
}

// On the in-process driver and store nothing can be down: /healthz has no
// check of them, and says so with 200.
func TestHealthzInProcess(t *testing.T) {
	base := startOperations(t, app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0"}})
	defer http.DefaultClient.CloseIdleConnections()
	if code, h := healthz(t, base); code != http.StatusOK || len(h.Checks) != 0 || !strings.HasPrefix(h.Driver, "locks.InProcessDriver") {
		t.Fatalf("/healthz in process: %d %+v; want 200 without checks", code, h)
	}
}

// The configuration's redis.url or postgres.url alone chooses the lock
// driver and the task state, with no module to add: on a live server the
// scheduler runs on that driver and the Backend holds its client or pool;
// on an unreachable one, start fails naming the address, never the
// password; with both URLs, the app refuses to build, naming both.
func TestStoreURLChoosesTheDriver(t *testing.T) {
	rs, pg := redistest.Start(t), pgtest.Start(t)
	for _, c := range []struct {
		fw              app.Framework
		driver, refused string
	}{
		{app.Framework{Redis: app.Redis{URL: config.SecretURL("redis://" + rs.Addr() + "/0"), Namespace: "chosen"}},
			"redislocks (namespace chosen)", ""},
		{app.Framework{Postgres: app.Postgres{URL: config.SecretURL(pg.URL()), Namespace: "chosen"}}, "pglocks (namespace chosen)", ""},
		{app.Framework{Redis: app.Redis{URL: "redis://:hunter2@127.0.0.1:1/0", Namespace: "prod"}}, "", "cannot reach Redis at 127.0.0.1:1"},
		{app.Framework{Postgres: app.Postgres{URL: "postgres://u:hunter2@127.0.0.1:1/db", Namespace: "prod"}}, "", "cannot reach PostgreSQL at 127.0.0.1"},
	} {
		var s *scheduling.Scheduler
		var b app.Backend
		a := app.New(logTo(io.Discard), fx.Supply(c.fw), fx.Populate(&s, &b))
		err := a.Start(context.Background())
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: start = %v; want %q, without the password", c.refused, err, c.refused)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := s.DriverName(); got != c.driver || (b.Redis == nil) == (c.fw.Redis.URL != "") || (b.Postgres == nil) == (c.fw.Postgres.URL != "") {
			t.Errorf("driver %q, backend %+v; want %q and its client or pool", got, b, c.driver)
		}
		if err := a.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	both := app.Framework{Redis: app.Redis{URL: "redis://:hunter2@127.0.0.1:1/0", Namespace: "a"},
		Postgres: app.Postgres{URL: "postgres://u:hunter2@127.0.0.1:1/db", Namespace: "a"}}
	err := app.Run(context.Background(), logTo(io.Discard), fx.Supply(both))
	if err == nil || !strings.HasPrefix(err.Error(), "app: the configuration names both redis.url") || strings.Contains(err.Error(), "hunter2") ||
		strings.Contains(err.Error(), "app: app:") {
		t.Errorf("Run with both URLs = %v; want the choice refused with one prefix, without the passwords", err)
	}
}

// Log's levels read as slog levels; a level that did not validate reads as
// Info.
func TestLogLevels(t *testing.T) {
	l := app.Log{Level: "debug", SkipLevel: "warn"}
	if l.SlogLevel() != slog.LevelDebug || l.SlogSkipLevel() != slog.LevelWarn || (app.Log{Level: "loud"}).SlogLevel() != slog.LevelInfo {
		t.Fatalf("levels %v %v", l.SlogLevel(), l.SlogSkipLevel())
	}
}

// The lock stores' rules are the drivers', checked at load with the key,
// the value's source and the driver's reason, never the password.
func TestFrameworkRedisRulesAtLoad(t *testing.T) {
	type appConfig struct {
		app.Framework `yaml:",inline"`
	}
	_, err := config.Load[appConfig](config.LoadOptions{Path: "app.yaml",
		Data: []byte("redis:\n  url: redis://:hunter2@h:1/0?bogus=1\n  namespace: a:b\n" +
			"postgres:\n  url: host=db password=hunter2\n  namespace: x y\n")})
	for _, want := range []string{
		`redis.url "redis://:xxxxx@h:1/0?bogus=1" (app.yaml:2): go-redis cannot parse it`,
		`redis.namespace "a:b" (app.yaml:3): has ':' at byte 1`,
		`postgres.url "[REDACTED]" (app.yaml:5): must be a postgres:// or postgresql:// URL`,
		`postgres.namespace "x y" (app.yaml:6): has ' ' at byte 1`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("Load = %v; want %q, without the password", err, want)
		}
	}
}

func post(t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body := admintest.Send(t, http.MethodPost, url, token)
	return code, string(body)
}

// admin.token reaches the handler: the control endpoints need it, and the
// app's default task state (taskstate.Module) keeps the paused flag.
func TestAdminTokenGuardsTaskControl(t *testing.T) {
	base := startOperations(t, app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0"}})
	if code, body := post(t, base+"/scheduledtasks/close-books/pause", "anything"); code != http.StatusForbidden || !strings.Contains(body, "admin.token") {
		t.Fatalf("pause without admin.token = %d %s, want 403 naming admin.token", code, body)
	}
	base = startOperations(t, app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0", Token: "t0ken"}})
	if code, _ := post(t, base+"/scheduledtasks/close-books/pause", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("pause with a wrong token = %d, want 401", code)
	}
	if code, body := post(t, base+"/scheduledtasks/close-books/pause", "t0ken"); code != http.StatusOK || !strings.Contains(body, `"paused": true`) {
		t.Fatalf("pause with admin.token = %d %s, want 200 paused", code, body)
	}
	if code, body := get(t, base+"/scheduledtasks"); code != http.StatusOK || !strings.Contains(body, `"paused": true`) {
		t.Fatalf("/scheduledtasks after pause = %d %s, want the task paused", code, body)
	}
}

// With admin.metrics, /metrics serves the audit's gauges that the docs tell
// operators to alert on, equal to the scheduler's audit: fires missed
// while the node was stuck (the clock jumped ten minutes) are counted.
// Before, app's registry lacked the audit collector and the alert could
// never fire.
func TestMetricsServeTheAudit(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var srv *admin.Server
	var s *scheduling.Scheduler
	a := app.New(logTo(io.Discard), fx.Supply(app.Framework{Admin: app.Admin{Addr: "127.0.0.1:0", Metrics: true}}), fakeClock(fc),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Name("audited-report"), scheduling.Cron("@every 1m"), scheduling.Lock("audited-report"))
		}),
		fx.Populate(&srv, &s))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	if err := schedulingtest.Step(context.Background(), fc, 2*time.Minute, time.Minute, s); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Minute) // stuck: the fires in between are not run
	if err := schedulingtest.Step(context.Background(), fc, 3*time.Minute, time.Minute, s); err != nil {
		t.Fatal(err)
	}
	audit, err := s.Audit(context.Background(), "audited-report")
	if err != nil {
		t.Fatal(err)
	}
	if audit.Missed == 0 {
		t.Fatalf("the audit found no miss: %+v", audit)
	}
	health, err := s.Health(context.Background(), "audited-report")
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, "http://"+srv.Addr()+"/metrics")
	for _, st := range scheduling.HealthStates {
		want := 0.0
		if st == health.State {
			want = 1
		}
		name := `ndigo_task_health{state="` + string(st) + `",task="audited-report"}`
		if got, ok := metricValue(body, name); !ok || got != want {
			t.Errorf("/metrics: %s = %v (served: %v), want %v", name, got, ok, want)
		}
	}
	for name, want := range map[string]float64{
		`ndigo_task_missed_fires{task="audited-report"}`:                       float64(audit.Missed),
		`ndigo_task_last_missed_fire_timestamp_seconds{task="audited-report"}`: float64(audit.LastMissed.Unix()),
		"ndigo_audit_up": 1,
	} {
		if got, ok := metricValue(body, name); !ok || got != want {
			t.Errorf("/metrics: %s = %v (served: %v), want %v", name, got, ok, want)
		}
	}
}

// metricValue returns the value of the sample named name (with its labels)
// in a Prometheus text exposition.
func metricValue(body, name string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// admin.tokens load from the configuration by the name of their holder,
// which each request with one is by; a bad name or an empty token is
// refused at load naming the key, never a token.
func TestAdminTokensByName(t *testing.T) {
	type appConfig struct {
		app.Framework `yaml:",inline"`
	}
	c, err := config.Load[appConfig](config.LoadOptions{Path: "app.yaml",
		Data: []byte("admin:\n  addr: 127.0.0.1:0\n  tokens:\n    ops: s3cret-ops\n    ci.deploy: s3cret-ci\n")})
	if err != nil {
		t.Fatal(err)
	}
	base := startOperations(t, c.Framework)
	if code, body := post(t, base+"/scheduledtasks/close-books/pause", "s3cret-ci"); code != http.StatusOK {
		t.Fatalf("pause with ci.deploy's token = %d %s, want 200", code, body)
	}
	if code, body := get(t, base+"/scheduledtasks"); code != http.StatusOK || !strings.Contains(body, `"by": "ci.deploy"`) {
		t.Fatalf("/scheduledtasks after ci.deploy's pause = %d %s, want it paused by ci.deploy", code, body)
	}
	_, err = config.Load[appConfig](config.LoadOptions{Path: "app.yaml",
		Data: []byte("admin:\n  tokens:\n    \"a b\": s3cret-ab\n    ops: \"\"\n")})
	for _, want := range []string{`admin.tokens[a b]`, `must be 1 to 64 letters`, `admin.tokens[ops]`} {
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Load = %v; want %q, without a token", err, want)
		}
	}
}
