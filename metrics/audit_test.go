package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// downRuns is a task state whose history cannot be read while down is set.
type downRuns struct {
	taskstate.Store
	down atomic.Bool
}

func (d *downRuns) Runs(ctx context.Context, task string, limit int) ([]taskstate.Run, error) {
	if d.down.Load() {
		return nil, errors.New("store down")
	}
	return d.Store.Runs(ctx, task, limit)
}

// The audit collector reports no missed fire while the task runs, the fires
// of a stopped cluster once its interval is over, with the newest, and
// ndigo_audit_up 0, the last figures kept, while the history is unreadable.
func TestAuditCollectorReportsMissedFires(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(taskstate.MaxHistory)
	store := &downRuns{Store: inner}
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: locks.NewInProcessDriver(locks.WithClock(fc)), State: store,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
		scheduling.Lock("k"), scheduling.LockTTL(2*time.Second), scheduling.Name("report"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := NewAuditCollector(s, time.Minute)
	c.now = fc.Now
	reg.MustRegister(c)
	settle(t, fc, s, 70)
	if missed, up := sample(t, reg, TaskMissedFires, "task", "report"), sample(t, reg, AuditUp); missed != 0 || up != 1 {
		t.Fatalf("running: missed %v, up %v; want 0 and 1", missed, up)
	}
	wantHealth(t, reg, scheduling.HealthOK)
	if n := testutil.CollectAndCount(c, TaskLastMissedFire); n != 0 {
		t.Errorf("running: %d last-missed series, want none", n)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := fc.Now() // 00:01:10, its last fire run
	fc.Advance(30 * time.Second)
	if missed := sample(t, reg, TaskMissedFires, "task", "report"); missed != 0 {
		t.Errorf("within the interval: missed %v, want the audit kept (0)", missed)
	}
	fc.Advance(90 * time.Second)
	// Now 00:03:10; the horizon, the lock TTL and a minute back, 00:02:08.
	horizon := fc.Now().Add(-2*time.Second - time.Minute)
	want := float64(horizon.Sub(stopped) / time.Second)
	if missed := sample(t, reg, TaskMissedFires, "task", "report"); missed != want {
		t.Errorf("stopped: missed %v, want %v (from %v to %v)", missed, want, stopped, horizon)
	}
	if last := sample(t, reg, TaskLastMissedFire, "task", "report"); last != float64(horizon.Unix()) {
		t.Errorf("last missed %v, want %v", last, float64(horizon.Unix()))
	}
	// Its third fire without a run is past its grace (the lock TTL and a
	// minute) since 00:02:15.
	wantHealth(t, reg, scheduling.HealthDown)
	store.down.Store(true)
	fc.Advance(time.Minute)
	if missed, up := sample(t, reg, TaskMissedFires, "task", "report"), sample(t, reg, AuditUp); missed != want || up != 0 {
		t.Errorf("history unreadable: missed %v, up %v; want the last figure, %v, and 0", missed, up, want)
	}
	wantHealth(t, reg, scheduling.HealthUnknown)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// wantHealth checks that ndigo_task_health of the task "report" is 1 for
// state and 0 for every other state.
func wantHealth(t *testing.T, reg *prometheus.Registry, state scheduling.Health) {
	t.Helper()
	for _, st := range scheduling.HealthStates {
		want := 0.0
		if st == state {
			want = 1
		}
		if got := sample(t, reg, TaskHealth, "task", "report", "state", string(st)); got != want {
			t.Errorf("%s{state=%q} = %v, want %v", TaskHealth, st, got, want)
		}
	}
}
