package app

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/metrics"
	"github.com/ndigo/ndigo/scheduling"
)

// operations serves what the configuration's admin section asks for: the
// admin endpoints on admin.addr and, with admin.metrics, the scheduler's
// metrics at /metrics there, from a registry of their own that also holds
// the Go runtime and process collectors. Without an address it serves
// nothing, and without metrics no listener or driver wrapper is added, so
// the scheduler's hot path is the bare one. /healthz checks the lock driver
// and the task state store that the scheduler runs on (admin.BackendChecks),
// whatever the driver.
var operations = fx.Module("operations",
	fx.Provide(adminConfig, newOperationsMetrics),
	fx.Invoke(initOperationsMetrics),
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

// initOperationsMetrics puts every task's counters at zero from the start,
// and serves the audit's gauges (the missed fires the docs tell operators
// to alert on) beside them, as metrics.Module does.
func initOperationsMetrics(e *enabledMetrics, s *scheduling.Scheduler) error {
	if e.m == nil {
		return nil
	}
	for _, t := range s.Tasks() {
		e.m.Init(t.Name)
	}
	return e.reg.Register(metrics.NewAuditCollector(s, 0))
}
