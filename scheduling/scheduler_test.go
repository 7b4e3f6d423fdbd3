package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

func TestFiresOnScheduleWithOneTimer(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var f fires
	before := runtime.NumGoroutine()
	for i := range 1000 {
		mustAdd(t, s, NewTask(f.task, Cron("@every 1h"), Name(fmt.Sprint("idle", i))))
	}
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Name("tick")))
	mustStart(t, s)
	waitIdle(t, s)
	// Idle tasks cost no goroutine: the loop is the only one added.
	if n := runtime.NumGoroutine() - before; n > 1 {
		t.Fatalf("%d goroutines for 1001 tasks, want 1 (the loop)", n)
	}
	// And no timer: the loop's is the only one on the clock.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fc.BlockUntilContext(done, 2); err == nil {
		t.Fatalf("two or more timers on the clock for 1001 tasks, want one")
	}
	step(t, fc, 3*time.Second, 500*time.Millisecond, s)
	got := f.list()
	want := []time.Time{epoch.Add(time.Second), epoch.Add(2 * time.Second), epoch.Add(3 * time.Second)}
	if len(got) != len(want) {
		t.Fatalf("fires %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("fires %v, want %v", got, want)
		}
	}
}

func TestMissedFiresAreNotCaughtUp(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(10 * time.Second) // one jump past ten fires
	waitIdle(t, s)
	if n := f.count(); n != 1 {
		t.Fatalf("%d runs after a 10s jump, want 1", n)
	}
	if next := s.Tasks()[0].Next; !next.Equal(epoch.Add(11 * time.Second)) {
		t.Fatalf("next fire %v, want %v", next, epoch.Add(11*time.Second))
	}
}

func TestLockReleasedAfterErrorAndPanic(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			s, fc, rec, d := newTest(t, true)
			var runs atomic.Int32
			fn := func(ctx context.Context) error {
				runs.Add(1)
				if mode == "panic" {
					panic("boom")
				}
				return errors.New("boom")
			}
			mustAdd(t, s, NewTask(fn, Cron("@every 1s"), Lock("k"), Name("flaky")))
			mustStart(t, s)
			step(t, fc, time.Second, time.Second, s)
			// The lease is free again: the next acquirer gets it at once.
			l, err := d.Acquire(context.Background(), "k", time.Second)
			if err != nil {
				t.Fatalf("lock still held after a run that ended with %s: %v", mode, err)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			step(t, fc, 2*time.Second, time.Second, s)
			if n := runs.Load(); n != 3 {
				t.Fatalf("%d runs in 3 fires, want 3: the slot wedged", n)
			}
			info := s.Tasks()[0]
			wantOutcome := map[string]Outcome{"error": OutcomeError, "panic": OutcomePanic}[mode]
			if info.Last.Outcome != wantOutcome || info.Last.Err == nil || info.Failures != 3 {
				t.Fatalf("last run %+v, failures %d", info.Last, info.Failures)
			}
			if mode == "panic" {
				if !errors.Is(info.Last.Err, ErrPanic) || !strings.Contains(info.Last.Err.Error(), "boom") {
					t.Fatalf("panic error %v", info.Last.Err)
				}
				logs := rec.find("task panicked")
				if len(logs) != 3 || logs[0].attrs["task"] != "flaky" {
					t.Fatalf("panic logs %+v, want 3 naming task flaky", logs)
				}
			}
		})
	}
}

func TestContentionSkipsAndLogs(t *testing.T) {
	s, fc, rec, d := newTest(t, true)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("payroll-window"), Name("close-books")))
	mustStart(t, s)
	other, err := d.Acquire(context.Background(), "payroll-window", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	step(t, fc, 2*time.Second, time.Second, s)
	if n := f.count(); n != 0 {
		t.Fatalf("ran %d times while another holder had the lock", n)
	}
	logs := rec.find("lock 'payroll-window' is held")
	if len(logs) != 2 || logs[0].attrs["task"] != "close-books" {
		t.Fatalf("contention logs %+v, want 2 naming the task", logs)
	}
	if info := s.Tasks()[0]; info.Last.Outcome != OutcomeLockHeld || info.Skips != 2 {
		t.Fatalf("registry %+v", info)
	}
	// The schedule continues; nothing was queued.
	if err := other.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	step(t, fc, time.Second, time.Second, s)
	if got := f.list(); len(got) != 1 || !got[0].Equal(epoch.Add(3*time.Second)) {
		t.Fatalf("fires after release %v, want only the 3s fire", got)
	}
}

