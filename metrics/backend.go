package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// BackendUp is a gauge by backend ("locks", the lock driver; "taskstate",
// the task state store): 1 if its health check passed at the scrape, 0 if
// not. Alert on it at zero.
const BackendUp = "ndigo_backend_up"

// Values of the backend label of [BackendUp], the names of admin's
// /healthz checks.
const (
	BackendLocks     = "locks"
	BackendTaskState = "taskstate"
)

// backendBudget bounds each backend's check at a scrape, as /healthz does
// (admin.DefaultCheckTimeout).
const backendBudget = 2 * time.Second

// A BackendCollector checks, at each scrape, the backends a scheduler
// runs on, as admin's /healthz does: the lock driver and the task state
// store, each through locks.HealthChecker (one round trip each, at once).
// A backend that keeps its state in the process (the in-process driver and
// store) has no check and cannot be down while the process runs: it is
// reported up, so that the series exists whatever the driver.
type BackendCollector struct {
	checks map[string]func(context.Context) error
	up     *prometheus.Desc
}

// NewBackendCollector returns a collector of the health of driver and
// store; either may be nil, and then has no series.
func NewBackendCollector(driver locks.Driver, store taskstate.Store) *BackendCollector {
	c := &BackendCollector{checks: map[string]func(context.Context) error{},
		up: prometheus.NewDesc(BackendUp, "1 if the backend's health check passed at this scrape, 0 if not; by backend: locks (the lock driver), taskstate (the task state store).",
			[]string{"backend"}, nil)}
	alive := func(context.Context) error { return nil }
	if driver != nil {
		c.checks[BackendLocks] = alive
		if hc, ok := locks.As[locks.HealthChecker](driver); ok {
			c.checks[BackendLocks] = hc.CheckHealth
		}
	}
	if store != nil {
		c.checks[BackendTaskState] = alive
		if hc, ok := store.(locks.HealthChecker); ok {
			c.checks[BackendTaskState] = hc.CheckHealth
		}
	}
	return c
}

// Describe sends the collector's description.
func (c *BackendCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.up }

// Collect checks every backend at once and sends its state.
func (c *BackendCollector) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for name, check := range c.checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), backendBudget)
			defer cancel()
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, passed(ctx, check), name)
		})
	}
	wg.Wait()
}

// passed runs check: 1 if it returns nil, 0 if it fails or panics.
func passed(ctx context.Context, check func(context.Context) error) (up float64) {
	defer func() {
		if recover() != nil {
			up = 0
		}
	}()
	if check(ctx) != nil {
		return 0
	}
	return 1
}
