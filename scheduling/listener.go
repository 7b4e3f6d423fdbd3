package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
)

// A Listener is told about every fire of a scheduler: before and after each
// run, and when a fire is skipped. Metrics, tracing and paging on repeated
// skips are listeners; so is anything a team writes itself.
//
// The scheduler calls listeners synchronously on its own goroutines, in the
// order they were registered: BeforeRun and AfterRun on the run's goroutine,
// Skipped on the goroutine that decided the skip, which for a task still
// running is the scheduler's loop. A listener must therefore return
// quickly and hand slow work (a network call) to a goroutine of its own. A
// listener that panics is recovered and logged; the run and the other
// listeners go on.
//
// Embed [NopListener] to implement only the methods you need; new methods
// added to Listener later get a no-op there.
type Listener interface {
	// BeforeRun is called when a run is about to call its task, with the
	// run's context as the listeners before it left it. Return ctx itself,
	// or a context derived from it (a span's): the task receives the
	// context the last listener returned.
	BeforeRun(ctx context.Context, e Event) context.Context
	// AfterRun is called when the task returned or panicked, with the
	// context this listener's BeforeRun returned; listeners are called in
	// reverse order, as deferred calls are. e.Outcome is OutcomeOK,
	// OutcomeError or OutcomePanic.
	AfterRun(ctx context.Context, e Event)
	// Skipped is called when a fire does not run on this node. e.Outcome
	// says why: OutcomeLockHeld, OutcomeRunning, OutcomeLockPending, OutcomeAlreadyRun,
	// OutcomeMissed, OutcomePaused, OutcomeRetrying, OutcomeNotOwner, or
	// OutcomeLockFailed with e.Err wrapping ErrNoDriver or the driver's
	// error.
	Skipped(e Event)
}

// An Event describes one fire for a [Listener]. Fields that do not apply to
// the call are zero.
type Event struct {
	Task string    // the task's name
	Lock string    // the task's lock key; "" if unlocked
	Fire time.Time // the scheduled instant
	Node string    // this node

	// Start is when the run started, on the scheduler's clock; zero for a
	// skip.
	Start time.Time
	// Lateness is Start minus Fire: how late the run started.
	Lateness time.Duration
	// Token is the lease's fencing token; 0 if unlocked or not acquired.
	Token uint64
	// Manual reports a run an operator asked for ([Scheduler.RunNow]); Fire
	// is then the instant it was asked for.
	Manual bool
	// Attempt is the run's attempt at its fire: 1 for its first run, k+1
	// for its k-th retry ([Retry]).
	Attempt int
	// Backfill reports a run of a backfill ([Scheduler.Backfill]); Fire is
	// then the past instant it runs for.
	Backfill bool

	// Outcome says how the fire ended (AfterRun, Skipped).
	Outcome Outcome
	// Err is the task's error or panic (AfterRun), or the lock failure
	// (Skipped with OutcomeLockFailed).
	Err error
	// Duration is how long the task ran (AfterRun).
	Duration time.Duration
	// LeaseLost reports that the lease was over before the task returned:
	// it expired, or a renewal found it lost (AfterRun, locked runs).
	LeaseLost bool
	// RenewErr is the renewal's error when extending the lease failed
	// during the run (AfterRun, tasks with Renew).
	RenewErr error
}

// NopListener is a [Listener] that does nothing. Embed it in a listener of
// your own to implement only some methods.
type NopListener struct{}

// BeforeRun returns ctx.
func (NopListener) BeforeRun(ctx context.Context, _ Event) context.Context { return ctx }

// AfterRun does nothing.
func (NopListener) AfterRun(context.Context, Event) {}

// Skipped does nothing.
func (NopListener) Skipped(Event) {}

// ListenersGroup is the fx value group in which [Module] finds listeners.
// [Listen] adds to it.
const ListenersGroup = "scheduling.listeners"

// Listen registers the [Listener] that constructor returns with Module's
// scheduler. constructor is a function whose parameters come from the fx
// graph and that returns a value implementing Listener, optionally followed
// by an error. Listeners registered this way are called after those in
// [Config.Listeners], in an order fx does not define.
func Listen(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.As(new(Listener)), fx.ResultTags(`group:"`+ListenersGroup+`"`)))
}

// A DriverWrapper wraps the lock driver of [Module]'s scheduler, to observe
// or adapt its calls (package metrics counts lock attempts this way). It
// returns the driver to use.
type DriverWrapper func(locks.Driver) locks.Driver

// DriverWrappersGroup is the fx value group of [DriverWrapper] values that
// [Module] applies to the graph's locks.Driver before handing it to its
// scheduler. Unlike a decoration of locks.Driver, which fx allows once per
// scope (redislocks.Module makes that one), any number of wrappers can be
// registered. Only the scheduler's driver is wrapped.
const DriverWrappersGroup = "scheduling.driver-wrappers"

// notifier calls the listeners of a scheduler, recovering their panics.
type notifier struct {
	listeners []Listener
	log       *slog.Logger
}

// runEvent is an Event in flight, with the context each listener's
// BeforeRun returned, for its AfterRun.
type runEvent struct {
	Event
	ctxs  []context.Context
	inner [2]context.Context // backs ctxs for up to two listeners: no allocation
	debug bool               // log the run's start and end
}

func (n *notifier) beforeRun(ctx context.Context, e *runEvent) context.Context {
	if len(n.listeners) <= len(e.inner) {
		e.ctxs = e.inner[:len(n.listeners)]
	} else {
		e.ctxs = make([]context.Context, len(n.listeners))
	}
	for i, l := range n.listeners {
		ctx = n.safeBefore(l, ctx, &e.Event)
		e.ctxs[i] = ctx
	}
	return ctx
}

func (n *notifier) safeBefore(l Listener, ctx context.Context, e *Event) (out context.Context) {
	out = ctx
	defer n.recover(l, "BeforeRun", e)
	if c := l.BeforeRun(ctx, *e); c != nil {
		out = c
	}
	return out
}

func (n *notifier) afterRun(e *runEvent) {
	for i := len(n.listeners) - 1; i >= 0; i-- {
		n.safeAfter(n.listeners[i], e.ctxs[i], &e.Event)
	}
}

func (n *notifier) safeAfter(l Listener, ctx context.Context, e *Event) {
	defer n.recover(l, "AfterRun", e)
	l.AfterRun(ctx, *e)
}

func (n *notifier) skipped(e *Event) {
	for _, l := range n.listeners {
		n.safeSkipped(l, e)
	}
}

func (n *notifier) safeSkipped(l Listener, e *Event) {
	defer n.recover(l, "Skipped", e)
	l.Skipped(*e)
}

// recover logs a listener's panic so that the scheduler and the other
// listeners go on.
func (n *notifier) recover(l Listener, method string, e *Event) {
	if r := recover(); r != nil {
		n.log.Error("listener panicked", "listener", fmt.Sprintf("%T", l), "method", method,
			"task", e.Task, "fire", e.Fire, "panic", fmt.Sprint(r))
	}
}
