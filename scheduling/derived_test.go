package scheduling_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// derivedCluster is three spreading nodes in a synctest bubble, whose
// clock the real clock reads, on one in-process driver and task state
// store: a node killed fails every call from then on, as a dead process
// makes none. The tests of what the scheduler derives from its task set
// (the heartbeat, the membership's life, the lock batch's bounds) run on
// it.
type derivedCluster struct {
	t     *testing.T
	drv   *schedulingtest.Driver
	store *taskstate.InProcess
	nodes map[string]*scheduling.Scheduler
	recs  map[string]*schedulingtest.Recorder

	mu    sync.Mutex // protects the fields below
	dead  map[string]bool
	beats []schedulingtest.Result // the heartbeats answered, in order
}

func newDerivedCluster(t *testing.T, tasks func() []scheduling.Task) *derivedCluster {
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	c := &derivedCluster{t: t, store: store, nodes: map[string]*scheduling.Scheduler{},
		recs: map[string]*schedulingtest.Recorder{}, dead: map[string]bool{}}
	c.drv = schedulingtest.NewDriver(locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock())))
	c.drv.SetFaults(func(call schedulingtest.Call) schedulingtest.Fault {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.dead[call.Node] {
			return schedulingtest.Fault{Err: errors.New("node is dead")}
		}
		return schedulingtest.Fault{}
	})
	c.drv.Observe(func(r schedulingtest.Result) {
		if r.Op == schedulingtest.OpBeat && r.Err == nil {
			c.mu.Lock()
			c.beats = append(c.beats, r)
			c.mu.Unlock()
		}
	})
	time.Sleep(500 * time.Millisecond) // the nodes' heartbeats half-way between fires
	for i := range 3 {
		name := fmt.Sprint("n", i)
		rec := &schedulingtest.Recorder{}
		s := scheduling.New(scheduling.Config{Driver: c.drv.Node(name, nil), Node: name, Spread: true, State: store,
			Location: time.UTC, Listeners: []scheduling.Listener{rec}, Logger: slog.New(slog.DiscardHandler)})
		if err := s.Handle("tick", func(context.Context, json.RawMessage) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(tasks()...); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		c.nodes[name], c.recs[name] = s, rec
	}
	return c
}

// kill makes name's calls fail and stops it, as a node that dies: it
// leaves no group, and its membership lapses.
func (c *derivedCluster) kill(name string) {
	c.mu.Lock()
	c.dead[name] = true
	c.mu.Unlock()
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.nodes[name].Stop(cut)
	delete(c.nodes, name)
}

func (c *derivedCluster) stopAll() {
	for name, s := range c.nodes {
		if err := s.Stop(context.Background()); err != nil {
			c.t.Errorf("Stop %s: %v", name, err)
		}
	}
	synctest.Wait()
	var rs []*schedulingtest.Recorder
	for _, r := range c.recs {
		rs = append(rs, r)
	}
	if err := schedulingtest.AtMostOnce(rs...); err != nil {
		c.t.Error(err)
	}
}

// lastRunBy returns the node that ran task's latest run.
func (c *derivedCluster) lastRunBy(task string) string {
	var by string
	var last time.Time
	for name, r := range c.recs {
		for _, e := range r.Started() {
			if e.Task == task && e.Fire.After(last) {
				by, last = name, e.Fire
			}
		}
	}
	return by
}

// firstRunAfter returns when task's first run that started after at
// started, zero if none did.
func (c *derivedCluster) firstRunAfter(task string, at time.Time) time.Time {
	var first time.Time
	for _, r := range c.recs {
		for _, e := range r.Started() {
			if e.Task == task && e.Start.After(at) && (first.IsZero() || e.Start.Before(first)) {
				first = e.Start
			}
		}
	}
	return first
}

// beatTTLs returns the distinct membership TTLs that the heartbeats
// answered from the since-th on asked for.
func (c *derivedCluster) beatTTLs(since int) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ttls []time.Duration
	for _, b := range c.beats[since:] {
		if !slices.Contains(ttls, b.TTL) {
			ttls = append(ttls, b.TTL)
		}
	}
	return ttls
}

func (c *derivedCluster) beatCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.beats)
}

