package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/metrics"
	"github.com/ndigo/ndigo/notify"
	"github.com/ndigo/ndigo/ping"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// operations serves what the configuration's admin section asks for: the
// admin endpoints on admin.addr and, with admin.metrics, the scheduler's
// metrics at /metrics there, from a registry of their own that also holds
// the Go runtime and process collectors. Without an address it serves
// nothing, and without metrics no listener or driver wrapper is added, so
// the scheduler's hot path is the bare one. /healthz checks the lock driver
// and the task state store that the scheduler runs on (admin.BackendChecks),
// whatever the driver, and ndigo_backend_up serves the same checks.
//
// With ping.url, a ping.Pinger pings the monitor outside the cluster while
// the scheduler runs: started after it, stopped before it. With
// notify.webhook.url or notify.slack.url, a scheduling.Alerter sends each
// task's health changes there, started and stopped the same way.
var operations = fx.Module("operations",
	fx.Provide(adminConfig, newOperationsMetrics),
	fx.Invoke(initOperationsMetrics, startPinging, startAlerting),
	admin.Module,
)

func adminConfig(p frameworkParams) admin.Config {
	c := admin.Config{Addr: p.Framework.Admin.Addr, Token: admin.Token(p.Framework.Admin.Token.Reveal())}
	for name, token := range p.Framework.Admin.Tokens {
		if c.Tokens == nil {
			c.Tokens = map[string]admin.Token{}
		}
		c.Tokens[name] = admin.Token(token.Reveal())
	}
	return c
}

type operationsMetrics struct {
	fx.Out
	Listeners []scheduling.Listener      `group:"scheduling.listeners,flatten"`       // scheduling.ListenersGroup
	Wrappers  []scheduling.DriverWrapper `group:"scheduling.driver-wrappers,flatten"` // scheduling.DriverWrappersGroup
	Routes    []admin.Route              `group:"admin.routes,flatten"`               // admin.RoutesGroup
	Metrics   *enabledMetrics
}

// enabledMetrics is the metrics that admin.metrics turned on (nil m if
// off), and the registry that /metrics serves.
type enabledMetrics struct {
	m   *metrics.Metrics
	reg *prometheus.Registry
}

func newOperationsMetrics(p frameworkParams) (operationsMetrics, error) {
	if !p.Framework.Admin.Metrics {
		return operationsMetrics{Metrics: &enabledMetrics{}}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg)
	if err != nil {
		return operationsMetrics{}, err
	}
	return operationsMetrics{
		Listeners: []scheduling.Listener{m},
		Wrappers:  []scheduling.DriverWrapper{m.InstrumentDriver},
		Routes:    []admin.Route{{Pattern: "GET /metrics", Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}},
		Metrics:   &enabledMetrics{m, reg},
	}, nil
}

type initMetricsParams struct {
	fx.In
	Metrics   *enabledMetrics
	Scheduler *scheduling.Scheduler
	Driver    locks.Driver    `optional:"true"`
	State     taskstate.Store `optional:"true"`
}

// initOperationsMetrics puts every task's counters at zero from the start,
// and serves the audit's gauges (the missed fires the docs tell operators
// to alert on) and the backends' health beside them, as metrics.Module
// does.
func initOperationsMetrics(p initMetricsParams) error {
	e := p.Metrics
	if e.m == nil {
		return nil
	}
	for _, t := range p.Scheduler.Tasks() {
		e.m.Init(t.Name)
	}
	if err := e.reg.Register(metrics.NewAuditCollector(p.Scheduler, 0)); err != nil {
		return err
	}
	return e.reg.Register(metrics.NewBackendCollector(p.Driver, p.State))
}

type pingParams struct {
	fx.In
	Framework Framework `optional:"true"`
	Lifecycle fx.Lifecycle
	Metrics   *enabledMetrics
	Scheduler *scheduling.Scheduler // its start hook comes first, its stop hook last
	Clock     clockwork.Clock       `optional:"true"` // the scheduler's
	Logger    *slog.Logger
	Node      string `name:"scheduling.node" optional:"true"` // scheduling.NodeName
}

// startPinging pings the configuration's ping.url while the scheduler
// runs, on the scheduler's clock, and serves the pings' figures with the
// metrics.
func startPinging(p pingParams) error {
	cfg := p.Framework.Ping
	if cfg.URL == "" {
		return nil
	}
	pg, err := ping.New(ping.Config{URL: cfg.URL.Reveal(), Every: cfg.Every, Timeout: cfg.Timeout,
		Clock: p.Clock, Logger: p.Logger, Node: p.Node})
	if err != nil {
		return err // validated: a Framework that config.Load did not make
	}
	if p.Metrics.reg != nil {
		if err := p.Metrics.reg.Register(metrics.NewPingCollector(pg)); err != nil {
			return err
		}
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { return pg.Start() },
		OnStop:  pg.Stop,
	})
	return nil
}

type alertParams struct {
	fx.In
	Framework Framework `optional:"true"`
	Lifecycle fx.Lifecycle
	Scheduler *scheduling.Scheduler // its start hook comes first, its stop hook last
}

// startAlerting sends the messages of the configuration's notify section
// while the scheduler runs.
func startAlerting(p alertParams) error {
	cfg := p.Framework.Notify
	var ns []notify.Notifier
	if cfg.Webhook.URL != "" {
		ns = append(ns, notify.Webhook{URL: cfg.Webhook.URL.Reveal(), Secret: cfg.Webhook.Secret.Reveal(), Timeout: cfg.Timeout})
	}
	if cfg.Slack.URL != "" {
		ns = append(ns, notify.Slack{URL: cfg.Slack.URL.Reveal(), Timeout: cfg.Timeout})
	}
	if len(ns) == 0 {
		return nil
	}
	a, err := scheduling.NewAlerter(p.Scheduler, scheduling.AlertConfig{Notifiers: ns, Every: cfg.Every})
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	p.Lifecycle.Append(fx.Hook{OnStart: func(context.Context) error { return a.Start() }, OnStop: a.Stop})
	return nil
}
