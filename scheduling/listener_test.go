package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/locks"
)

// recListener records the events it is told about.
type recListener struct {
	mu      sync.Mutex
	before  []Event
	after   []Event
	skipped []Event
	ctxSeen []any // the value BeforeRun put in the context, as AfterRun saw it
}

type listenerKey struct{}

func (l *recListener) BeforeRun(ctx context.Context, e Event) context.Context {
	l.mu.Lock()
	l.before = append(l.before, e)
	l.mu.Unlock()
	return context.WithValue(ctx, listenerKey{}, "from BeforeRun "+e.Task)
}

func (l *recListener) AfterRun(ctx context.Context, e Event) {
	l.mu.Lock()
	l.after = append(l.after, e)
	l.ctxSeen = append(l.ctxSeen, ctx.Value(listenerKey{}))
	l.mu.Unlock()
}

func (l *recListener) Skipped(e Event) {
	l.mu.Lock()
	l.skipped = append(l.skipped, e)
	l.mu.Unlock()
}

// afterOf returns the AfterRun events of task.
func (l *recListener) afterOf(task string) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.after {
		if e.Task == task {
			out = append(out, e)
		}
	}
	return out
}

func (l *recListener) skips() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.skipped...)
}

// newListened is newTest with listeners.
func newListened(t *testing.T, locked bool, ls ...Listener) (*Scheduler, *clockwork.FakeClock, *logRecorder, *locks.InProcessDriver) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	rec := &logRecorder{}
	cfg := Config{Clock: fc, Logger: slog.New(rec), Node: "node-a", Listeners: ls}
	var d *locks.InProcessDriver
	if locked {
		d = locks.NewInProcessDriver(locks.WithClock(fc))
		cfg.Driver = d
	}
	s := New(cfg)
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s, fc, rec, d
}

func TestListenerSeesRunsByOutcome(t *testing.T) {
	l := &recListener{}
	s, fc, rec, _ := newListened(t, true, l)
	var seenByTask atomic.Value
	okTask := func(ctx context.Context) error {
		seenByTask.Store(ctx.Value(listenerKey{}))
		return nil
	}
	failure := errors.New("books do not balance")
	mustAdd(t, s,
		NewTask(okTask, Cron("@every 1s"), Lock("k"), Name("ok")),
		NewTask(func(context.Context) error { return failure }, Cron("@every 1s"), Name("fails")),
		NewTask(func(context.Context) error { panic("boom") }, Cron("@every 1s"), Name("panics")),
	)
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)

	if got := seenByTask.Load(); got != "from BeforeRun ok" {
		t.Fatalf("task's context carried %v, want the value BeforeRun added", got)
	}
	want := map[string]Outcome{"ok": OutcomeOK, "fails": OutcomeError, "panics": OutcomePanic}
	for task, outcome := range want {
		evs := l.afterOf(task)
		if len(evs) != 1 {
			t.Fatalf("%s: %d AfterRun events, want 1", task, len(evs))
		}
		e := evs[0]
		if e.Outcome != outcome || !e.Fire.Equal(epoch.Add(time.Second)) || e.Node != "node-a" || !e.Start.Equal(e.Fire) {
			t.Fatalf("%s: event %+v, want outcome %s at the 1s fire on node-a", task, e, outcome)
		}
	}
	ok := l.afterOf("ok")[0]
	if ok.Lock != "k" || ok.Token == 0 || ok.Token != s.Tasks()[0].Last.Token || ok.LeaseLost || ok.Err != nil {
		t.Fatalf("locked run event %+v, want lock k and the run's token", ok)
	}
	if e := l.afterOf("fails")[0]; !errors.Is(e.Err, failure) || e.Token != 0 || e.Lock != "" {
		t.Fatalf("failed run event %+v", e)
	}
	if e := l.afterOf("panics")[0]; !errors.Is(e.Err, ErrPanic) {
		t.Fatalf("panicked run event err %v, want ErrPanic", e.Err)
	}
	l.mu.Lock()
	nBefore, seen := len(l.before), l.ctxSeen
	l.mu.Unlock()
	if nBefore != 3 {
		t.Fatalf("%d BeforeRun calls, want 3", nBefore)
	}
	for _, v := range seen {
		if v == nil {
			t.Fatalf("AfterRun did not get BeforeRun's context: %v", seen)
		}
	}
	// Debug logging covers the acquisition and the run's start and end.
	if logs := rec.find("lock acquired"); len(logs) != 1 || logs[0].attrs["token"] != strconv.FormatUint(ok.Token, 10) ||
		logs[0].level != slog.LevelDebug {
		t.Fatalf("acquire logs %+v", logs)
	}
	if logs := rec.find("task finished"); len(logs) != 3 || logs[0].attrs["duration"] == "" || logs[0].attrs["outcome"] == "" {
		t.Fatalf("finish logs %+v", logs)
	}
	if logs := rec.find("task started"); len(logs) != 3 {
		t.Fatalf("start logs %+v", logs)
	}
}