func TestLockWaitWaitsThenRuns(t *testing.T) {
	s, fc, rec, d := newTest(t, true)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 10s"), Lock("k"), LockWait(5*time.Second),
		LockWaitStep(time.Second), Name("patient")))
	mustStart(t, s)
	other, err := d.Acquire(context.Background(), "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// waiting blocks until the fire's lock waiter is parked on its budget
	// and poll timers, beside the loop's timer.
	waiting := func() {
		t.Helper()
		if err := fc.BlockUntilContext(context.Background(), 3); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, s)
	fc.Advance(10 * time.Second)
	waiting()
	fc.Advance(time.Second)
	waiting()
	fc.Advance(time.Second)
	waiting()
	if n := f.count(); n != 0 {
		t.Fatalf("ran while the lock was held")
	}
	if err := other.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	if got := f.list(); len(got) != 1 || !got[0].Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("fires %v, want the 10s fire, run late within its wait budget", got)
	}
	// Past the budget, the fire is skipped.
	if other, err = d.Acquire(context.Background(), "k", time.Hour); err != nil {
		t.Fatal(err)
	}
	fc.Advance(8 * time.Second) // to the 20s fire
	for range 4 {
		waiting()
		fc.Advance(time.Second)
	}
	waiting()
	fc.Advance(time.Second) // 25s: the budget is spent
	waitIdle(t, s)
	if n := f.count(); n != 1 {
		t.Fatalf("%d runs, want 1: the 20s fire should have given up after 5s", n)
	}
	if logs := rec.find("lock 'k' is held"); len(logs) != 1 || logs[0].attrs["task"] != "patient" {
		t.Fatalf("contention logs %+v, want 1", logs)
	}
	_ = other.Release(context.Background())
}

func TestSameTickResolvesByRegistrationOrder(t *testing.T) {
	for _, firstWins := range []string{"first", "second"} {
		t.Run(firstWins, func(t *testing.T) {
			s, fc, rec, _ := newTest(t, true)
			var a, b fires
			ta := NewTask(a.task, Cron("@every 1s"), Lock("shared"), Name("first"))
			tb := NewTask(b.task, Cron("@every 1s"), Lock("shared"), Name("second"))
			winner, loser := &a, &b
			if firstWins == "second" {
				ta, tb = tb, ta
				winner, loser = &b, &a
			}
			mustAdd(t, s, ta, tb)
			mustStart(t, s)
			step(t, fc, 20*time.Second, time.Second, s)
			if winner.count() != 20 || loser.count() != 0 {
				t.Fatalf("earlier-registered ran %d of 20, later-registered %d; want 20 and 0",
					winner.count(), loser.count())
			}
			if logs := rec.find("lock 'shared' is held"); len(logs) != 20 || logs[0].attrs["task"] != tb.Name() {
				t.Fatalf("%d skip logs (first %+v), want 20 naming %s", len(logs), logs[0], tb.Name())
			}
		})
	}
}

func TestSameTickUnlockedRunConcurrently(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var started atomic.Int32
	all := make(chan struct{})
	fn := func(ctx context.Context) error {
		if started.Add(1) == 3 {
			close(all)
		}
		<-all // returns only once all three are running at once
		return nil
	}
	mustAdd(t, s, NewTask(fn, Cron("@every 1s"), Name("a")), NewTask(fn, Cron("@every 1s"), Name("b")),
		NewTask(fn, Cron("@every 1s"), Name("c")))
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)
	if started.Load() != 3 {
		t.Fatalf("%d started", started.Load())
	}
}

func TestSingleFlight(t *testing.T) {
	s, fc, rec, _ := newTest(t, false)
	release := make(chan struct{})
	var runs atomic.Int32
	fn := func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			<-release
		}
		return nil
	}
	mustAdd(t, s, NewTask(fn, Cron("@every 1s"), Name("slow")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Second)
	s.mu.Lock()
	for len(s.due) == 0 || s.due[0].next.Before(epoch.Add(2*time.Second)) { // empty while the loop dispatches
		s.idle.Wait()
	}
	s.mu.Unlock()
	fc.Advance(time.Second) // the 2s fire finds the 1s run going
	for len(rec.find("still going")) == 0 {
		runtime.Gosched()
	}
	if logs := rec.find("still going"); logs[0].attrs["task"] != "slow" {
		t.Fatalf("log %+v", logs[0])
	}
	close(release)
	step(t, fc, time.Second, time.Second, s)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2 (1s and 3s; 2s skipped)", n)
	}
}

