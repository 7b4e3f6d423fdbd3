package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// A fire skipped while its task was paused is claimed, so that a node that
// starts after the resume (a rolling deploy) does not catch it up: catch-up
// is for a fire that no node reached.
func TestPausedFireIsNotCaughtUp(t *testing.T) {
	c := newCluster(t)
	x := &exclusive{}
	ctx := context.Background()
	c.fc.Advance(50 * time.Minute)
	c.start(3, catchUpTask(x, 30*time.Minute))
	if err := c.nodes[0].Pause(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	c.step(15*time.Minute, time.Minute) // the 01:00 fire is skipped, paused
	if n := c.skips.count(OutcomePaused); n != 3 {
		t.Fatalf("%d fires skipped as paused, want the 01:00 fire on 3 nodes", n)
	}
	if err := c.nodes[1].Resume(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	c.stop()
	c.fc.Advance(5 * time.Minute)
	c.start(3, catchUpTask(x, 30*time.Minute)) // 01:10: the 01:00 fire is within the window
	c.step(time.Minute, time.Second)
	if fires := x.list(); len(fires) != 0 {
		t.Fatalf("runs %v, want none: the 01:00 fire was skipped while paused, not missed", fires)
	}
	// A node that tries while another holds the lock finds it held.
	if claimed, held := c.skips.count(OutcomeAlreadyRun), c.skips.count(OutcomeLockHeld); claimed < 1 || claimed+held != 3 {
		t.Errorf("%d catch-ups found the paused fire claimed and %d the lock held, want at least 1 claimed and 3 in all", claimed, held)
	}
}

// slowTake is a task state whose TakeRequest answers only when the test
// lets it, whatever its context says: a store whose reply comes late (a
// lost reply and a client's retry, a slow server).
type slowTake struct {
	*taskstate.InProcess
	entered chan struct{} // closed when TakeRequest is called
	release chan struct{} // closed by the test to let it answer
}

func (s *slowTake) TakeRequest(_ context.Context, task, node string) (time.Time, bool, error) {
	close(s.entered)
	<-s.release
	return s.InProcess.TakeRequest(context.Background(), task, node)
}

// A manual run whose request is taken after its lease ended is not run: the
// lease is checked before the run, as for a scheduled fire, and the taken
// request ends in the history with the lock failure, on the node that took
// it.
func TestManualRunNeverStartsOnAnEndedLease(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(0)
	store := &slowTake{InProcess: inner, entered: make(chan struct{}), release: make(chan struct{})}
	skips := &skipCounter{}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), State: store, Listeners: []Listener{skips},
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Node: "node-a"})
	var x exclusive
	mustAdd(t, s, NewTask(x.task, Cron("@daily"), Lock("k"), LockTTL(10*time.Second), Name("report")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	ctx := context.Background()
	if err := s.RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	<-store.entered
	fc.Advance(11 * time.Second) // past the lease, which the node still holds locally
	close(store.release)
	waitIdle(t, s)
	if n := x.count(); n != 0 {
		t.Fatalf("%d runs on a lease that ended while the request was taken, want none", n)
	}
	last := s.Tasks()[0].Last
	if last.Outcome != OutcomeLockFailed || !errors.Is(last.Err, locks.ErrLeaseLost) || !last.Manual {
		t.Errorf("last fire %+v, want a manual lock failure wrapping ErrLeaseLost", last)
	}
	runs, err := s.History(ctx, "report")
	if err != nil || len(runs) != 1 || !runs[0].Manual || runs[0].Outcome != string(OutcomeLockFailed) || runs[0].Node != "node-a" {
		t.Fatalf("History = %+v, %v; want the taken request recorded as a lock failure by node-a", runs, err)
	}
	if reqs, err := pending(ctx, inner); err != nil || len(reqs) != 0 {
		t.Errorf("pending requests %v, %v; want none: the request was taken", reqs, err)
	}
}

// stallKey is a driver whose Acquire of one key waits until the test lets
// it go: a slow lock step. It takes one fire per call (it is no
// locks.ClaimAcquirer; Unwrap gives its claims).
type stallKey struct {
	inner   *locks.InProcessDriver
	key     string
	entered chan struct{}
	release chan struct{}
}

func (d *stallKey) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if key == d.key {
		close(d.entered)
		<-d.release
	}
	return d.inner.Acquire(ctx, key, ttl)
}

func (d *stallKey) Unwrap() locks.Driver { return d.inner }

