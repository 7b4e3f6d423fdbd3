package schedulingtest_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// A zero Gate holds each Wait until it opens or the caller's context ends,
// counting the waiters it holds: not one whose context ended, none once it
// opened (as soon as it does, before they return). It opens once.
func TestGate(t *testing.T) {
	var g schedulingtest.Gate
	if g.Opened() || g.Blocked() != 0 {
		t.Fatalf("a zero Gate: opened %v, blocked %d", g.Opened(), g.Blocked())
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- g.Wait(ctx) }()
	go func() { errs <- g.Wait(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); g.Blocked() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters blocked, want 2", g.Blocked())
		}
	}
	cancel()
	if n := g.Blocked(); n != 1 { // at once, before the Wait returns
		t.Fatalf("%d waiters blocked once one's context ended, want 1", n)
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with its context cancelled: %v", err)
	}
	g.Open()
	g.Open() // a second Open does nothing
	if err := <-errs; err != nil || !g.Opened() || g.Blocked() != 0 {
		t.Fatalf("Wait once the gate opened: %v; opened %v, blocked %d", err, g.Opened(), g.Blocked())
	}
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on an open gate: %v", err)
	}
}

// StepBlocked settles a scheduler whose run blocks at a Gate: each second
// ends with that run blocked and every other fire and poll done (a task
// beside it ran every second, the blocked task's later fires were
// skipped), where Settle waits for the run until its context ends. Once
// the gate opens, the run ends and the task runs again.
func TestStepBlocked(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	rec := &schedulingtest.Recorder{}
	s := scheduling.New(scheduling.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), State: store,
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Listeners: []scheduling.Listener{rec}})
	var g schedulingtest.Gate
	var runs atomic.Int32
	if err := s.Add(
		scheduling.NewTask(func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				return g.Wait(ctx)
			}
			return nil
		}, scheduling.Name("blocks"), scheduling.Cron("@every 1s"), scheduling.Lock("blocks")),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("beside"), scheduling.Cron("@every 1s")),
	); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Open()
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	count := func(task string) (started, ended, skipped int) {
		for _, e := range rec.Started() {
			if e.Task == task {
				started++
			}
		}
		for _, e := range rec.Ended() {
			if e.Task == task {
				ended++
			}
		}
		for _, e := range rec.Skips() {
			if e.Task == task && e.Outcome == scheduling.OutcomeRunning {
				skipped++
			}
		}
		return started, ended, skipped
	}

	// The fire of the first second blocks from its start: the step that
	// fires it ends with it blocked.
	if err := schedulingtest.StepBlocked(ctx, fc, time.Second, 0, g.Blocked, s); err != nil {
		t.Fatal(err)
	}
	if n := g.Blocked(); n != 1 || !s.Tasks()[0].Running {
		t.Fatalf("after the first fire: %d runs blocked, running %v; want the first, running", n, s.Tasks()[0].Running)
	}
	if err := schedulingtest.StepBlocked(ctx, fc, 4*time.Second, time.Second, g.Blocked, s); err != nil {
		t.Fatal(err)
	}
	if started, ended, skipped := count("blocks"); started != 1 || ended != 0 || skipped != 4 {
		t.Errorf("blocks: %d started, %d ended, %d skipped as still running; want 1, 0 and 4", started, ended, skipped)
	}
	if started, ended, _ := count("beside"); started != 5 || ended != 5 {
		t.Errorf("beside: %d started, %d ended; want 5 of 5 seconds, all ended", started, ended)
	}

	// Settle waits for the blocked run; so does SettleBlocked told of none.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := schedulingtest.Settle(short, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle with a run blocked: %v, want the context's deadline", err)
	}
	none, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := schedulingtest.SettleBlocked(none, func() int { return 0 }, s); !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "1 fires in flight, 0 of them blocked") {
		t.Errorf("SettleBlocked told of no blocked run: %v, want the context's deadline and the counts", err)
	}
	// A blocked count above the fires in flight is a mistake, said at once.
	if err := schedulingtest.SettleBlocked(ctx, func() int { return 2 }, s); err == nil || !strings.Contains(err.Error(), "2 runs blocked, 1 fires in flight") {
		t.Errorf("SettleBlocked told of 2 blocked runs: %v, want the counts", err)
	}

	g.Open()
	if err := schedulingtest.StepBlocked(ctx, fc, 2*time.Second, time.Second, g.Blocked, s); err != nil {
		t.Fatal(err)
	}
	if started, ended, _ := count("blocks"); started != 3 || ended != 3 || g.Blocked() != 0 {
		t.Errorf("blocks once the gate opened: %d started, %d ended, %d blocked; want 3, 3 and 0", started, ended, g.Blocked())
	}
	// Nothing blocked: Settle settles.
	if err := schedulingtest.Settle(ctx, s); err != nil {
		t.Fatal(err)
	}
}