func TestRunContext(t *testing.T) {
	s, fc, _, _ := newTest(t, true)
	got := make(chan Run, 1)
	var fromLocks locks.Lease
	mustAdd(t, s, NewTask(func(ctx context.Context) error {
		r, ok := RunFromContext(ctx)
		if !ok {
			return errors.New("no run in context")
		}
		fromLocks, _ = locks.FromContext(ctx)
		got <- r
		return nil
	}, Cron("@every 1s"), Lock("k"), Name("ctx")))
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)
	r := <-got
	if r.Task != "ctx" || !r.Fire.Equal(epoch.Add(time.Second)) || r.Node != "node-a" || r.Lease == nil {
		t.Fatalf("run %+v", r)
	}
	if fromLocks != r.Lease || r.Lease.Key() != "k" || r.Lease.Token() == 0 {
		t.Fatalf("lease in context %v, run lease %v", fromLocks, r.Lease)
	}
	if last := s.Tasks()[0].Last; last.Token != r.Lease.Token() || last.Node != "node-a" || last.Outcome != OutcomeOK {
		t.Fatalf("registry last run %+v", last)
	}
}

// blockUntilCancelled is a task that reports its context's end.
func blockUntilCancelled(started chan<- struct{}, ended chan<- error) func(context.Context) error {
	return func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return ctx.Err()
	}
}

func TestLeaseLossCancelsRun(t *testing.T) {
	s, fc, _, _ := newTest(t, true)
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	mustAdd(t, s, NewTask(blockUntilCancelled(started, ended), Cron("@every 1h"), Lock("k"), LockTTL(10*time.Second), Name("t")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Hour)
	<-started
	// The lease's expiry timer, the loop's timer: wait for both before
	// moving past the TTL.
	if err := fc.BlockUntilContext(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Second)
	if err := <-ended; !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("run context cause %v, want ErrLeaseLost", err)
	}
}

func TestMaxRunTime(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	mustAdd(t, s, NewTask(blockUntilCancelled(started, ended), Cron("@every 1h"), MaxRunTime(time.Minute), Name("block")))
	mustStart(t, s)
	waitIdle(t, s)
	fc.Advance(time.Hour)
	<-started
	if err := fc.BlockUntilContext(context.Background(), 2); err != nil { // deadline + loop
		t.Fatal(err)
	}
	fc.Advance(59 * time.Second)
	select {
	case err := <-ended:
		t.Fatalf("cancelled before MaxRunTime: %v", err)
	default:
	}
	fc.Advance(time.Second)
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cause %v, want a deadline", err)
	}
	// The task returned ctx.Err(): on a fake clock as on the real one, it is
	// the deadline, not a cancellation.
	waitIdle(t, s)
	if err := s.Tasks()[0].Last.Err; err != context.DeadlineExceeded {
		t.Errorf("ctx.Err() past MaxRunTime = %v, want context.DeadlineExceeded", err)
	}
}

func TestRenewKeepsLease(t *testing.T) {
	for _, renew := range []bool{true, false} {
		t.Run(fmt.Sprint("renew=", renew), func(t *testing.T) {
			fc := clockwork.NewFakeClockAt(epoch)
			d := locks.NewInProcessDriver(locks.WithClock(fc))
			renewed := make(chan struct{}, 1)
			s := New(Config{Clock: fc, Logger: slog.New(&logRecorder{}), Node: "node-a",
				Driver: extendSignal{d, renewed}})
			defer s.Stop(context.Background())
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			opts := []Option{Cron("@every 1h"), Lock("k"), LockTTL(9 * time.Second), Name("t")}
			if renew {
				opts = append(opts, Renew())
			}
			mustAdd(t, s, NewTask(blockUntilCancelled(started, ended), opts...))
			mustStart(t, s)
			waitIdle(t, s)
			fc.Advance(time.Hour)
			<-started
			waiters := 2 // the loop's timer and the lease's expiry
			if renew {
				waiters = 3 // and the renewal ticker
			}
			if err := fc.BlockUntilContext(context.Background(), waiters); err != nil {
				t.Fatal(err)
			}
			if !renew {
				fc.Advance(9 * time.Second)
				if err := <-ended; !errors.Is(err, locks.ErrLeaseLost) {
					t.Fatalf("run outlived its 9s lease without renewal: %v", err)
				}
				return
			}
			for range 10 {
				fc.Advance(3 * time.Second)
				<-renewed
				if _, err := d.Acquire(context.Background(), "k", time.Second); err == nil {
					t.Fatalf("lease lapsed at %v despite renewal", fc.Since(epoch))
				}
			}
			select {
			case err := <-ended:
				t.Fatalf("renewed run cancelled: %v", err)
			default:
			}
			cut, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Stop(cut); !errors.Is(err, ErrStopTimeout) {
				t.Fatalf("Stop with a run going and no time left: %v", err)
			}
			<-ended
		})
	}
}

