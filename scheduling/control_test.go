package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// cluster is n schedulers on one fake clock, sharing one lock driver and one
// task state store, as the nodes of a cluster share Redis.
type cluster struct {
	t      *testing.T
	fc     *clockwork.FakeClock
	driver *locks.InProcessDriver
	store  *taskstate.InProcess
	logs   *logRecorder
	skips  *skipCounter
	nodes  []*Scheduler
}

func newCluster(t *testing.T) *cluster {
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, fc: fc, driver: locks.NewInProcessDriver(locks.WithClock(fc)), store: store,
		logs: &logRecorder{}, skips: &skipCounter{}}
}

// start starts n nodes running tasks, stopped at cleanup.
func (c *cluster) start(n int, tasks func() []Task) {
	c.t.Helper()
	c.nodes = nil
	for i := range n {
		s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: fmt.Sprintf("node-%d", i),
			State: c.store, Listeners: []Listener{c.skips}})
		mustAdd(c.t, s, tasks()...)
		mustStart(c.t, s)
		c.t.Cleanup(func() {
			// Bounded, so that a test failing with a run blocked fails
			// instead of hanging: Stop cancels the runs at its deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx)
		})
		c.nodes = append(c.nodes, s)
	}
}

func (c *cluster) stop() {
	c.t.Helper()
	for _, s := range c.nodes {
		if err := s.Stop(context.Background()); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cluster) step(d, inc time.Duration) { c.t.Helper(); step(c.t, c.fc, d, inc, c.nodes...) }

// pending returns st's pending requests, from Poll.
func pending(ctx context.Context, st taskstate.Store) (map[string]time.Time, error) {
	p, err := st.Poll(ctx)
	return p.Requests, err
}

// skipCounter counts skips by outcome, and the scheduled fires skipped by
// outcome.
type skipCounter struct {
	NopListener
	mu    sync.Mutex
	n     map[Outcome]int
	fires map[Outcome]map[time.Time]bool
}

func (k *skipCounter) Skipped(e Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n, k.fires = map[Outcome]int{}, map[Outcome]map[time.Time]bool{}
	}
	k.n[e.Outcome]++
	if !e.Manual {
		if k.fires[e.Outcome] == nil {
			k.fires[e.Outcome] = map[time.Time]bool{}
		}
		k.fires[e.Outcome][e.Fire] = true
	}
}

// skippedFires returns the scheduled fires that some node skipped with o.
func (k *skipCounter) skippedFires(o Outcome) map[time.Time]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.fires[o])
}

func (k *skipCounter) count(o Outcome) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n[o]
}

// exclusive records runs and the most that overlapped.
type exclusive struct {
	fires
	in, most atomic.Int32
}

func (x *exclusive) task(ctx context.Context) error {
	n := x.in.Add(1)
	defer x.in.Add(-1)
	for m := x.most.Load(); n > m && !x.most.CompareAndSwap(m, n); m = x.most.Load() {
	}
	return x.fires.task(ctx)
}

func (x *exclusive) manual() (n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.runs {
		if r.Manual {
			n++
		}
	}
	return n
}

