package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/scheduling"
)

const pingSecret = "5e1a8d2c-0b7f-4c3e-9a61-d2f4b8e0c937"

// The ping section's errors name the key, where it was set and the rule,
// and never show the URL, which holds the monitor's secret.
func TestPingSectionIsValidated(t *testing.T) {
	type appConfig struct {
		app.Framework `yaml:",inline"`
	}
	for _, tc := range []struct {
		yaml string
		env  map[string]string
		want string
	}{
		{"ping:\n  url: ftp://hc-ping.com/" + pingSecret + "\n", nil,
			`config: ping.url "[REDACTED]" (app.yaml:2): must be an http:// or https:// URL`},
		{"", map[string]string{"NDIGO_PING_URL": "hc-ping.com/" + pingSecret},
			`config: ping.url "[REDACTED]" (env NDIGO_PING_URL): must be an http:// or https:// URL`},
		{"ping:\n  url: https://hc-ping.com/" + pingSecret + "\n  every: 10ms\n", nil,
			`config: ping.every "10ms" (app.yaml:3): must be at least 1s`},
		{"ping:\n  timeout: 0s\n", nil,
			`config: ping.timeout "0s" (app.yaml:2): must be at least 1ms`},
	} {
		_, err := config.Load[appConfig](config.LoadOptions{Path: "app.yaml", Data: []byte(tc.yaml), EnvPrefix: "NDIGO_",
			Env: func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok }})
		if err == nil || err.Error() != tc.want || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q %v: %v, want %s", tc.yaml, tc.env, err, tc.want)
		}
	}
	cfg, err := config.Load[appConfig](config.LoadOptions{Data: []byte("ping:\n  url: https://hc-ping.com/" + pingSecret + "\n"),
		Env: func(string) (string, bool) { return "", false }})
	if err != nil || cfg.Ping.Every != time.Minute || cfg.Ping.Timeout != 10*time.Second {
		t.Fatalf("defaults: %+v, %v; want every 1m, timeout 10s", cfg.Ping, err)
	}
}

// With ping.url, the node pings at start and every period on the
// scheduler's clock, serves the pings' figures with its metrics, and is
// silent once the application stopped.
func TestPingWhileTheSchedulerRuns(t *testing.T) {
	var gets atomic.Int64
	got := make(chan struct{}, 10)
	monitor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+pingSecret {
			t.Errorf("the monitor got %s", r.URL.Path)
		}
		gets.Add(1)
		got <- struct{}{}
	}))
	defer monitor.Close()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fw := app.Framework{Node: "billing-1", Admin: app.Admin{Addr: "127.0.0.1:0", Metrics: true},
		Ping: app.Ping{URL: config.Secret(monitor.URL + "/" + pingSecret), Every: time.Minute, Timeout: 10 * time.Second}}
	var srv *admin.Server
	a := app.New(logTo(io.Discard), fx.Supply(fw), fakeClock(fc), fx.Populate(&srv),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("close-books"), scheduling.Cron("@daily"))
		}))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = a.Stop(context.Background())
		}
	}()
	<-got
	scrape := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			_, body := get(t, "http://"+srv.Addr()+"/metrics")
			if strings.Contains(body, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics has no %q:\n%s", want, body)
			}
		}
	}
	scrape("ndigo_pings_total 1\n")
	scrape("ndigo_ping_last_success_timestamp_seconds 1.7672256e+09\n")
	fc.Advance(time.Minute)
	<-got
	scrape("ndigo_pings_total 2\n")
	scrape("ndigo_ping_failures_total 0\n")
	scrape(`ndigo_backend_up{backend="locks"} 1`)

	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped = true
	fc.Advance(10 * time.Minute)
	monitor.Close() // waits for the requests it received
	if n := gets.Load(); n != 2 {
		t.Errorf("the monitor got %d pings, want 2: at start and a minute later, none after the stop", n)
	}
}
