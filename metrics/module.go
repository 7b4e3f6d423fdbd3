package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// Module builds a *Metrics on the graph's prometheus.Registerer (optional;
// prometheus.DefaultRegisterer without one), registers it as a listener of
// scheduling.Module's scheduler, and wraps that scheduler's lock driver with
// [Metrics.InstrumentDriver].
//
// The driver is wrapped through scheduling.DriverWrappersGroup rather than
// by decorating locks.Driver, which fx allows once per scope and which
// redislocks.Module already does at the root; so Module works beside it and
// may sit anywhere in the application.
//
// Every task's counters exist at zero from the start ([Metrics.Init]).
// With a scheduler in the graph, an [AuditCollector] of it, and a
// [BackendCollector] of the graph's locks.Driver and taskstate.Store, are
// registered while the application runs (registered at start, unregistered
// at stop).
var Module = fx.Module("metrics",
	fx.Provide(newModuleMetrics),
	fx.Invoke(initTasks),
	scheduling.Listen(func(m *Metrics) *Metrics { return m }),
	fx.Provide(fx.Annotate(
		func(m *Metrics) scheduling.DriverWrapper { return m.InstrumentDriver },
		fx.ResultTags(`group:"`+scheduling.DriverWrappersGroup+`"`))),
)

type moduleParams struct {
	fx.In
	Registerer prometheus.Registerer `optional:"true"`
}

func newModuleMetrics(p moduleParams) (*Metrics, error) {
	return New(p.Registerer)
}

type initParams struct {
	fx.In
	Metrics    *Metrics
	Scheduler  *scheduling.Scheduler `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	Driver     locks.Driver          `optional:"true"`
	State      taskstate.Store       `optional:"true"`
	Lifecycle  fx.Lifecycle
}

func initTasks(p initParams) {
	if p.Scheduler == nil {
		return
	}
	for _, t := range p.Scheduler.Tasks() {
		p.Metrics.Init(t.Name)
	}
	reg := p.Registerer
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	collectors := []prometheus.Collector{NewAuditCollector(p.Scheduler, 0), NewBackendCollector(p.Driver, p.State)}
	p.Lifecycle.Append(fx.StartStopHook(
		func() error {
			for _, c := range collectors {
				// Another application of the process, on the same registry,
				// serves its own: as with the other collectors, not an error.
				if err := reg.Register(c); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
					return fmt.Errorf("metrics: register the %T: %w", c, err)
				}
			}
			return nil
		},
		func() {
			for _, c := range collectors {
				reg.Unregister(c)
			}
		}))
}
