package tracing_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/tracing"
)

// A Tracer is a scheduling.Listener: pass it in scheduling.Config.Listeners,
// or include tracing.Module with fx. Here it is driven by hand, as the
// scheduler drives it around a run.
func Example() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := tracing.New(tp)

	e := scheduling.Event{Task: "PayrollController.CloseBooks", Lock: "payroll-window", Token: 42,
		Fire: time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC), Node: "billing-1"}
	ctx := tr.BeforeRun(context.Background(), e)
	e.Outcome = scheduling.OutcomeOK
	tr.AfterRun(ctx, e)

	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name)
		for _, a := range s.Attributes {
			if a.Key == tracing.AttrLock || a.Key == tracing.AttrToken || a.Key == tracing.AttrFire {
				fmt.Println(" ", a.Key, a.Value.String())
			}
		}
	}
	// Output:
	// PayrollController.CloseBooks
	//   ndigo.fire 2026-01-01T02:00:00Z
	//   ndigo.lock payroll-window
	//   ndigo.lock.token 42
}
