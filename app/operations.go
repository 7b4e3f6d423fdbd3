package app

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
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
// the scheduler's hot path is the bare one. With a Redis client in the
// graph, /healthz pings it.
var operations = fx.Module("operations",
	fx.Provide(adminConfig, newOperationsMetrics, redisCheck),
	fx.Invoke(initOperationsMetrics),
	admin.Module,
)

type redisParams struct {
	fx.In
	Client redis.UniversalClient `optional:"true"`
}

type healthChecks struct {
	fx.Out
	Checks []admin.Check `group:"admin.checks,flatten"` // admin.ChecksGroup
}

// redisCheck adds a "redis" check to /healthz that pings the graph's Redis
// client (redislocks.Module provides one), when there is one. Its error
// names the server address, never the password.
func redisCheck(p redisParams) healthChecks {
	if p.Client == nil {
		return healthChecks{}
	}
	c := p.Client
	return healthChecks{Checks: []admin.Check{{Name: "redis", Check: func(ctx context.Context) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		return nil
	}}}}
}

func adminConfig(p frameworkParams) admin.Config {
	return admin.Config{Addr: p.Framework.Admin.Addr, Token: admin.Token(p.Framework.Admin.Token.Reveal())}
}

type operationsMetrics struct {
	fx.Out
	Listeners []scheduling.Listener      `group:"scheduling.listeners,flatten"`       // scheduling.ListenersGroup
	Wrappers  []scheduling.DriverWrapper `group:"scheduling.driver-wrappers,flatten"` // scheduling.DriverWrappersGroup
	Routes    []admin.Route              `group:"admin.routes,flatten"`               // admin.RoutesGroup
	Metrics   *enabledMetrics
}

// enabledMetrics is the metrics that admin.metrics turned on, or nil.
type enabledMetrics struct{ m *metrics.Metrics }

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
		Metrics:   &enabledMetrics{m},
	}, nil
}

// initOperationsMetrics puts every task's counters at zero from the start.
func initOperationsMetrics(e *enabledMetrics, s *scheduling.Scheduler) {
	if e.m == nil {
		return
	}
	for _, t := range s.Tasks() {
		e.m.Init(t.Name)
	}
}
