// Package fakenode starts a real scheduler for the tests of the packages
// that show what one does (admin and its console, metrics, the ndigo CLI):
// one node on a fake clock, with the in-process lock driver and task state
// store, its logs discarded, stopped when the test ends. It gives the task
// functions their scenarios share, a run that fails ([FailFirst]) and one
// that blocks until the test lets it go ([Node.BlockFirst]), and a step that
// moves the clock a second at a time and settles the scheduler each second,
// also while runs block ([Node.StepTo], on schedulingtest.StepBlocked).
package fakenode

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

// stepTimeout bounds one StepTo on the real clock: a scheduler that does
// not settle fails the test rather than hang it.
const stepTimeout = time.Minute

// A Node is one scheduler on a fake clock. Make it with [New], give it its
// tasks and start it with [Node.Start].
type Node struct {
	S     *scheduling.Scheduler
	Clock *clockwork.FakeClock
	// Gate holds the runs of BlockFirst's functions, and of any task
	// function that waits at it, until the test opens it; StepTo settles
	// with the runs it holds. It opens as the test ends, before the
	// scheduler stops (Stop waits for the runs in flight).
	Gate  schedulingtest.Gate
	start time.Time
}

// New returns a scheduler, not started, on fc, whose start is fc's now.
// cfg's Clock is fc; where nil, its Driver is the in-process lock driver on
// fc, its State an in-process task state store (of the default history
// length) and its Logger discards. A Driver of the test's own (one wrapped
// to count its calls) must be on fc.
func New(t testing.TB, fc *clockwork.FakeClock, cfg scheduling.Config) *Node {
	t.Helper()
	cfg.Clock = fc
	if cfg.Driver == nil {
		cfg.Driver = locks.NewInProcessDriver(locks.WithClock(fc))
	}
	if cfg.State == nil {
		store, err := taskstate.NewInProcess(0)
		if err != nil {
			t.Fatal(err)
		}
		cfg.State = store
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Node{S: scheduling.New(cfg), Clock: fc, start: fc.Now()}
}

// Start adds tasks and starts the scheduler; the test's cleanup opens
// n.Gate, then stops the scheduler, failing the test if Stop fails. A
// test may stop it itself before (to read what it flushed on its way).
func (n *Node) Start(t testing.TB, tasks ...scheduling.Task) {
	t.Helper()
	if err := n.S.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	if err := n.S.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.S.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(n.Gate.Open) // first
}

// StepTo advances the clock to n's start plus to, a second at a time (the
// scheduler looks for requests and pending runs, retries and waiting
// fires, every second), and settles the scheduler after each second: every
// fire, poll and record the second started has ended, but for the runs
// that n.Gate holds (schedulingtest.StepBlocked). A clock at or past it
// stays; the scheduler settles.
func (n *Node) StepTo(t testing.TB, to time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	d := max(n.start.Add(to).Sub(n.Clock.Now()), 0)
	if err := schedulingtest.StepBlocked(ctx, n.Clock, d, time.Second, n.Gate.Blocked, n.S); err != nil {
		t.Fatalf("stepping to %v: %v", n.start.Add(to).UTC(), err)
	}
}

// BlockFirst returns a task function whose first run waits at n.Gate,
// until the test opens it or the run's context ends, and returns what
// [schedulingtest.Gate.Wait] returned; every other run returns nil at once.
func (n *Node) BlockFirst() func(context.Context) error {
	var runs atomic.Int32
	return func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			return n.Gate.Wait(ctx)
		}
		return nil
	}
}

// FailFirst returns a task function whose first run returns err and every
// other nil.
func FailFirst(err error) func(context.Context) error {
	var runs atomic.Int32
	return func(context.Context) error {
		if runs.Add(1) == 1 {
			return err
		}
		return nil
	}
}

// A Backfilling is the scenario of the backfill tests: a started node
// "node-a" on a fake clock at epoch whose task "report" (hourly, on lock
// report, a lock TTL of an hour) blocks its first run at the Gate, and
// whose task "plain" has no lock, which a backfill needs. The history of
// report holds node-b's run of Instants[0], which a backfill refuses as
// already run.
type Backfilling struct {
	*Node
	Store    *taskstate.InProcess
	Instants []time.Time // the 10 hours before epoch, oldest first
}

// StartBackfilling starts a Backfilling.
func StartBackfilling(t testing.TB, epoch time.Time) *Backfilling {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store})
	n.Start(t,
		scheduling.NewTask(n.BlockFirst(), scheduling.Cron("0 * * * *"), scheduling.Lock("report"), scheduling.LockTTL(time.Hour),
			scheduling.Name("report")),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@yearly"), scheduling.Name("plain")),
	)
	b := &Backfilling{Node: n, Store: store}
	for i := range 10 {
		b.Instants = append(b.Instants, epoch.Add(time.Duration(i-10)*time.Hour))
	}
	ran := taskstate.Run{Fire: b.Instants[0], Node: "node-b", Token: 1, Start: b.Instants[0], Outcome: "ok"}
	if err := store.Record(context.Background(), taskstate.TaskRun{Task: "report", Run: ran}); err != nil {
		t.Fatal(err)
	}
	return b
}
