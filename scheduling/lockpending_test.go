package scheduling_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// A fire that finds the previous one still in its lock step (the driver
// has not answered: a hung backend) is skipped as "skipped: lock pending",
// not as "skipped: still running": nothing of the task runs. Once the lock
// step ended (failed at the lock TTL) and a run is going, a fire that finds
// it is skipped as still running.
func TestFireBehindAPendingLockCallSaysSo(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(epoch)
	drv := schedulingtest.NewDriver(locks.NewInProcessDriver(locks.WithClock(fc))).Node("node-a", fc)
	hung := epoch.Add(90 * time.Second) // the 00:01 fire's lock call hangs past its TTL
	var pending atomic.Int32            // lock calls held by the fault: Settle counts them as blocked
	drv.SetFaults(func(c schedulingtest.Call) schedulingtest.Fault {
		if (c.Op == schedulingtest.OpAcquire || c.Op == schedulingtest.OpAcquireClaim) && fc.Now().Before(hung) {
			pending.Add(1)
			return schedulingtest.Fault{Delay: time.Hour}
		}
		return schedulingtest.Fault{}
	})
	drv.Observe(func(r schedulingtest.Result) {
		if r.Fault.Delay > 0 {
			pending.Add(-1)
		}
	})
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &schedulingtest.Recorder{}
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: drv, State: store, Node: "node-a", Listeners: []scheduling.Listener{rec},
		Logger: slog.New(slog.DiscardHandler)})
	gate := &schedulingtest.Gate{}
	var runs atomic.Int32
	if err := s.Add(scheduling.NewTask(func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			return gate.Wait(ctx)
		}
		return nil
	}, scheduling.Cron("@every 1m"), scheduling.Lock("report"), scheduling.LockTTL(150*time.Second), scheduling.Name("report"))); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Open(); _ = s.Stop(context.Background()) })
	blocked := func() int { return gate.Blocked() + int(pending.Load()) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 00:01's lock call hangs until its TTL (00:03:30); 00:02 and 00:03 find it pending.
	if err := schedulingtest.StepBlocked(ctx, fc, 4*time.Minute+30*time.Second, time.Second, blocked, s); err != nil {
		t.Fatal(err)
	}
	outcomes := map[time.Time]scheduling.Outcome{}
	for _, e := range rec.Skips() {
		outcomes[e.Fire] = e.Outcome
	}
	for _, m := range []int{2, 3} {
		if o := outcomes[epoch.Add(time.Duration(m)*time.Minute)]; o != scheduling.OutcomeLockPending {
			t.Errorf("the fire of 00:0%d behind the hung lock call: %q, want %q", m, o, scheduling.OutcomeLockPending)
		}
	}
	if o := outcomes[epoch.Add(time.Minute)]; o != scheduling.OutcomeLockFailed {
		t.Errorf("the fire of 00:01 whose lock call hung: %q, want %q", o, scheduling.OutcomeLockFailed)
	}
	// 00:04 runs and blocks at the gate; 00:05 finds it running.
	if err := schedulingtest.StepBlocked(ctx, fc, time.Minute, time.Second, blocked, s); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.Skips() {
		outcomes[e.Fire] = e.Outcome
	}
	if o := outcomes[epoch.Add(5*time.Minute)]; o != scheduling.OutcomeRunning {
		t.Errorf("the fire of 00:05 behind a run going: %q, want %q", o, scheduling.OutcomeRunning)
	}
}
