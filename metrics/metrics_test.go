package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sample returns the value of the series name{labels} gathered from g: a
// counter's or gauge's value, or a histogram's sample count. It fails the test if the
// series is absent.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if want[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			return value(f.GetType(), m)
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// settle steps fc a second at a time and waits until the fires of each
// second are done, listeners included.
func settle(t *testing.T, fc *clockwork.FakeClock, s *scheduling.Scheduler, seconds int) {
	t.Helper()
	if err := schedulingtest.Step(context.Background(), fc, time.Duration(seconds)*time.Second, time.Second, s); err != nil {
		t.Fatal(err)
	}
}

// instrumented returns Metrics on a registry of their own, and a
// scheduler, not started, that they instrument: on a fake clock at epoch,
// with the in-process lock driver (instrumented) and task state store, m
// its listener.
func instrumented(t *testing.T) (*prometheus.Registry, *Metrics, *fakenode.Node) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fc := clockwork.NewFakeClockAt(epoch)
	return reg, m, fakenode.New(t, fc, scheduling.Config{Driver: m.InstrumentDriver(locks.NewInProcessDriver(locks.WithClock(fc))),
		Listeners: []scheduling.Listener{m}})
}

func TestSchedulerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fc := clockwork.NewFakeClockAt(epoch)
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	other, err := d.Acquire(context.Background(), "busy", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(context.Background())
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: m.InstrumentDriver(d),
		Listeners: []scheduling.Listener{m}, Logger: slog.New(slog.DiscardHandler)})
	err = s.Add(
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
			scheduling.Lock("free"), scheduling.Name("ok")),
		scheduling.NewTask(func(context.Context) error { return errors.New("no") }, scheduling.Cron("@every 1s"),
			scheduling.Name("fails")),
		scheduling.NewTask(func(context.Context) error { panic("boom") }, scheduling.Cron("@every 1s"),
			scheduling.Name("panics")),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
			scheduling.Lock("busy"), scheduling.Name("blocked")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	settle(t, fc, s, 3)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{TaskFires, []string{"task", "ok"}, 3},
		{TaskFires, []string{"task", "blocked"}, 3},
		{TaskRuns, []string{"task", "ok", "outcome", "ok"}, 3},
		{TaskRuns, []string{"task", "fails", "outcome", "error"}, 3},
		{TaskRuns, []string{"task", "panics", "outcome", "panic"}, 3},
		{TaskSkips, []string{"task", "blocked", "reason", ReasonLockHeld}, 3},
		{TaskRunDuration, []string{"task", "ok"}, 3},
		{TaskLateness, []string{"task", "panics"}, 3},
		// Each fire of "ok" takes its lock (the fire claim is not an
		// acquisition); "blocked" finds its lock held.
		{LockAttempts, []string{"outcome", "acquired"}, 3},
		{LockAttempts, []string{"outcome", "held"}, 3},
		{LockAttempts, []string{"outcome", "error"}, 0},
		{LockAcquireDuration, nil, 6},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ndigo_task_skips_total Fires skipped on this node by reason: lock_held, still_running, lock_pending, already_run, missed, paused, not_owner, retrying, buffered, one_waiting, no_driver, lock_error.