func TestListenerLatenessAndDuration(t *testing.T) {
	l := &recListener{}
	s, fc, _, _ := newListened(t, false, l)
	mustAdd(t, s, NewTask(func(context.Context) error {
		fc.Advance(250 * time.Millisecond) // the task takes 250ms on the fake clock
		return nil
	}, Cron("@every 1s"), Name("slow")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(1500 * time.Millisecond) // the loop sees the 1s fire half a second late
	waitIdle(t, s)
	evs := l.afterOf("slow")
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	if e := evs[0]; e.Lateness != 500*time.Millisecond || e.Duration != 250*time.Millisecond ||
		!e.Start.Equal(epoch.Add(1500*time.Millisecond)) {
		t.Fatalf("event %+v, want lateness 500ms and duration 250ms", e)
	}
}

func TestListenerSeesSkipsByReason(t *testing.T) {
	t.Run("lock held", func(t *testing.T) {
		l := &recListener{}
		s, fc, _, d := newListened(t, true, l)
		var f fires
		mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k"), Name("t")))
		other, err := d.Acquire(context.Background(), "k", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Release(context.Background())
		mustStart(t, s)
		step(t, fc, time.Second, time.Second, s)
		wantSkip(t, l, OutcomeLockHeld, nil)
	})
	t.Run("already run", func(t *testing.T) {
		l := &recListener{}
		s, fc, _, d := newListened(t, true, l)
		var f fires
		mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k"), Name("t")))
		// Another node claimed the 1s fire.
		if ok, err := d.Claim(context.Background(), "@t", epoch.Add(time.Second).UnixMilli(), time.Hour); !ok || err != nil {
			t.Fatal(ok, err)
		}
		mustStart(t, s)
		step(t, fc, time.Second, time.Second, s)
		wantSkip(t, l, OutcomeAlreadyRun, nil)
		if f.count() != 0 {
			t.Fatalf("ran a claimed fire")
		}
	})
	t.Run("driver error", func(t *testing.T) {
		l := &recListener{}
		fc := clockwork.NewFakeClockAt(epoch)
		down := errors.New("connection refused")
		s := New(Config{Clock: fc, Logger: slog.New(&logRecorder{}), Driver: failingDriver{down}, Listeners: []Listener{l}})
		defer s.Stop(context.Background())
		var f fires
		mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k"), Name("t")))
		mustStart(t, s)
		step(t, fc, time.Second, time.Second, s)
		wantSkip(t, l, OutcomeLockFailed, down)
	})
	t.Run("no driver", func(t *testing.T) {
		l := &recListener{}
		s, _, _, _ := newListened(t, false, l)
		e := &entry{flight: new(flight), fn: noop, name: "t", cron: "@daily", spec: &Spec{Lock: "k", LockTTL: time.Minute},
			sched: gridSchedule{every: time.Hour}}
		s.takeoff(1)
		s.fire(firing{e: e, fire: epoch}, nil)
		wantSkip(t, l, OutcomeLockFailed, ErrNoDriver)
	})
	t.Run("still running", func(t *testing.T) {
		l := &recListener{}
		s, fc, _, _ := newListened(t, false, l)
		release := make(chan struct{})
		var runs atomic.Int32
		mustAdd(t, s, NewTask(func(context.Context) error {
			if runs.Add(1) == 1 {
				<-release
			}
			return nil
		}, Cron("@every 1s"), Name("t")))
		mustStart(t, s)
		waitIdle(t, s)
		fc.Advance(time.Second)
		s.mu.Lock()
		for len(s.due) == 0 || s.due[0].next.Before(epoch.Add(2*time.Second)) { // empty while the loop dispatches
			s.idle.Wait()
		}
		s.mu.Unlock()
		fc.Advance(time.Second)
		for len(l.skips()) == 0 {
			runtime.Gosched()
		}
		close(release)
		waitIdle(t, s)
		wantSkip(t, l, OutcomeRunning, nil)
	})
}

func wantSkip(t *testing.T, l *recListener, o Outcome, err error) {
	t.Helper()
	skips := l.skips()
	if len(skips) != 1 {
		t.Fatalf("%d skips %+v, want 1", len(skips), skips)
	}
	e := skips[0]
	if e.Outcome != o || e.Task != "t" || e.Fire.IsZero() || !e.Start.IsZero() {
		t.Fatalf("skip %+v, want outcome %s for task t", e, o)
	}
	if (err == nil) != (e.Err == nil) || (err != nil && !errors.Is(e.Err, err)) {
		t.Fatalf("skip err %v, want %v", e.Err, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if o != OutcomeRunning && (len(l.before) != 0 || len(l.after) != 0) {
		t.Fatalf("a skipped fire was reported as run: %+v", l.after)
	}
}

// failingDriver fails every Acquire, as a driver whose backend is down.
type failingDriver struct{ err error }

func (d failingDriver) Acquire(context.Context, string, time.Duration) (locks.Lease, error) {
	return nil, d.err
}

func (d failingDriver) Claim(context.Context, string, int64, time.Duration) (bool, error) {
	return false, d.err
}

// panicky panics in every method.
type panicky struct{}

func (panicky) BeforeRun(context.Context, Event) context.Context { panic("before") }
func (panicky) AfterRun(context.Context, Event)                  { panic("after") }
func (panicky) Skipped(Event)                                    { panic("skipped") }

func TestPanickingListenerDoesNotStopTheScheduler(t *testing.T) {
	l := &recListener{}
	s, fc, rec, d := newListened(t, true, panicky{}, l)
	var f, g fires
	mustAdd(t, s,
		NewTask(f.task, Cron("@every 1s"), Name("runs")),
		NewTask(g.task, Cron("@every 1s"), Lock("k"), Name("skips")))
	other, err := d.Acquire(context.Background(), "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(context.Background())
	mustStart(t, s)
	step(t, fc, 3*time.Second, time.Second, s)
	if f.count() != 3 {
		t.Fatalf("%d runs after a panicking listener, want 3", f.count())
	}
	if n, m := len(l.afterOf("runs")), len(l.skips()); n != 3 || m != 3 {
		t.Fatalf("the listener after the panicking one got %d runs and %d skips, want 3 and 3", n, m)
	}
	logs := rec.find("listener panicked")
	if len(logs) != 9 || logs[0].level != slog.LevelError || logs[0].attrs["listener"] != "scheduling.panicky" {
		t.Fatalf("%d panic logs, first %+v; want 9 naming the listener", len(logs), logs)
	}
}

func TestListenerSeesLeaseLost(t *testing.T) {
	l := &recListener{}
	s, fc, rec, _ := newListened(t, true, l)
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	mustAdd(t, s, NewTask(blockUntilCancelled(started, ended), Cron("@every 1h"), Lock("k"),
		LockTTL(10*time.Second), Name("long")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Hour)
	<-started
	if err := fc.BlockUntilContext(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Second)
	<-ended
	waitIdle(t, s)
	evs := l.afterOf("long")
	if len(evs) != 1 || !evs[0].LeaseLost || evs[0].RenewErr != nil {
		t.Fatalf("events %+v, want one with LeaseLost", evs)
	}
	if logs := rec.find("lease lost"); len(logs) != 1 || logs[0].level != slog.LevelWarn || logs[0].attrs["token"] == "0" {
		t.Fatalf("lease lost logs %+v", logs)
	}
}

// losingDriver hands out leases whose extension finds them lost.
type losingDriver struct{ locks.Driver }

func (d losingDriver) Unwrap() locks.Driver { return d.Driver }

func (d losingDriver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l, err := d.Driver.Acquire(ctx, key, ttl)
	if err != nil || key != "k" {
		return l, err
	}
	return losingLease{l}, nil
}

type losingLease struct{ locks.Lease }

func (l losingLease) Extend(ctx context.Context, _ time.Duration) error {
	_ = l.Lease.Release(ctx) // another holder took over: Done closes
	return locks.ErrLeaseLost
}

func TestListenerSeesRenewalFailure(t *testing.T) {
	l := &recListener{}
	fc := clockwork.NewFakeClockAt(epoch)
	rec := &logRecorder{}
	d := losingDriver{locks.NewInProcessDriver(locks.WithClock(fc))}
	s := New(Config{Clock: fc, Logger: slog.New(rec), Driver: d, Listeners: []Listener{l}})
	defer s.Stop(context.Background())
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	mustAdd(t, s, NewTask(blockUntilCancelled(started, ended), Cron("@every 1h"), Lock("k"),
		LockTTL(9*time.Second), Renew(), Name("renewed")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Hour)
	<-started
	if err := fc.BlockUntilContext(context.Background(), 3); err != nil { // loop, expiry, renewal ticker
		t.Fatal(err)
	}
	fc.Advance(3 * time.Second)
	<-ended
	waitIdle(t, s)
	evs := l.afterOf("renewed")
	if len(evs) != 1 || !errors.Is(evs[0].RenewErr, locks.ErrLeaseLost) || !evs[0].LeaseLost {
		t.Fatalf("events %+v, want a renewal error and the lease lost", evs)
	}
	if logs := rec.find("lease renewal failed"); len(logs) != 1 || logs[0].level != slog.LevelError {
		t.Fatalf("renewal logs %+v", logs)
	}
}

// countingWrapper counts the Acquire calls of the driver it wraps.
type countingWrapper struct {
	locks.Driver
	n *atomic.Int32
}

func (c countingWrapper) Unwrap() locks.Driver { return c.Driver }

func (c countingWrapper) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	c.n.Add(1)
	return c.Driver.Acquire(ctx, key, ttl)
}

func TestModuleTakesListenersAndDriverWrappers(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	l := &recListener{}
	var acquires atomic.Int32
	var s *Scheduler
	app := fxtest.New(t,
		fx.Supply(&Ledger{}),
		fx.Provide(func() clockwork.Clock { return fc }),
		fx.Provide(func() locks.Driver { return locks.NewInProcessDriver(locks.WithClock(fc)) }),
		fx.Provide(func() *slog.Logger { return slog.New(&logRecorder{}) }),
		fx.Module("elsewhere", Listen(func() *recListener { return l })),
		fx.Provide(fx.Annotate(func() DriverWrapper {
			return func(d locks.Driver) locks.Driver { return countingWrapper{d, &acquires} }
		}, fx.ResultTags(`group:"`+DriverWrappersGroup+`"`))),
		Provide(func(lg *Ledger) Task { return NewTask(lg.Close, Cron("@every 1s"), Lock("ledger")) }),
		Module,
		fx.Populate(&s),
	)
	app.RequireStart()
	step(t, fc, time.Second, time.Second, s)
	app.RequireStop()
	if n := len(l.afterOf("Ledger.Close")); n != 1 {
		t.Fatalf("listener from Listen saw %d runs, want 1", n)
	}
	if n := acquires.Load(); n != 1 { // the lock; the fire claim is not an Acquire
		t.Fatalf("wrapped driver saw %d acquires, want 1", n)
	}
}

// orderListener records the order of calls and checks that AfterRun gets
// the context its own BeforeRun returned.
type orderListener struct {
	name string
	log  *[]string
	mu   *sync.Mutex
}

type orderKey struct{ name string }

func (l orderListener) BeforeRun(ctx context.Context, _ Event) context.Context {
	l.mu.Lock()
	*l.log = append(*l.log, "before "+l.name)
	l.mu.Unlock()
	return context.WithValue(ctx, orderKey{l.name}, true)
}

func (l orderListener) AfterRun(ctx context.Context, _ Event) {
	mine := ctx.Value(orderKey{l.name}) != nil
	later := ctx.Value(orderKey{"second"}) != nil && l.name == "first"
	l.mu.Lock()
	*l.log = append(*l.log, fmt.Sprintf("after %s own=%v later=%v", l.name, mine, later))
	l.mu.Unlock()
}

func (orderListener) Skipped(Event) {}

func TestListenersNestLikeDefers(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	s, fc, _, _ := newListened(t, false, orderListener{"first", &calls, &mu}, orderListener{"second", &calls, &mu})
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Name("t")))
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"before first", "before second", "after second own=true later=false", "after first own=true later=false"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

func TestLeasesListsLockedRunsInFlight(t *testing.T) {
	s, fc, _, _ := newTest(t, true)
	started, ended := make(chan struct{}, 2), make(chan error, 2)
	release := make(chan struct{})
	hold := func(ctx context.Context) error {
		started <- struct{}{}
		<-release
		ended <- nil
		return nil
	}
	mustAdd(t, s,
		NewTask(hold, Cron("@every 1h"), Lock("b-lock"), Name("second")),
		NewTask(hold, Cron("@every 1h"), Lock("a-lock"), Name("first")),
		NewTask(noop, Cron("@every 1h"), Name("unlocked")))
	mustStart(t, s)
	waitIdle(t, s)
	if got := s.Leases(); len(got) != 0 {
		t.Fatalf("leases before any run: %+v", got)
	}
	fc.Advance(time.Hour)
	<-started
	<-started
	got := s.Leases()
	if len(got) != 2 || got[0].Key != "a-lock" || got[0].Task != "first" || got[1].Key != "b-lock" ||
		got[0].Token == 0 || !got[0].Since.Equal(epoch.Add(time.Hour)) || !got[1].Fire.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("leases %+v, want a-lock and b-lock held since the 1h fire", got)
	}
	close(release)
	<-ended
	<-ended
	waitIdle(t, s)
	if got := s.Leases(); len(got) != 0 {
		t.Fatalf("leases after the runs: %+v", got)
	}
}
