// Package tracing records one OpenTelemetry span per run of a scheduled
// task (go.opentelemetry.io/otel), through the scheduler's listener hook.
//
// A span is named after the task and carries the attributes [AttrTask],
// [AttrLock], [AttrToken], [AttrFire], [AttrNode] and [AttrLateness]; a run
// that returns an error or panics sets the span's status to error and
// records the error, and a run whose lease was lost says so in
// [AttrLeaseLost]. The task's context carries the span, so the spans of
// what the task does are its children.
//
// Without a tracer provider, nothing is recorded and a run pays nothing
// but a check: a [Tracer] built with a nil provider follows the global one
// (otel.SetTracerProvider) and starts no span while none is set.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/scheduling"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/ndigo/ndigo/tracing"

// Span attribute keys.
const (
	AttrTask      = attribute.Key("ndigo.task")       // the task's name
	AttrLock      = attribute.Key("ndigo.lock")       // the lock key; absent if unlocked
	AttrToken     = attribute.Key("ndigo.lock.token") // the lease's fencing token; absent if unlocked
	AttrFire      = attribute.Key("ndigo.fire")       // the scheduled instant, RFC 3339
	AttrNode      = attribute.Key("ndigo.node")       // the node that ran it
	AttrLateness  = attribute.Key("ndigo.lateness_s") // run start minus the scheduled instant, seconds
	AttrOutcome   = attribute.Key("ndigo.outcome")    // ok, error or panic
	AttrLeaseLost = attribute.Key("ndigo.lease_lost") // true if the lease ended before the task returned
)

// unset is the global provider before anyone sets one: it delegates to a
// provider set later, and records nothing until then.
var unset = otel.GetTracerProvider()

// A Tracer is a scheduling.Listener that records a span per run.
type Tracer struct {
	scheduling.NopListener
	tracer trace.Tracer // nil: follow the global provider
	off    bool         // a no-op provider was passed
}

// New returns a Tracer recording spans with tp. A nil tp means the global
// provider, looked up at each run, so that one set after New is used.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return &Tracer{}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return &Tracer{off: true}
	}
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

func (t *Tracer) current() trace.Tracer {
	if t.tracer != nil || t.off {
		return t.tracer
	}
	tp := otel.GetTracerProvider()
	if tp == unset {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(ScopeName)
}

// BeforeRun starts the run's span and returns ctx carrying it.
func (t *Tracer) BeforeRun(ctx context.Context, e scheduling.Event) context.Context {
	tr := t.current()
	if tr == nil {
		return ctx
	}
	ctx, span := tr.Start(ctx, e.Task, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		return ctx
	}
	attrs := []attribute.KeyValue{
		AttrTask.String(e.Task),
		AttrFire.String(e.Fire.Format(time.RFC3339Nano)),
		AttrNode.String(e.Node),
		AttrLateness.Float64(e.Lateness.Seconds()),
	}
	if e.Lock != "" {
		attrs = append(attrs, AttrLock.String(e.Lock), AttrToken.Int64(int64(e.Token)))
	}
	span.SetAttributes(attrs...)
	// AfterRun ends this span only: the context may carry other listeners'.
	return context.WithValue(ctx, spanKey{}, span)
}

type spanKey struct{}

// AfterRun ends the run's span, with status error if the task failed.
func (t *Tracer) AfterRun(ctx context.Context, e scheduling.Event) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	span.SetAttributes(AttrOutcome.String(string(e.Outcome)))
	if e.LeaseLost {
		span.SetAttributes(AttrLeaseLost.Bool(true))
	}
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, string(e.Outcome))
	}
	span.End()
}

// Module registers a [Tracer] as a listener of scheduling.Module's
// scheduler. It uses the graph's trace.TracerProvider if there is one, and
// the global provider otherwise.
var Module = fx.Module("tracing",
	scheduling.Listen(func(p moduleParams) *Tracer { return New(p.Provider) }),
)

type moduleParams struct {
	fx.In
	Provider trace.TracerProvider `optional:"true"`
}