func TestStopEndsLockWaits(t *testing.T) {
	s, fc, rec, d := newTest(t, true)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 10s"), Lock("k"), LockWait(time.Hour), Name("patient")))
	mustStart(t, s)
	other, err := d.Acquire(context.Background(), "k", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(context.Background())
	waitIdle(t, s)
	fc.Advance(10 * time.Second)
	if err := fc.BlockUntilContext(context.Background(), 3); err != nil { // loop, wait budget, poll step
		t.Fatal(err)
	}
	// Stop does not wait out the hour-long lock wait, and nothing runs.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if f.count() != 0 || len(rec.find("lock failed")) != 0 {
		t.Fatalf("runs %d, failure logs %v", f.count(), rec.find("lock failed"))
	}
}

func TestDaylightSavingOnTheFakeClock(t *testing.T) {
	paris := mustLoc(t, "Europe/Paris")
	for _, c := range []struct {
		name  string
		start time.Time
		want  time.Time
	}{
		{"fall back", time.Date(2026, 10, 25, 0, 0, 0, 0, paris), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)},   // 02:30 CEST, the first of two
		{"spring forward", time.Date(2026, 3, 29, 0, 0, 0, 0, paris), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)}, // 03:00 CEST, the end of the gap
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := clockwork.NewFakeClockAt(c.start)
			s := New(Config{Clock: fc, Location: paris, Logger: slog.New(&logRecorder{})})
			defer s.Stop(context.Background())
			var f fires
			mustAdd(t, s, NewTask(f.task, Cron("30 2 * * *")))
			mustStart(t, s)
			step(t, fc, 6*time.Hour, 10*time.Minute, s)
			got := f.list()
			if len(got) != 1 || !got[0].Equal(c.want) {
				t.Fatalf("fires %v, want exactly %v", got, c.want)
			}
		})
	}
}

func TestAddAfterStart(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var early, late fires
	mustAdd(t, s, NewTask(early.task, Cron("@every 1h"), Name("hourly")))
	mustStart(t, s)
	waitIdle(t, s)
	// The loop waits for the hourly fire; a task due sooner must wake it.
	mustAdd(t, s, NewTask(late.task, Cron("@every 1s"), Name("secondly")))
	step(t, fc, 2*time.Second, time.Second, s)
	if late.count() != 2 || early.count() != 0 {
		t.Fatalf("secondly ran %d times, hourly %d; want 2 and 0", late.count(), early.count())
	}
}

func TestLockedFireWithoutDriverNeverRuns(t *testing.T) {
	// Add refuses a locked task without a driver; this is the run-time
	// guard behind it, for a fire that reaches the runner anyway.
	s, _, rec, _ := newTest(t, false)
	var f fires
	e := &entry{flight: new(flight), fn: f.task, name: "guarded", cron: "@daily", spec: &Spec{Lock: "k", LockTTL: time.Minute},
		sched: gridSchedule{every: time.Hour}}
	s.takeoff(1)
	s.fire(firing{e: e, fire: epoch}, nil)
	if f.count() != 0 || e.busy.Load() {
		t.Fatalf("ran %d times; slot held %v", f.count(), e.busy.Load())
	}
	if e.hist == nil || e.hist.last.Outcome != OutcomeLockFailed || !errors.Is(e.hist.last.Err, ErrNoDriver) {
		t.Fatalf("history %+v", e.hist)
	}
	if logs := rec.find("lock failed"); len(logs) != 1 || logs[0].level != slog.LevelError || logs[0].attrs["task"] != "guarded" {
		t.Fatalf("logs %+v", logs)
	}
}