# TYPE ndigo_task_skips_total counter
ndigo_task_skips_total{reason="lock_held",task="blocked"} 3
`), TaskSkips); err != nil {
		t.Fatal(err)
	}
	// Every name follows the conventions: prefix, unit, _total on counters.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("lint: %+v", problems)
	}
}

func TestSkipReasonsAndLeaseMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("connection refused")
	for _, e := range []scheduling.Event{
		{Task: "t", Outcome: scheduling.OutcomeRunning},
		{Task: "t", Outcome: scheduling.OutcomeLockPending},
		{Task: "t", Outcome: scheduling.OutcomeAlreadyRun},
		{Task: "t", Outcome: scheduling.OutcomePaused},
		{Task: "t", Outcome: scheduling.OutcomeNotOwner},
		{Task: "t", Outcome: scheduling.OutcomeRetrying},
		{Task: "t", Outcome: scheduling.OutcomeBuffered},
		{Task: "t", Outcome: scheduling.OutcomeBufferFull},
		{Task: "t", Outcome: scheduling.OutcomeLockFailed, Err: scheduling.ErrNoDriver},
		{Task: "t", Outcome: scheduling.OutcomeLockFailed, Err: down},
	} {
		m.Skipped(e)
	}
	m.AfterRun(context.Background(), scheduling.Event{Task: "t", Outcome: scheduling.OutcomeError,
		LeaseLost: true, RenewErr: locks.ErrLeaseLost})
	for reason, want := range map[string]float64{ReasonStillRunning: 1, ReasonLockPending: 1, ReasonAlreadyRun: 1, ReasonPaused: 1, ReasonNotOwner: 1, ReasonRetrying: 1, ReasonBuffered: 1, ReasonOneWaiting: 1, ReasonNoDriver: 1, ReasonLockError: 1} {
		if got := sample(t, reg, TaskSkips, "task", "t", "reason", reason); got != want {
			t.Errorf("skips %s = %v, want %v", reason, got, want)
		}
	}
	if got := sample(t, reg, LeasesLost, "task", "t"); got != 1 {
		t.Errorf("leases lost %v", got)
	}
	if got := sample(t, reg, LeaseRenewalsFailed, "task", "t"); got != 1 {
		t.Errorf("renewals failed %v", got)
	}
	if got := sample(t, reg, TaskFires, "task", "t"); got != 11 {
		t.Errorf("fires %v, want 11 (ten skips and a run)", got)
	}
	if got := sample(t, reg, TaskRetries, "task", "t"); got != 0 {
		t.Errorf("retries %v after a first attempt, want 0", got)
	}
	for _, attempt := range []int{0, 1, 2, 5} { // 0: a listener's event from before retries
		m.AfterRun(context.Background(), scheduling.Event{Task: "t", Outcome: scheduling.OutcomeOK, Attempt: attempt})
	}
	if got := sample(t, reg, TaskRetries, "task", "t"); got != 2 {
		t.Errorf("retries %v after runs of attempts 0, 1, 2 and 5, want 2", got)
	}
}

// plainDriver is a Driver with no optional interfaces, failing or not.
type plainDriver struct{ err error }

func (d plainDriver) Acquire(context.Context, string, time.Duration) (locks.Lease, error) {
	return nil, d.err
}

type claimingDriver struct{ plainDriver }

func (claimingDriver) Claim(context.Context, string, int64, time.Duration) (bool, error) {
	return true, nil
}

type bothDriver struct{ claimingDriver }

func (bothDriver) Watch(string) (<-chan struct{}, func()) { return nil, func() {} }

func TestInstrumentDriverKeepsOptionalInterfaces(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d                    locks.Driver
		watch, claims, inOne bool
	}{
		{plainDriver{}, false, false, false},
		{locks.NewInProcessDriver(), true, true, true},
		{claimingDriver{}, false, true, false},
		{bothDriver{}, true, true, false},
	} {
		got := m.InstrumentDriver(c.d)
		_, w := locks.As[locks.Watcher](got)
		_, cl := locks.As[locks.Claimer](got)
		_, one := got.(locks.ClaimAcquirer) // looked up on the driver itself, not through Unwrap
		if w != c.watch || cl != c.claims || one != c.inOne {
			t.Errorf("%T wrapped: Watcher %v Claimer %v ClaimAcquirer %v, want %v %v %v", c.d, w, cl, one, c.watch, c.claims, c.inOne)
		}
	}
}

// The fires of one AcquireClaims call are counted one by one, by outcome.
func TestInstrumentDriverCountsFires(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	inner := locks.NewInProcessDriver()
	ctx := context.Background()
	if _, err := inner.Acquire(ctx, "held", time.Minute); err != nil {
		t.Fatal(err)
	}
	fire := func(key string) locks.FireLock {
		return locks.FireLock{Key: key, TTL: time.Minute, Claim: locks.FireClaim{Key: key + "@t", Seq: 1, TTL: time.Minute}}
	}
	out := locks.AcquireClaims(ctx, m.InstrumentDriver(inner), []locks.FireLock{fire("a"), fire("b"), fire("held"), {}})
	if out[0].Err != nil || out[1].Err != nil || !errors.Is(out[2].Err, locks.ErrNotAcquired) || !errors.Is(out[3].Err, locks.ErrInvalid) {
		t.Fatalf("AcquireClaims through the instrumented driver: %+v", out)
	}
	for outcome, want := range map[string]float64{"acquired": 2, "held": 1, "error": 1} {
		if got := sample(t, reg, LockAttempts, "outcome", outcome); got != want {
			t.Errorf("%s attempts %v, want %v", outcome, got, want)
		}
	}
}

func TestInstrumentDriverCountsErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("connection refused")
	d := m.InstrumentDriver(plainDriver{down})
	if _, err := d.Acquire(context.Background(), "k", time.Second); !errors.Is(err, down) {
		t.Fatalf("error not passed through: %v", err)
	}
	if got := sample(t, reg, LockAttempts, "outcome", "error"); got != 1 {
		t.Fatalf("error attempts %v", got)
	}
}

func TestNewSharesCollectorsOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(reg)
	if err != nil {
		t.Fatalf("second New on one registry: %v", err)
	}
	a.Skipped(scheduling.Event{Task: "t", Outcome: scheduling.OutcomeLockHeld})
	b.Skipped(scheduling.Event{Task: "t", Outcome: scheduling.OutcomeLockHeld})
	if got := sample(t, reg, TaskSkips, "task", "t", "reason", ReasonLockHeld); got != 2 {
		t.Fatalf("shared counter %v, want 2", got)
	}
}

func TestModuleBesideARootDecoration(t *testing.T) {
	reg := prometheus.NewRegistry()
	fc := clockwork.NewFakeClockAt(epoch)
	var s *scheduling.Scheduler
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(reg, fx.As(new(prometheus.Registerer)))),
		fx.Provide(func() clockwork.Clock { return fc }),
		fx.Provide(func() *slog.Logger { return slog.New(slog.DiscardHandler) }),
		locks.Module,
		// As redislocks.Module does: the one decoration fx allows at the root.
		fx.Decorate(func() locks.Driver { return locks.NewInProcessDriver(locks.WithClock(fc)) }),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Cron("@every 1s"), scheduling.Lock("k"), scheduling.Name("job"))
		}),
		scheduling.Module,
		Module,
		fx.Populate(&s),
	)
	app.RequireStart()
	// Before the first fire, every counter of the task exists at zero
	// (sample fails the test on a missing series).
	for _, r := range []string{ReasonLockHeld, ReasonStillRunning, ReasonAlreadyRun, ReasonMissed, ReasonPaused, ReasonNotOwner, ReasonRetrying, ReasonBuffered, ReasonOneWaiting, ReasonNoDriver, ReasonLockError} {
		if got := sample(t, reg, TaskSkips, "task", "job", "reason", r); got != 0 {
			t.Fatalf("skips[%s] = %v before any fire", r, got)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{{TaskFires, []string{"task", "job"}}, {TaskRuns, []string{"task", "job", "outcome", "cancelled"}},
		{LeasesLost, []string{"task", "job"}}, {LeaseRenewalsFailed, []string{"task", "job"}}, {TaskRetries, []string{"task", "job"}}} {
		if got := sample(t, reg, c.name, c.labels...); got != 0 {
			t.Fatalf("%s%v = %v before any fire", c.name, c.labels, got)
		}
	}
	settle(t, fc, s, 2)
	app.RequireStop() // after the scheduler's Stop, every listener has returned
	if got := sample(t, reg, TaskRuns, "task", "job", "outcome", "ok"); got != 2 {
		t.Fatalf("runs %v, want 2", got)
	}
	if got, want := sample(t, reg, TaskLastSuccess, "task", "job"), float64(epoch.Add(2*time.Second).Unix()); got != want {
		t.Fatalf("last success %v, want %v (the second run's end)", got, want)
	}
	if got := sample(t, reg, LockAttempts, "outcome", "acquired"); got != 2 {
		t.Fatalf("acquired %v, want 2 (the lock of each fire)", got)
	}
}