// failoverBound is how soon after its owner's death a task locked with
// ttl and fired every period runs on another node (docs/GUARANTEES.md G9):
// within one lock TTL plus one period, or 400ms plus a period for lock TTLs
// under 400ms (the heartbeat is then MinAutoHeartbeat, and four of them
// pass before the others see the owner gone).
func failoverBound(ttl, period time.Duration) time.Duration {
	return max(ttl, 4*scheduling.MinAutoHeartbeat) + period
}

// killPhases are the points of a second (of the task's period) at which
// the tests kill its owner: just after a fire, before the 1s heartbeats (at
// .5), and after them.
var killPhases = []time.Duration{100 * time.Millisecond, 350 * time.Millisecond, 800 * time.Millisecond}

// checkFailover kills the owner of task, locked with ttl and fired every
// second, at phase into a second, and checks that another node runs it
// within the documented bound.
func (c *derivedCluster) checkFailover(task string, ttl, phase time.Duration) {
	c.t.Helper()
	owner := c.lastRunBy(task)
	if owner == "" {
		c.t.Fatalf("%s never ran", task)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + phase)))
	killed := time.Now()
	c.kill(owner)
	time.Sleep(5 * time.Second)
	bound := failoverBound(ttl, time.Second)
	switch first := c.firstRunAfter(task, killed); {
	case first.IsZero():
		c.t.Errorf("%s, owned by %s, never ran after %s died, want within %v", task, owner, owner, bound)
	case first.Sub(killed) > bound:
		c.t.Errorf("%s, owned by %s, first ran %v after %s died, want within %v (lockTtl %v plus a period)",
			task, owner, first.Sub(killed), owner, bound, ttl)
	default:
		c.t.Logf("%s, owned by %s, first ran %v after %s died (bound %v)", task, owner, first.Sub(killed), owner, bound)
	}
}

// The heartbeat follows the task set: a stored schedule with a short lock
// TTL, created (or updated to it) after Start, on nodes whose tasks at
// Start made a 1s heartbeat, moves to another node within its own failover
// bound when its owner dies, not within the 1s heartbeat's; and once it is
// deleted, the heartbeat goes back to 1s.
func TestHeartbeatFollowsStoredSchedules(t *testing.T) {
	for _, change := range []string{"create", "update"} {
		for _, phase := range killPhases {
			t.Run(fmt.Sprint(change, "/killed at +", phase), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { heartbeatFollowsStored(t, change, phase) })
			})
		}
	}
}

// heartbeatFollowsStored is TestHeartbeatFollowsStoredSchedules with the
// schedule's change, the owner dying phase into a second.
func heartbeatFollowsStored(t *testing.T, change string, phase time.Duration) {
	const ttl = 300 * time.Millisecond
	short := taskstate.Schedule{Name: "short", Handler: "tick", Cron: "@every 1s", Lock: "short",
		Options: map[string]string{"lockTtl": ttl.String()}}
	c := newDerivedCluster(t, func() []scheduling.Task { return nil })
	defer c.stopAll()
	time.Sleep(3 * time.Second)
	ctx := context.Background()
	if change == "create" {
		if err := c.nodes["n0"].CreateSchedule(ctx, short); err != nil {
			t.Fatal(err)
		}
	} else {
		long := short
		long.Options = map[string]string{"lockTtl": "30s"}
		if err := c.nodes["n0"].CreateSchedule(ctx, long); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := c.nodes["n1"].UpdateSchedule(ctx, short); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second) // a poll, then the views of the new group settle
	c.checkFailover("short", ttl, phase)
	if change != "create" {
		return
	}
	var by *scheduling.Scheduler
	for _, s := range c.nodes {
		by = s
	}
	if err := by.DeleteSchedule(ctx, "short"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a poll, and the first heartbeats of the new group
	since := c.beatCount()
	time.Sleep(3 * time.Second)
	if got, want := c.beatTTLs(since), []time.Duration{3 * scheduling.DefaultHeartbeat}; !slices.Equal(got, want) {
		t.Errorf("membership TTLs after the short schedule's delete %v, want %v: three default heartbeats", got, want)
	}
}

// The heartbeat follows tasks added after Start as it follows stored
// schedules.
func TestHeartbeatFollowsAdd(t *testing.T) {
	for _, phase := range killPhases {
		t.Run(fmt.Sprint("killed at +", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = 300 * time.Millisecond
				long := func() []scheduling.Task {
					return []scheduling.Task{scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("long"),
						scheduling.Cron("@every 1s"), scheduling.Lock("long"), scheduling.LockTTL(30*time.Second))}
				}
				c := newDerivedCluster(t, long)
				defer c.stopAll()
				time.Sleep(3 * time.Second)
				for _, s := range c.nodes {
					if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("short"),
						scheduling.Cron("@every 1s"), scheduling.Lock("short"), scheduling.LockTTL(ttl))); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(3 * time.Second)
				c.checkFailover("short", ttl, phase)
			})
		})
	}
}