func TestFiresDueBeforeStartDoNotRun(t *testing.T) {
	s, fc, _, _ := newTest(t, false)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1m")))
	fc.Advance(90 * time.Second) // the 1m fire passes before Start
	mustStart(t, s)
	waitIdle(t, s)
	if f.count() != 0 {
		t.Fatalf("ran %v at Start", f.list())
	}
	step(t, fc, 30*time.Second, 30*time.Second, s)
	if got := f.list(); len(got) != 1 || !got[0].Equal(epoch.Add(2*time.Minute)) {
		t.Fatalf("fires %v, want only 2m", got)
	}
}

// extendSignal is a driver whose leases signal each successful Extend.
type extendSignal struct {
	*locks.InProcessDriver
	extended chan struct{}
}

func (d extendSignal) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l, err := d.InProcessDriver.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return signalLease{l, d.extended}, nil
}

// AcquireClaims goes through Acquire, whose leases signal.
func (d extendSignal) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	return inTwoSteps(ctx, d, fires)
}

type signalLease struct {
	locks.Lease
	extended chan struct{}
}

func (l signalLease) Extend(ctx context.Context, ttl time.Duration) error {
	err := l.Lease.Extend(ctx, ttl)
	if err == nil {
		l.extended <- struct{}{}
	}
	return err
}

// The registry keeps the last fire and the last run apart: a skip after a
// run changes the first, not the second.
func TestTasksSeparatesLastRunFromLastFire(t *testing.T) {
	s, fc, _, d := newTest(t, true)
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k"), Name("t")))
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)
	other, err := d.Acquire(context.Background(), "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(context.Background())
	step(t, fc, time.Second, time.Second, s)
	info := s.Tasks()[0]
	if info.Last.Outcome != OutcomeLockHeld || !info.Last.Fire.Equal(epoch.Add(2*time.Second)) {
		t.Errorf("last fire %+v, want the 2s fire skipped", info.Last)
	}
	if info.LastRan.Outcome != OutcomeOK || !info.LastRan.Fire.Equal(epoch.Add(time.Second)) || info.LastRan.Token == 0 {
		t.Errorf("last run %+v, want the 1s fire's run", info.LastRan)
	}
}

// Config.SkipLevel sets the level of the skip lines, which every losing node
// writes once per locked task and fire.
func TestSkipLevel(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	rec := &logRecorder{}
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	s := New(Config{Clock: fc, Logger: slog.New(rec), Driver: d, SkipLevel: slog.LevelDebug})
	defer s.Stop(context.Background())
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock("k"), Name("t")))
	other, err := d.Acquire(context.Background(), "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(context.Background())
	mustStart(t, s)
	step(t, fc, time.Second, time.Second, s)
	if logs := rec.find("lock 'k' is held"); len(logs) != 1 || logs[0].level != slog.LevelDebug {
		t.Fatalf("skip logs %+v, want one at Debug", logs)
	}
}

// The startup line names the zone of the cron expressions: its name, and
// for the local zone ("Local") its abbreviation and offset too.
func TestStartupLineNamesTheZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc  *time.Location
		want string
	}{
		{tokyo, "Asia/Tokyo"},
		{nil, zoneName(nil, epoch)},
	} {
		rec := &logRecorder{}
		s := New(Config{Clock: clockwork.NewFakeClockAt(epoch), Logger: slog.New(rec), Location: c.loc})
		mustStart(t, s)
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		lines := rec.find("scheduler started")
		if len(lines) != 1 || lines[0].attrs["zone"] != c.want {
			t.Fatalf("startup lines %+v, want one with zone %q", lines, c.want)
		}
	}
	abbr, _ := epoch.In(time.Local).Zone()
	if got := zoneName(nil, epoch); !strings.HasPrefix(got, "Local ("+abbr+", UTC") {
		t.Fatalf("zoneName(local) = %q, want Local, its abbreviation and offset", got)
	}
	if got := zoneName(time.FixedZone("", -(5*3600+30*60)), epoch); got != "UTC-05:30" {
		t.Fatalf("zoneName(fixed zone without a name) = %q, want its offset", got)
	}
}
