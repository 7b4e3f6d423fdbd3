package tracing

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runOnce runs every task of tasks once, on the 1s fire of a fake clock,
// with listener l, and returns when the runs ended.
func runOnce(t *testing.T, l scheduling.Listener, tasks ...scheduling.Task) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	done := &doneCounter{ch: make(chan struct{}, len(tasks))}
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", Logger: slog.New(slog.DiscardHandler),
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Listeners: []scheduling.Listener{done, l}})
	if err := s.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := fc.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	for range tasks {
		<-done.ch
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// doneCounter announces each run's end. Registered first, its AfterRun is
// called last.
type doneCounter struct {
	scheduling.NopListener
	ch chan struct{}
}

func (d *doneCounter) AfterRun(context.Context, scheduling.Event) { d.ch <- struct{}{} }

func TestSpanPerRun(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	var inTask trace.SpanContext
	failure := errors.New("books do not balance")
	runOnce(t, New(tp),
		scheduling.NewTask(func(ctx context.Context) error {
			inTask = trace.SpanContextFromContext(ctx)
			return nil
		}, scheduling.Cron("@every 1s"), scheduling.Lock("payroll-window"), scheduling.Name("close")),
		scheduling.NewTask(func(context.Context) error { return failure },
			scheduling.Cron("@every 1s"), scheduling.Name("fails")),
	)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	closeSpan, ok := byName["close"]
	if !ok {
		t.Fatalf("no span named after the task: %v", spans)
	}
	if closeSpan.SpanContext.SpanID() != inTask.SpanID() {
		t.Fatalf("the task's context does not carry its span")
	}
	attrs := attribute.NewSet(closeSpan.Attributes...)
	for key, want := range map[attribute.Key]attribute.Value{
		AttrTask:    attribute.StringValue("close"),
		AttrLock:    attribute.StringValue("payroll-window"),
		AttrFire:    attribute.StringValue("2026-01-01T00:00:01Z"),
		AttrNode:    attribute.StringValue("node-a"),
		AttrOutcome: attribute.StringValue("ok"),
	} {
		if got, ok := attrs.Value(key); !ok || got != want {
			t.Errorf("attribute %s = %v, want %v", key, got.String(), want.String())
		}
	}
	if tok, ok := attrs.Value(AttrToken); !ok || tok.AsInt64() <= 0 {
		t.Errorf("token attribute %v, want a positive fencing token", tok.String())
	}
	if closeSpan.Status.Code != codes.Unset {
		t.Errorf("ok run status %v", closeSpan.Status)
	}
	failed := byName["fails"]
	if failed.Status.Code != codes.Error || len(failed.Events) != 1 || failed.Events[0].Name != "exception" {
		t.Fatalf("failed run: status %v, events %v; want error status and the recorded error", failed.Status, failed.Events)
	}
	if fa := attribute.NewSet(failed.Attributes...); fa.HasValue(AttrLock) {
		t.Errorf("unlocked run has a lock attribute")
	}
}

// outer is a listener before the tracer whose span the tracer must not end.
type outer struct {
	scheduling.NopListener
	tracer trace.Tracer
}

func (o outer) BeforeRun(ctx context.Context, e scheduling.Event) context.Context {
	ctx, _ = o.tracer.Start(ctx, "outer")
	return ctx
}

func TestEndsOnlyItsOwnSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	// The tracer is off, and a listener before it started a span.
	chain := &chained{first: outer{tracer: tp.Tracer("test")}, second: New(noop.NewTracerProvider())}
	runOnce(t, chain, scheduling.NewTask(func(context.Context) error { return nil },
		scheduling.Cron("@every 1s"), scheduling.Name("t")))
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans ended; the outer listener's span is not the tracer's to end", n)
	}
}

// chained calls two listeners as the scheduler would.
type chained struct {
	first, second scheduling.Listener
	ctx1, ctx2    context.Context
}

func (c *chained) BeforeRun(ctx context.Context, e scheduling.Event) context.Context {
	c.ctx1 = c.first.BeforeRun(ctx, e)
	c.ctx2 = c.second.BeforeRun(c.ctx1, e)
	return c.ctx2
}

func (c *chained) AfterRun(_ context.Context, e scheduling.Event) {
	c.second.AfterRun(c.ctx2, e)
	c.first.AfterRun(c.ctx1, e)
}

func (c *chained) Skipped(scheduling.Event) {}

func TestNoCostWithoutProvider(t *testing.T) {
	e := scheduling.Event{Task: "t", Lock: "k", Token: 7, Fire: epoch, Node: "n"}
	ctx := context.Background()
	for name, tr := range map[string]*Tracer{"global, unset": New(nil), "noop": New(noop.NewTracerProvider())} {
		allocs := testing.AllocsPerRun(100, func() {
			c := tr.BeforeRun(ctx, e)
			tr.AfterRun(c, e)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, allocs)
		}
		if c := tr.BeforeRun(ctx, e); c != ctx {
			t.Errorf("%s: BeforeRun changed the context", name)
		}
	}
}

func TestModuleUsesTheGraphsProvider(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	var got []scheduling.Listener
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(tp, fx.As(new(trace.TracerProvider)))),
		Module,
		fx.Invoke(fx.Annotate(func(ls []scheduling.Listener) { got = ls }, fx.ParamTags(`group:"`+scheduling.ListenersGroup+`"`))),
	)
	app.RequireStart().RequireStop()
	if len(got) != 1 {
		t.Fatalf("%d listeners, want the tracer", len(got))
	}
	runOnce(t, got[0], scheduling.NewTask(func(context.Context) error { return nil },
		scheduling.Cron("@every 1s"), scheduling.Name("t")))
	if n := len(exp.GetSpans()); n != 1 {
		t.Fatalf("%d spans from the module's tracer, want 1", n)
	}
}

func BenchmarkRunHooks(b *testing.B) {
	e := scheduling.Event{Task: "t", Lock: "k", Token: 7, Fire: epoch, Node: "n"}
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	for _, c := range []struct {
		name string
		tr   *Tracer
	}{{"unset", New(nil)}, {"noop", New(noop.NewTracerProvider())}, {"sdk", New(tp)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.tr.AfterRun(c.tr.BeforeRun(ctx, e), e)
				exp.Reset()
			}
		})
	}
}