// batchSizes is a schedulingtest.Driver that notes the lock TTLs of the
// fires of each AcquireClaims call: a lock batch's.
type batchSizes struct {
	*schedulingtest.Driver
	mu    sync.Mutex
	calls [][]time.Duration
}

func (d *batchSizes) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	ttls := make([]time.Duration, len(fires))
	for i, f := range fires {
		ttls[i] = f.TTL
	}
	d.mu.Lock()
	d.calls = append(d.calls, ttls)
	d.mu.Unlock()
	return d.Driver.AcquireClaims(ctx, fires)
}

// Each fire of a lock batch is bounded by its own lock TTL: with every
// lock step taking 200ms, the fires of the tasks with a 1m lock TTL run,
// though due at the instants of tasks with a 100ms one, whose fires fail
// with an error that names their own 100ms bound. The fires with one TTL
// still make their lock steps in one call.
func TestLockBatchBoundsEachFireByItsOwnTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := schedulingtest.NewDriver(locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock())))
		inner.SetFaults(func(c schedulingtest.Call) schedulingtest.Fault {
			if c.Op == schedulingtest.OpAcquireClaim {
				return schedulingtest.Fault{Delay: 200 * time.Millisecond}
			}
			return schedulingtest.Fault{}
		})
		d := &batchSizes{Driver: inner}
		rec := &schedulingtest.Recorder{}
		s := scheduling.New(scheduling.Config{Driver: d, Node: "a", Location: time.UTC,
			Listeners: []scheduling.Listener{rec}, Logger: slog.New(slog.DiscardHandler)})
		ttls := map[string]time.Duration{"long-1": time.Minute, "long-2": time.Minute,
			"short-1": 100 * time.Millisecond, "short-2": 100 * time.Millisecond}
		for _, name := range slices.Sorted(maps.Keys(ttls)) {
			if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name(name),
				scheduling.Cron("@every 1s"), scheduling.Lock(name), scheduling.LockTTL(ttls[name]))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		const fires = 5
		time.Sleep(fires*time.Second + 500*time.Millisecond)
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		ran := map[string]int{}
		for _, e := range rec.Started() {
			ran[e.Task]++
			if e.Lateness < 200*time.Millisecond {
				t.Errorf("%s's fire at %v ran %v late, before its 200ms lock step ended", e.Task, e.Fire, e.Lateness)
			}
		}
		failed := map[string]int{}
		for _, e := range rec.Skips() {
			if e.Outcome != scheduling.OutcomeLockFailed || !errors.Is(e.Err, context.DeadlineExceeded) ||
				!strings.Contains(e.Err.Error(), "within the lock TTL, 100ms") {
				t.Errorf("%s's fire at %v skipped: %s: %v; want a lock failure past its own 100ms bound", e.Task, e.Fire, e.Outcome, e.Err)
				continue
			}
			failed[e.Task]++
		}
		for name, ttl := range ttls {
			if ttl == time.Minute && ran[name] != fires {
				t.Errorf("%s (lockTtl 1m) ran %d of %d fires whose lock steps took 200ms", name, ran[name], fires)
			}
			if ttl < time.Second && failed[name] != fires {
				t.Errorf("%s (lockTtl 100ms) failed %d of %d fires past its bound, ran %d", name, failed[name], fires, ran[name])
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		want := [][]time.Duration{{time.Minute, time.Minute}, {100 * time.Millisecond, 100 * time.Millisecond}}
		if len(d.calls) != len(want)*fires {
			t.Fatalf("AcquireClaims calls %v, want one per instant and lock TTL (%v)", d.calls, want)
		}
		for i := 0; i < len(d.calls); i += 2 {
			got := slices.Clone(d.calls[i:min(i+2, len(d.calls))])
			slices.SortFunc(got, func(a, b []time.Duration) int { return int(b[0] - a[0]) })
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("AcquireClaims calls %v, want one per instant and lock TTL (%v)", d.calls, want)
			}
		}
	})
}