// Fires due together on different lock keys do not queue behind each
// other's lock steps, on a driver that takes one fire per call: only fires
// sharing a key take turns.
func TestFiresOnOtherKeysDoNotWaitForASlowLockStep(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &stallKey{inner: locks.NewInProcessDriver(locks.WithClock(fc)), key: "slow",
		entered: make(chan struct{}), release: make(chan struct{})}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), Driver: d})
	ran := make(chan string, 2)
	task := func(name string) func(context.Context) error {
		return func(context.Context) error { ran <- name; return nil }
	}
	mustAdd(t, s, NewTask(task("first"), Cron("@every 1m"), Lock("slow"), Name("first")),
		NewTask(task("second"), Cron("@every 1m"), Lock("fast"), Name("second")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	waitIdle(t, s)
	fc.Advance(time.Minute)
	<-d.entered
	select {
	case got := <-ran:
		if got != "second" {
			t.Fatalf("%s ran first, want second, whose key is free, while first's lock step stalls", got)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait for a race
		close(d.release)
		t.Fatal("second did not run while first's lock step stalled: it waited for first's turn")
	}
	close(d.release)
	if got := <-ran; got != "first" {
		t.Fatalf("then %s, want first", got)
	}
}

// batchCounter counts the fires of each AcquireClaims call.
type batchCounter struct {
	*locks.InProcessDriver
	mu    sync.Mutex
	calls [][]string // the lock keys of each call
}

func (d *batchCounter) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	keys := make([]string, len(fires))
	for i, f := range fires {
		keys[i] = f.Key
	}
	d.mu.Lock()
	d.calls = append(d.calls, keys)
	d.mu.Unlock()
	return d.InProcessDriver.AcquireClaims(ctx, fires)
}

// The locked fires of one instant on keys of their own make their lock
// steps in one driver call; fires sharing a key take turns in calls of
// their own, in registration order; unlocked tasks make none.
func TestFiresOfOneInstantTakeTheirLocksInOneCall(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &batchCounter{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(fc))}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), Driver: d})
	var ran atomic.Int32
	run := func(context.Context) error { ran.Add(1); return nil }
	const own = 50
	var tasks []Task
	for i := range own {
		tasks = append(tasks, NewTask(run, Cron("@every 1m"), Lock(fmt.Sprint("own-", i)), Name(fmt.Sprint("own-", i))))
	}
	tasks = append(tasks, NewTask(run, Cron("@every 1m"), Lock("shared"), Name("shared-1")),
		NewTask(run, Cron("@every 1m"), Lock("shared"), Name("shared-2")),
		NewTask(run, Cron("@every 1m"), Name("unlocked")))
	mustAdd(t, s, tasks...)
	mustStart(t, s)
	defer s.Stop(context.Background())
	waitIdle(t, s)
	fc.Advance(time.Minute)
	waitIdle(t, s)
	d.mu.Lock()
	defer d.mu.Unlock()
	var batches, shared []int
	for _, keys := range d.calls {
		if len(keys) == 1 && keys[0] == "shared" {
			shared = append(shared, 1)
			continue
		}
		batches = append(batches, len(keys))
	}
	if len(batches) != 1 || batches[0] != own || len(shared) != 2 {
		t.Fatalf("AcquireClaims calls %v: want one of the %d fires on keys of their own, and one for each fire on the shared key", d.calls, own)
	}
	// 50 own + the shared key's first (the second finds it held) + unlocked.
	if got := ran.Load(); got != own+2 {
		t.Fatalf("%d runs, want %d", got, own+2)
	}
	for _, info := range s.Tasks() {
		if info.Name == "shared-2" && info.Last.Outcome != OutcomeLockHeld {
			t.Fatalf("shared-2's fire: %+v, want it skipped on the key shared-1 holds", info.Last)
		}
	}
}

// startOrder is a driver whose lease of key "b" is slow to start its run:
// its first Done waits until the lease of "a" is released, or 100ms.
type startOrder struct {
	*locks.InProcessDriver
	aReleased chan struct{}
	early     atomic.Bool // "a" was released before "b" started
}

func (d *startOrder) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	out := d.InProcessDriver.AcquireClaims(ctx, fires)
	for i, f := range fires {
		switch {
		case out[i].Err != nil:
		case f.Key == "a":
			out[i].Lease = &releaseSignal{Lease: out[i].Lease, released: d.aReleased}
		case f.Key == "b":
			out[i].Lease = &slowStart{Lease: out[i].Lease, d: d}
		}
	}
	return out
}

type releaseSignal struct {
	locks.Lease
	released chan struct{}
}

func (l *releaseSignal) Release(ctx context.Context) error {
	close(l.released)
	return l.Lease.Release(ctx)
}

type slowStart struct {
	locks.Lease
	d    *startOrder
	once sync.Once
}

func (l *slowStart) Done() <-chan struct{} {
	l.once.Do(func() {
		select {
		case <-l.d.aReleased:
			l.d.early.Store(true)
		case <-time.After(100 * time.Millisecond): // time for a release that would come early to come
		}
	})
	return l.Lease.Done()
}

// A run of a lock batch releases its lease only once the other runs of the
// batch have started: "a" returns at once, "b" is slow to start, and "a"'s
// lease is released after "b" started, not before.
func TestBatchReleasesAfterItsRunsStart(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &startOrder{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(fc)), aReleased: make(chan struct{})}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), Driver: d})
	var ran atomic.Int32
	run := func(context.Context) error { ran.Add(1); return nil }
	mustAdd(t, s, NewTask(run, Cron("@every 1m"), Lock("a"), Name("a")), NewTask(run, Cron("@every 1m"), Lock("b"), Name("b")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	waitIdle(t, s)
	fc.Advance(time.Minute)
	waitIdle(t, s)
	if ran.Load() != 2 {
		t.Fatalf("%d runs, want 2", ran.Load())
	}
	if d.early.Load() {
		t.Fatal(`"a" released its lease before "b", of the same batch, started its run`)
	}
	select {
	case <-d.aReleased:
	default:
		t.Fatal(`"a" never released its lease`)
	}
}

// A fire of a lock batch that waits for its lock (LockWait) does not hold
// up the release of the others' leases: "a" is released while "b" still
// waits for the key another holder keeps.
func TestBatchReleaseDoesNotWaitForALockWait(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &startOrder{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(fc)), aReleased: make(chan struct{})}
	if _, err := d.InProcessDriver.Acquire(context.Background(), "b", 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Clock: fc, Logger: slog.New(slog.DiscardHandler), Driver: d})
	run := func(context.Context) error { return nil }
	mustAdd(t, s, NewTask(run, Cron("@every 1h"), Lock("a"), Name("a")),
		NewTask(run, Cron("@every 1h"), Lock("b"), LockWait(30*time.Minute), Name("b")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	waitIdle(t, s)
	fc.Advance(time.Hour)
	select {
	case <-d.aReleased:
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait for a race
		t.Fatal(`"a" kept its lease while "b", of the same batch, waited for its lock`)
	}
}
