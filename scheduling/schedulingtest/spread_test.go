package schedulingtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// spreadCluster is n spreading schedulers in a synctest bubble, sharing one
// in-process driver through a fault-injecting one that counts calls and
// fails the calls of dead nodes.
type spreadCluster struct {
	t     *testing.T
	start time.Time
	drv   *schedulingtest.Driver
	tasks int
	nodes map[string]*scheduling.Scheduler
	recs  map[string]*schedulingtest.Recorder

	mu    sync.Mutex // protects the fields below
	dead  map[string]bool
	calls []call
}

// call is one driver call and when it returned.
type call struct {
	at time.Time
	schedulingtest.Result
}

func newSpreadCluster(t *testing.T, nodes, tasks int) *spreadCluster {
	c := &spreadCluster{t: t, start: time.Now(), tasks: tasks, nodes: map[string]*scheduling.Scheduler{},
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
		c.mu.Lock()
		c.calls = append(c.calls, call{time.Now(), r})
		c.mu.Unlock()
	})
	time.Sleep(500 * time.Millisecond) // heartbeats half-way between fires
	for i := range nodes {
		c.startNode(fmt.Sprint("n", i))
	}
	return c
}

func (c *spreadCluster) startNode(name string) {
	rec := &schedulingtest.Recorder{}
	c.recs[name] = rec
	s := scheduling.New(scheduling.Config{Driver: c.drv.Node(name, nil), Node: name, Spread: true, Location: time.UTC,
		Listeners: []scheduling.Listener{rec}, Logger: slog.New(slog.DiscardHandler)})
	var ts []scheduling.Task
	for i := range c.tasks {
		ts = append(ts, scheduling.NewTask(func(context.Context) error { return nil },
			scheduling.Name(fmt.Sprint("t", i)), scheduling.Cron("@every 1s"), scheduling.Lock(fmt.Sprint("k", i)),
			scheduling.LockTTL(5*time.Second)))
	}
	if err := s.Add(ts...); err != nil {
		c.t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[name] = s
}

// kill makes name's calls fail and stops it at once, as a node that dies.
func (c *spreadCluster) kill(name string) {
	c.mu.Lock()
	c.dead[name] = true
	c.mu.Unlock()
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.nodes[name].Stop(cut)
	delete(c.nodes, name)
}

func (c *spreadCluster) stopAll() {
	for name, s := range c.nodes {
		if err := s.Stop(context.Background()); err != nil {
			c.t.Errorf("Stop %s: %v", name, err)
		}
	}
	synctest.Wait()
}

func (c *spreadCluster) recorders() []*schedulingtest.Recorder {
	var rs []*schedulingtest.Recorder
	for _, r := range c.recs {
		rs = append(rs, r)
	}
	return rs
}

// countCalls counts the calls of op that returned in [from, to) after the
// start.
func (c *spreadCluster) countCalls(op schedulingtest.Op, from, to time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.calls {
		if r.Op == op && !r.at.Before(c.start.Add(from)) && r.at.Before(c.start.Add(to)) {
			n++
		}
	}
	return n
}

// exactlyOnce checks that every fire of every task in [from, to) after the
// start ran once.
func (c *spreadCluster) exactlyOnce(from, to time.Duration) {
	c.t.Helper()
	if err := schedulingtest.AtMostOnce(c.recorders()...); err != nil {
		c.t.Error(err)
	}
	runs := schedulingtest.Runs(c.recorders()...)
	for i := range c.tasks {
		task := fmt.Sprint("t", i)
		for f := c.start.Add(from).Truncate(time.Second); f.Before(c.start.Add(to)); f = f.Add(time.Second) {
			if n := runs[schedulingtest.Key(task, f)]; n != 1 {
				c.t.Errorf("%s fire %v ran %d times, want once", task, f.Sub(c.start), n)
			}
		}
	}
}

// With Spread, one node makes the driver calls of each fire: the
// cluster's Acquire calls are one per fire, not one per node and fire, and
// the tasks are spread over every node.
func TestSpreadOneNodePerFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSpreadCluster(t, 3, 30)
		time.Sleep(20 * time.Second)
		fires := 30 * 15
		if n := c.countCalls(schedulingtest.OpAcquireClaim, 4*time.Second, 19*time.Second); n != fires {
			t.Errorf("%d AcquireClaim calls for the %d fires from 4s to 19s, want one per fire", n, fires)
		}
		if n := c.countCalls(schedulingtest.OpBeat, 4*time.Second, 19*time.Second); n != 3*15 {
			t.Errorf("%d heartbeats from 4s to 19s, want one per node and second (45)", n)
		}
		// Every node names the same owner of each task: the node that ran it.
		ranBy := map[string]string{}
		for name, r := range c.recs {
			for _, e := range r.Started() {
				if e.Fire.After(c.start.Add(4 * time.Second)) {
					ranBy[e.Task] = name
				}
			}
		}
		for name, s := range c.nodes {
			for _, ti := range s.Tasks() {
				if ti.Owner != ranBy[ti.Name] {
					t.Errorf("%s takes %s's owner to be %q; it ran on %s", name, ti.Name, ti.Owner, ranBy[ti.Name])
				}
			}
		}
		c.stopAll()
		c.exactlyOnce(2*time.Second, 19*time.Second)
		owners := map[string]int{}
		for name, r := range c.recs {
			for _, e := range r.Started() {
				if e.Fire.After(c.start.Add(4 * time.Second)) {
					owners[name]++
				}
			}
		}
		if len(owners) != 3 {
			t.Errorf("runs by node %v, want the tasks spread over all 3", owners)
		}
	})
}