func TestPauseSkipsOnEveryNodeUntilResume(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(3, func() []Task { return []Task{NewTask(x.task, Cron("@every 1m"), Lock("k"), Name("report"))} })
	ctx := context.Background()
	c.step(3*time.Minute, time.Second)
	if n := x.count(); n != 3 {
		t.Fatalf("%d runs in 3 minutes before the pause, want 3", n)
	}
	pausedAt := c.fc.Now()
	if err := c.nodes[0].Pause(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Minute, time.Second)
	if n := x.count(); n != 3 {
		t.Fatalf("%d runs after 3 paused minutes, want still 3", n)
	}
	if n := c.skips.count(OutcomePaused); n != 9 {
		t.Errorf("%d fires skipped as paused, want 9: 3 fires on each of 3 nodes", n)
	}
	if n := len(c.logs.find("task paused; fire skipped")); n != 3 {
		t.Errorf("%d 'task paused' lines, want 3: one per node for the 9 paused fires", n)
	}
	infos, err := c.nodes[2].ClusterTasks(ctx)
	if err != nil || !infos[0].Paused || infos[0].Last.Outcome != OutcomePaused || infos[0].ClusterLast == nil ||
		!infos[0].ClusterLast.Fire.Equal(epoch.Add(6*time.Minute)) || infos[0].ClusterLast.Outcome != string(OutcomePaused) {
		t.Fatalf("node-2 ClusterTasks = %+v, %v; want paused, its last fire skipped as paused, and the cluster's last fire the paused one at 00:06", infos, err)
	}
	if want := (taskstate.Pause{Paused: true, At: pausedAt.UTC()}); infos[0].PauseNote != want {
		t.Fatalf("node-2 ClusterTasks PauseNote = %+v; want %+v: the pause, when node-0 made it", infos[0].PauseNote, want)
	}
	// Each paused fire is in the shared history once, recorded by the node
	// that claimed it, not once per node.
	runs, err := c.nodes[0].History(ctx, "report")
	if err != nil || len(runs) != 6 {
		t.Fatalf("History = %+v, %v; want 6 records: 3 runs, 3 paused fires", runs, err)
	}
	for i, r := range runs[:3] {
		if want := epoch.Add(time.Duration(6-i) * time.Minute); r.Outcome != string(OutcomePaused) || !r.Fire.Equal(want) || r.Node == "" {
			t.Errorf("record %d = %+v, want the paused fire at %v, with the node that claimed it", i, r, want)
		}
	}
	resumedAt := c.fc.Now()
	if err := c.nodes[1].Resume(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	infos, err = c.nodes[2].ClusterTasks(ctx)
	if want := (taskstate.Pause{At: resumedAt.UTC()}); err != nil || infos[0].Paused || infos[0].PauseNote != want {
		t.Fatalf("node-2 ClusterTasks after the resume = %+v, %v; want not paused, PauseNote %+v: the resume, when node-1 made it", infos, err, want)
	}
	c.step(time.Minute, time.Second)
	if n := x.count(); n != 4 {
		t.Fatalf("%d runs after resuming, want 4: the next fire runs", n)
	}
	runs, err = c.nodes[2].History(ctx, "report")
	if err != nil || len(runs) != 7 {
		t.Fatalf("History = %d records, %v; want the 4 runs of every node and the 3 paused fires", len(runs), err)
	}
	if want := epoch.Add(7 * time.Minute); !runs[0].Fire.Equal(want) || runs[0].Outcome != "ok" || runs[0].Token == 0 || runs[0].Manual {
		t.Errorf("newest run %+v, want the scheduled fire at %v, ok, with a token", runs[0], want)
	}
	if m := x.most.Load(); m != 1 {
		t.Errorf("%d runs overlapped, want 1", m)
	}
	// A second pause logs again, once per node.
	if err := c.nodes[2].Pause(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Minute, time.Second)
	if n := len(c.logs.find("task paused; fire skipped")); n != 6 {
		t.Errorf("%d 'task paused' lines after a second pause, want 6: one more per node", n)
	}
}

func TestRunNowRunsOnceInTheCluster(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(3, func() []Task { return []Task{NewTask(x.task, Cron("@daily"), Lock("k"), Name("report"))} })
	ctx := context.Background()
	c.step(5*time.Second, time.Second)
	requested := c.fc.Now()
	if err := c.nodes[1].RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Second, time.Second)
	if n := x.manual(); n != 1 {
		t.Fatalf("%d manual runs, want 1", n)
	}
	x.mu.Lock()
	r := x.runs[0]
	x.mu.Unlock()
	if !r.Manual || !r.Fire.Equal(requested) || r.Lease == nil || r.Lease.Token() == 0 {
		t.Errorf("run %+v, want a manual run of the request's instant %v under a lease", r, requested)
	}
	runs, err := c.nodes[0].History(ctx, "report")
	if err != nil || len(runs) != 1 || !runs[0].Manual || runs[0].Token != r.Lease.Token() {
		t.Errorf("History = %+v, %v; want the one manual run with its token", runs, err)
	}

	// Two requests at once, on two nodes: the asked nodes look at once, so
	// the first may be run before the second is made (two runs, one after
	// the other), or both merge into one; never two runs side by side.
	var wg sync.WaitGroup
	for _, s := range []*Scheduler{c.nodes[0], c.nodes[2]} {
		wg.Go(func() {
			if err := s.RunNow(ctx, "report"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	c.step(3*time.Second, time.Second)
	if n := x.manual(); n != 2 && n != 3 {
		t.Fatalf("%d manual runs after one request and two simultaneous ones, want 2 or 3", n)
	}
	if m := x.most.Load(); m != 1 {
		t.Errorf("%d runs overlapped, want 1", m)
	}
	if reqs, _ := pending(ctx, c.store); len(reqs) != 0 {
		t.Errorf("requests %v left pending", reqs)
	}
}

// A request made while a run holds the lock waits for it: no node runs the
// task beside it, and the request runs once the lock is free.
func TestRunNowWaitsForTheRunningFire(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	release := make(chan struct{})
	started := make(chan string, 1) // the node running the first request
	blocking := func(ctx context.Context) error {
		if r, _ := RunFromContext(ctx); r.Manual && x.manual() == 0 {
			started <- r.Node
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return x.task(ctx)
	}
	c.start(3, func() []Task { return []Task{NewTask(blocking, Cron("@daily"), Lock("k"), Name("report"))} })
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the nodes stop, so that a failed test does not hang
	ctx := context.Background()
	if err := c.nodes[0].RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	runner := <-started
	// Two more requests while the first run holds the lock merge into one.
	if err := c.nodes[1].RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[2].RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	// The other nodes look (the asked ones at once, all of them every
	// second), find the lock held, and leave the request.
	var idle []*Scheduler
	for i, s := range c.nodes {
		if fmt.Sprintf("node-%d", i) != runner {
			idle = append(idle, s)
		}
	}
	for range 3 {
		for _, s := range idle {
			waitIdle(t, s)
		}
		c.fc.Advance(time.Second)
	}
	for _, s := range idle {
		waitIdle(t, s)
		if s.Tasks()[0].Running {
			t.Fatalf("a node other than the runner %s runs the task", runner)
		}
	}
	if reqs, _ := pending(ctx, c.store); reqs["report"].IsZero() {
		t.Fatalf("the second request was taken while the first run held the lock")
	}
	unblock()
	c.step(3*time.Second, time.Second)
	if n := x.manual(); n != 2 {
		t.Fatalf("%d manual runs for a request and two merged ones, want 2", n)
	}
	if m := x.most.Load(); m != 1 {
		t.Fatalf("%d runs overlapped, want 1", m)
	}
}

func TestRunNowRunsAPausedTask(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(2, func() []Task { return []Task{NewTask(x.task, Cron("@every 1m"), Lock("k"), Name("report"))} })
	ctx := context.Background()
	if err := c.nodes[0].Pause(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[1].RunNow(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Minute, time.Second)
	if n, m := x.count(), x.manual(); n != 1 || m != 1 {
		t.Fatalf("%d runs (%d manual) of a paused task over 2 minutes with one request, want the manual one only", n, m)
	}
}

// An unlocked task's request runs on the node that takes it from the store.
func TestRunNowUnlocked(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(3, func() []Task { return []Task{NewTask(x.task, Cron("@daily"), Name("report"))} })
	if err := c.nodes[2].RunNow(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Second, time.Second)
	if n := x.manual(); n != 1 {
		t.Fatalf("%d manual runs of an unlocked task on 3 nodes, want 1", n)
	}
}

func TestControlErrors(t *testing.T) {
	c := newCluster(t)
	c.start(1, func() []Task {
		return []Task{NewTask(func(context.Context) error { return nil }, Cron("@daily"), Name("report"))}
	})
	ctx := context.Background()
	s := c.nodes[0]
	for op, err := range map[string]error{
		"Pause":   s.Pause(ctx, "nope"),
		"Resume":  s.Resume(ctx, "nope"),
		"RunNow":  s.RunNow(ctx, "nope"),
		"History": func() error { _, err := s.History(ctx, "nope"); return err }(),
	} {
		if !errors.Is(err, ErrUnknownTask) || !containsAll(err.Error(), `"nope"`) {
			t.Errorf("%s of an unknown task: err = %v, want ErrUnknownTask naming it", op, err)
		}
	}
	bare, _, _, _ := newTest(t, false)
	mustAdd(t, bare, NewTask(func(context.Context) error { return nil }, Cron("@daily"), Name("report")))
	if err := bare.Pause(ctx, "report"); !errors.Is(err, ErrNoState) {
		t.Errorf("Pause without a store: err = %v, want ErrNoState", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestControlRandomHistories runs seeded random histories of pauses,
// resumes, manual requests (one or two at once, from random nodes) and
// steps on 3 nodes, and checks: no two runs overlap; no scheduled fire runs
// twice; no scheduled fire runs while the task is paused, and every other
// one runs unless a manual run held the lock at its instant; every request
// is served, by one run per batch of requests made while none was pending.
func TestControlRandomHistories(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomControlHistory(t, seed) })
	}
}

func randomControlHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newCluster(t)
	var x exclusive
	c.start(3, func() []Task {
		return []Task{NewTask(x.task, Cron("@every 1m"), Lock("k"), LockTTL(30*time.Second), Name("report"))}
	})
	ctx := context.Background()
	paused := false
	pausedFires := map[time.Time]bool{}
	batches, requests := 0, 0
	tick := func() {
		c.step(time.Second, time.Second)
		if now := c.fc.Now(); paused && now.Truncate(time.Minute).Equal(now) {
			pausedFires[now] = true
		}
	}
	for range 40 {
		node := c.nodes[rng.IntN(3)]
		switch op := rng.IntN(10); {
		case op < 2:
			paused = !paused
			var err error
			if paused {
				err = node.Pause(ctx, "report")
			} else {
				err = node.Resume(ctx, "report")
			}
			if err != nil {
				t.Fatal(err)
			}
		case op < 5:
			if reqs, _ := pending(ctx, c.store); reqs["report"].IsZero() {
				batches++
			}
			var wg sync.WaitGroup
			n := 1 + rng.IntN(2)
			requests += n
			for range n {
				s := c.nodes[rng.IntN(3)]
				wg.Go(func() {
					if err := s.RunNow(ctx, "report"); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		for range 1 + rng.IntN(90) {
			tick()
		}
	}
	for range 5 { // the last requests
		tick()
	}
	if m := x.most.Load(); m != 1 {
		t.Fatalf("seed %d: %d runs overlapped, want 1", seed, m)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	scheduled := map[time.Time]int{}
	manual := 0
	for _, r := range x.runs {
		if r.Manual {
			manual++
			continue
		}
		scheduled[r.Fire]++
		if pausedFires[r.Fire] {
			t.Errorf("seed %d: fire %v ran while the task was paused", seed, r.Fire)
		}
	}
	for f, n := range scheduled {
		if n != 1 {
			t.Errorf("seed %d: fire %v ran %d times", seed, f, n)
		}
	}
	// Requests made together merge, unless a node took the first before the
	// second was made: one run per batch at least, one per request at most.
	if manual < batches || manual > requests {
		t.Errorf("seed %d: %d manual runs for %d batches of %d requests", seed, manual, batches, requests)
	}
	if reqs, _ := pending(ctx, c.store); len(reqs) != 0 {
		t.Errorf("seed %d: requests %v still pending at the end", seed, reqs)
	}
	// A fire whose lock a manual run held is skipped: lock held on the
	// nodes that do not run it, busy on the one that does.
	held := 0
	for f := range c.skips.skippedFires(OutcomeLockHeld) {
		if scheduled[f] == 0 && !pausedFires[f] {
			held++
		}
	}
	if len(scheduled)+len(pausedFires)+held < int(c.fc.Since(epoch)/time.Minute) {
		t.Errorf("seed %d: %d fires ran, %d paused, %d lost to a manual run's lock, of %d: some fire was lost",
			seed, len(scheduled), len(pausedFires), held, int(c.fc.Since(epoch)/time.Minute))
	}
}

// The node asked runs the request at once, without waiting for its next
// look at the store.
func TestRunNowOnTheAskedNodeStartsAtOnce(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(1, func() []Task { return []Task{NewTask(x.task, Cron("@daily"), Lock("k"), Name("report"))} })
	c.step(time.Second, time.Second)
	if err := c.nodes[0].RunNow(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c.nodes[0])
	if n := x.manual(); n != 1 {
		t.Fatalf("%d manual runs with the clock still, want 1", n)
	}
}

// downStore is a task state whose backend fails every call.
type downStore struct{ taskstate.Store }

var errStoreDown = errors.New("store down")

func (downStore) Paused(context.Context, string) (taskstate.Pause, error) {
	return taskstate.Pause{}, errStoreDown
}
func (downStore) Poll(context.Context) (taskstate.Poll, error) { return taskstate.Poll{}, errStoreDown }

// A fire whose node cannot read the paused flag is not run: it fails as a
// lock failure, naming the store's error.
func TestUnreadablePauseFailsTheFire(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	store, _ := taskstate.NewInProcess(0)
	skips := &skipCounter{}
	logs := &logRecorder{}
	s := New(Config{Clock: fc, Logger: slog.New(logs), State: downStore{store}, Listeners: []Listener{skips},
		Driver: locks.NewInProcessDriver(locks.WithClock(fc))})
	var x exclusive
	mustAdd(t, s, NewTask(x.task, Cron("@every 1m"), Lock("k"), Name("report")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, fc, 2*time.Minute, time.Second, s)
	if n := x.count(); n != 0 {
		t.Fatalf("%d runs with the paused flag unreadable, want none", n)
	}
	if n := skips.count(OutcomeLockFailed); n != 2 {
		t.Errorf("%d fires failed, want 2", n)
	}
	if last := s.Tasks()[0].Last; !errors.Is(last.Err, errStoreDown) {
		t.Errorf("last fire's error %v, want the store's", last.Err)
	}
	if len(logs.find("reading manual-run requests failed")) == 0 {
		t.Error("the failing look for requests was not logged")
	}
}

func TestFailingRequestLookIsLoggedOnce(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	store, _ := taskstate.NewInProcess(0)
	logs := &logRecorder{}
	s := New(Config{Clock: fc, Logger: slog.New(logs), State: downStore{store}})
	mustAdd(t, s, NewTask(func(context.Context) error { return nil }, Cron("@daily"), Name("report")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, fc, 5*time.Second, time.Second, s)
	if n := len(logs.find("reading manual-run requests failed")); n != 1 {
		t.Errorf("%d lines about 6 failed looks, want 1", n)
	}
}

// pauseReads counts a node's Paused reads, and can fail its polls.
type pauseReads struct {
	taskstate.Store
	reads    atomic.Int32
	pollDown atomic.Bool
}

func (p *pauseReads) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	p.reads.Add(1)
	return p.Store.Paused(ctx, task)
}

func (p *pauseReads) Poll(ctx context.Context) (taskstate.Poll, error) {
	if p.pollDown.Load() {
		return taskstate.Poll{}, errStoreDown
	}
	return p.Store.Poll(ctx)
}

// A node reads a task's paused flag once, not at every fire, until a pause
// or resume anywhere moves the store's pause generation on: the other node
// then skips from its next poll. While its polls fail, a node reads the
// flag at every fire again (and would fail the fire if the read failed).
func TestPausedFlagReadOncePerGeneration(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(0)
	driver := locks.NewInProcessDriver(locks.WithClock(fc))
	var x exclusive
	stores := []*pauseReads{{Store: inner}, {Store: inner}}
	var nodes []*Scheduler
	for i, st := range stores {
		s := New(Config{Driver: driver, Clock: fc, Logger: slog.New(&logRecorder{}), Node: fmt.Sprintf("node-%d", i), State: st})
		mustAdd(t, s, NewTask(x.task, Cron("@every 1s"), Lock("k"), Name("report")))
		mustStart(t, s)
		defer s.Stop(context.Background())
		nodes = append(nodes, s)
	}
	reads := func() (int32, int32) { return stores[0].reads.Load(), stores[1].reads.Load() }
	step(t, fc, 10*time.Second, time.Second, nodes...)
	if a, b := reads(); a > 1 || b > 1 || x.count() != 10 {
		t.Fatalf("%d and %d reads of the paused flag for %d fires, want 10 fires and one read per node", a, b, x.count())
	}
	if err := nodes[0].Pause(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	pausedAt := fc.Now()
	step(t, fc, 5*time.Second, time.Second, nodes...)
	for _, f := range x.list() {
		if f.After(pausedAt.Add(DefaultRequestPoll)) {
			t.Fatalf("fire %v ran %v after the pause: the other node should know from its next poll", f, f.Sub(pausedAt))
		}
	}
	a0, b0 := reads()
	if a0 > 3 || b0 > 3 {
		t.Fatalf("%d and %d reads of the paused flag after one pause, want at most one more per node (and one per node after its poll)", a0, b0)
	}
	// A flag older than PauseFlagAge is read again, generation or not (a
	// SetPaused by a node of an earlier version moves none).
	step(t, fc, PauseFlagAge+time.Second, time.Second, nodes...)
	a1, b1 := reads()
	if a1 == a0 || b1 == b0 || a1 > a0+2 || b1 > b0+2 {
		t.Fatalf("reads moved from %d, %d to %d, %d over %v; want one or two more per node (PauseFlagAge)", a0, b0, a1, b1, PauseFlagAge+time.Second)
	}
	a0, b0 = a1, b1
	stores[1].pollDown.Store(true)
	step(t, fc, 5*time.Second, time.Second, nodes...)
	if a, b := reads(); a != a0 || b < b0+4 {
		t.Fatalf("reads moved from %d, %d to %d, %d over 5 fires with node-1's polls failing; want node-0's unchanged and node-1 reading at every fire", a0, b0, a, b)
	}
}
