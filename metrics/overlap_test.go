package metrics

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// pollCounter is a task state store that counts the polls that returned.
type pollCounter struct {
	taskstate.Store
	n atomic.Int64
}

func (p *pollCounter) Poll(ctx context.Context) (taskstate.Poll, error) {
	defer p.n.Add(1)
	return p.Store.Poll(ctx)
}

// Two tasks fire every minute, and their first runs, of 00:01, block:
// "sync" (overlap buffer-one) until the test releases it at 00:03:30, so
// that its fire at 00:02 waits (a skip of reason buffered) and the one at
// 00:03 is skipped while it does (one_waiting); "latest"
// (cancel-previous) until its context ends, which its fire at 00:02 does
// (buffered), superseding it: a run of outcome cancelled. Each waiting
// fire's run is a run, of attempt 1, not a retry; every series of both
// reasons exists at zero from Init on.
func TestOverlapMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	polls := &pollCounter{Store: store}
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: m.InstrumentDriver(locks.NewInProcessDriver(locks.WithClock(fc))),
		State: polls, Listeners: []scheduling.Listener{m}, Logger: slog.New(slog.DiscardHandler)})
	released := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(released) }) }
	started := make(chan struct{}, 2)
	var syncRuns, latestRuns atomic.Int32
	var cause atomic.Value
	if err := s.Add(
		scheduling.NewTask(func(context.Context) error {
			if syncRuns.Add(1) == 1 {
				started <- struct{}{}
				<-released
			}
			return nil
		}, scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour), scheduling.Name("sync"),
			scheduling.Overlap(scheduling.OverlapBufferOne)),
		scheduling.NewTask(func(ctx context.Context) error {
			if latestRuns.Add(1) == 1 {
				started <- struct{}{}
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				return ctx.Err()
			}
			return nil
		}, scheduling.Cron("@every 1m"), scheduling.Lock("latest"), scheduling.LockTTL(time.Hour), scheduling.Name("latest"),
			scheduling.Overlap(scheduling.OverlapCancelPrevious)),
	); err != nil {
		t.Fatal(err)
	}
	m.Init("sync", "latest")
	for _, r := range []string{ReasonBuffered, ReasonOneWaiting} {
		if got := sample(t, reg, TaskSkips, "task", "sync", "reason", r); got != 0 {
			t.Fatalf("skips[%s] = %v before any fire", r, got)
		}
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var stopped bool
	t.Cleanup(func() { // on a failure before the test's own Stop
		if release(); !stopped {
			_ = s.Stop(context.Background())
		}
	})
	// To 00:00:59, settled; then 00:01, whose runs block, and schedulingtest.Step
	// would wait for them: each second waits, a while on the real clock,
	// for that second's poll of the task state, so that the fires and polls
	// of each second come in their turn.
	if err := schedulingtest.Step(context.Background(), fc, 59*time.Second, time.Second, s); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	<-started
	<-started
	for fc.Now().Before(epoch.Add(3*time.Minute + 30*time.Second)) {
		n := polls.n.Load()
		fc.Advance(time.Second)
		for deadline := time.Now().Add(time.Second); polls.n.Load() == n && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond) // polls a condition; the test's results do not depend on the delay
		}
		if fc.Now().Equal(epoch.Add(2*time.Minute + 10*time.Second)) {
			// The waiting fire's record in the store, whose polls give it back.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				runs, err := s.History(context.Background(), "sync")
				if err == nil && slices.ContainsFunc(runs, func(r taskstate.Run) bool { return r.Outcome == string(scheduling.OutcomeBuffered) }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the fire of sync at 00:02 not recorded as waiting: %v %v", runs, err)
				}
			}
		}
	}
	if c, _ := cause.Load().(error); !errors.Is(c, scheduling.ErrSuperseded) {
		t.Fatalf("latest's first run ended with cause %v, want scheduling.ErrSuperseded", c)
	}
	release()
	// To 00:04:30: sync's first run ends, its waiting fire runs at the next
	// poll, then 00:04.
	if err := schedulingtest.Step(context.Background(), fc, time.Minute, time.Second, s); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{TaskSkips, []string{"task", "sync", "reason", ReasonBuffered}, 1},
		{TaskSkips, []string{"task", "sync", "reason", ReasonOneWaiting}, 1},
		{TaskSkips, []string{"task", "sync", "reason", ReasonStillRunning}, 0},
		{TaskSkips, []string{"task", "sync", "reason", ReasonLockError}, 0},
		{TaskRuns, []string{"task", "sync", "outcome", "ok"}, 3}, // 00:01, the waiting 00:02, 00:04
		{TaskRetries, []string{"task", "sync"}, 0},               // the waiting fire's run is attempt 1
		{TaskFires, []string{"task", "sync"}, 5},                 // 00:02 counts as it waits and as it runs
		{TaskSkips, []string{"task", "latest", "reason", ReasonBuffered}, 1},
		{TaskSkips, []string{"task", "latest", "reason", ReasonOneWaiting}, 0},
		{TaskRuns, []string{"task", "latest", "outcome", "cancelled"}, 1}, // 00:01, superseded
		{TaskRuns, []string{"task", "latest", "outcome", "error"}, 0},
		{TaskRuns, []string{"task", "latest", "outcome", "ok"}, 3}, // the waiting 00:02, 00:03, 00:04
		{TaskRetries, []string{"task", "latest"}, 0},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg, TaskSkips, TaskRuns)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint of %s, %s: %v %+v", TaskSkips, TaskRuns, err, problems)
	}
}