// An owner that dies loses its tasks to the live nodes within its
// membership's life (three heartbeats) plus a heartbeat and a period; the
// tasks of a node that stops are taken over without a missed fire, its
// fires due while it stops running on time (it hands them over); a node
// that joins takes its share without one. No fire runs twice throughout.
func TestSpreadFailoverAndHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSpreadCluster(t, 3, 30)
		time.Sleep(10 * time.Second)
		owned := map[string]bool{} // the tasks n0 ran last
		for _, e := range c.recs["n0"].Started() {
			if e.Fire.After(c.start.Add(8 * time.Second)) {
				owned[e.Task] = true
			}
		}
		if len(owned) == 0 {
			t.Fatal("n0 owned no task")
		}
		killed := time.Now()
		c.kill("n0")
		time.Sleep(10 * time.Second)
		bound := 3*scheduling.DefaultHeartbeat + scheduling.DefaultHeartbeat + time.Second // a member's life, a heartbeat, a period
		for task := range owned {
			var first time.Time
			for _, r := range c.recorders() {
				for _, e := range r.Started() {
					if e.Task == task && e.Start.After(killed) && (first.IsZero() || e.Start.Before(first)) {
						first = e.Start
					}
				}
			}
			if first.IsZero() || first.Sub(killed) > bound {
				t.Errorf("%s, owned by n0, first ran %v after n0 died, want within %v", task, first.Sub(killed), bound)
			}
		}
		c.exactlyOnce(2*time.Second, 9*time.Second)
		c.exactlyOnce(killed.Sub(c.start)+bound, 20*time.Second)

		// A graceful stop of n1, then a start of n3: no fire is missed.
		// After the others' heartbeats (at .5) and before the next fire: the
		// fire falls before they see n1 gone.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1700 * time.Millisecond)))
		stopped := time.Now()
		if err := c.nodes["n1"].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		delete(c.nodes, "n1")
		time.Sleep(5 * time.Second)
		// n1 handed its tasks over: the fires due meanwhile ran on time,
		// on n1 or on their new owner (before, those of the next second
		// ran late, at the others' heartbeat).
		for name, r := range c.recs {
			for _, e := range r.Started() {
				if e.Fire.After(stopped) && e.Fire.Before(stopped.Add(3*time.Second)) && e.Lateness > 100*time.Millisecond {
					t.Errorf("%s fire %v ran %v late on %s, after n1's Stop; want on time", e.Task, e.Fire.Sub(c.start), e.Lateness, name)
				}
			}
		}
		c.startNode("n3")
		time.Sleep(5 * time.Second)
		c.stopAll()
		c.exactlyOnce(killed.Sub(c.start)+bound, 30*time.Second)
		if err := schedulingtest.AtMostOnce(c.recorders()...); err != nil {
			t.Error(err)
		}
	})
}
