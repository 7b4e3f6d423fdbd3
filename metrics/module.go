package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/scheduling"
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
	Metrics   *Metrics
	Scheduler *scheduling.Scheduler `optional:"true"`
}

func initTasks(p initParams) {
	if p.Scheduler == nil {
		return
	}
	for _, t := range p.Scheduler.Tasks() {
		p.Metrics.Init(t.Name)
	}
}
