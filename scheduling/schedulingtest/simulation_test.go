package schedulingtest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

var (
	simFires   = flag.Int("sim.fires", 10000, "fires the cluster simulation covers, at least (make chaos: 100000)")
	simSeed    = flag.Uint64("sim.seed", 0, "seed of the cluster simulation; 0 picks one")
	simHistory = flag.Int("sim.history", -1, "replay only this history of the seed")
)

// Bounds of the simulated cluster, stated in the package documentation of
// the test: clocks within ±maxSkew of true time, runs of 0 to 3 periods.
const (
	maxSkew  = 150 * time.Millisecond
	simSpan  = 40 * time.Second // simulated time per history
	warmup   = 3 * time.Second  // fires before this are not checked
	cooldown = 12 * time.Second // nor fires this close to the end
)

// TestClusterSimulation runs many seeded histories of a cluster of 3 to 5
// schedulers sharing one in-process lock driver through a fault-injecting
// [schedulingtest.Driver], on skewed clocks, with random specs (period, lock
// TTL, lock wait, renewal, shared locks), random run lengths (0 to 3
// periods), and random faults: driver errors, calls that take effect but
// whose reply is lost, slow calls, node pauses (every call of the node held
// until the pause ends) and node kills (the node's calls fail from then on,
// its runs are cut, nothing it held is released; it restarts later). Each
// history runs in a synctest bubble, so time is simulated and a history
// takes milliseconds. It checks:
//
//	(a) no fire runs twice across the cluster;
//	(b) no two runs on one lock key overlap in time: a run ends when its
//	    lease does;
//	(c) every fire that no fault touched, and whose lock was not held by a
//	    run of another fire, runs exactly once; every fire is accounted for
//	    by every node that was up around it (a run or a skip with a reason);
//	(d) no panic, and every goroutine ends (synctest fails a history whose
//	    goroutines outlive it).
//
// A failure prints the seed and history; -sim.seed and -sim.history replay
// it: the same specs, run lengths and faults.
func TestClusterSimulation(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test ./scheduling/schedulingtest -run TestClusterSimulation -sim.seed %d)", seed, seed)
	var total, runs, touched, free int
	for h := 0; total < *simFires; h++ {
		if *simHistory >= 0 && h != *simHistory {
			if h > *simHistory {
				break
			}
			continue
		}
		var st stats
		synctest.Test(t, func(t *testing.T) { st = simulate(t, seed, h) })
		if t.Failed() {
			t.Fatalf("history %d of seed %d failed (replay: -sim.seed %d -sim.history %d)", h, seed, seed, h)
		}
		total, runs, touched, free = total+st.fires, runs+st.runs, touched+st.touched, free+st.free
	}
	t.Logf("%d fires checked: %d ran, %d touched by a fault, %d untouched and uncontended (each ran once)", total, runs, touched, free)
	if free < total/40 {
		t.Errorf("only %d of %d fires were free of faults and contention: the liveness check covers too little", free, total)
	}
}

type stats struct{ fires, runs, touched, free int }

type simTask struct {
	name, lock string
	period     time.Duration
	ttl, wait  time.Duration
	renew      bool
	maxRun     time.Duration
}

type window struct{ from, to time.Time }

func (w window) overlaps(from, to time.Time) bool { return w.from.Before(to) && from.Before(w.to) }

type simNode struct {
	name   string
	off    time.Duration
	pauses []window
	kills  []window // down from .from to .to
}

// interval is one run's hold of its lock, in true time.
type interval struct {
	task, node string
	fire       time.Time
	from, to   time.Time
}

type simWorld struct {
	rate   float64 // the share of calls that fail, lose their reply, or are slow (a third each)
	seed   uint64
	hist   uint64
	start  time.Time
	tasks  []simTask
	nodes  []*simNode
	mu     sync.Mutex // protects the fields below
	held   []interval
	faults []faultAt
	recs   map[string]*schedulingtest.Recorder
	dead   map[string]bool
}

type faultAt struct {
	at   time.Time
	node string
	key  string
}

// roll returns a number in [0, 1) fixed by the history and parts.
func (w *simWorld) roll(parts ...any) float64 {
	h := fnv.New64a()
	fmt.Fprint(h, w.seed, w.hist, parts)
	return float64(h.Sum64()>>11) / (1 << 53)
}

func simulate(t *testing.T, seed uint64, hist int) stats {
	rng := rand.New(rand.NewPCG(seed, uint64(hist)))
	w := &simWorld{seed: seed, hist: uint64(hist), start: time.Now(),
		recs: map[string]*schedulingtest.Recorder{}, dead: map[string]bool{}}
	w.rate = []float64{0, 0, 0.005, 0.03}[rng.IntN(4)]
	periods := []time.Duration{400 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for i := range 1 + rng.IntN(3) {
		p := periods[rng.IntN(len(periods))]
		st := simTask{name: fmt.Sprint("t", i), lock: fmt.Sprint("L", rng.IntN(2)), period: p,
			ttl: p/2 + time.Duration(rng.Int64N(int64(5*p/2))), renew: rng.IntN(2) == 0, maxRun: 3 * p}
		if rng.IntN(2) == 0 {
			st.wait = time.Duration(rng.Int64N(int64(3 * p)))
		}
		st.ttl = max(st.ttl, scheduling.MinRenewTTL)
		w.tasks = append(w.tasks, st)
	}
	for i := range 3 + rng.IntN(3) {
		n := &simNode{name: fmt.Sprint("n", i), off: time.Duration(rng.Int64N(int64(2*maxSkew+1))) - maxSkew}
		for range rng.IntN(3) * min(1, int(w.rate*1000)) {
			at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan))))
			n.pauses = append(n.pauses, window{at, at.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))})
		}
		if w.rate > 0 && rng.IntN(3) == 0 {
			at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan - 8*time.Second))))
			n.kills = append(n.kills, window{at, at.Add(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))})
		}
		w.nodes = append(w.nodes, n)
	}
	inner := locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock()))
	drv := schedulingtest.NewDriver(inner)
	drv.SetFaults(w.fault)
	drv.Observe(func(r schedulingtest.Result) {
		if r.Fault != (schedulingtest.Fault{}) {
			w.mu.Lock()
			w.faults = append(w.faults, faultAt{time.Now(), r.Node, r.Key})
			w.mu.Unlock()
		}
	})

	start := func(n *simNode) *scheduling.Scheduler {
		clock := schedulingtest.SkewedClock(clockwork.NewRealClock(), n.off)
		rec := w.recorder(n.name)
		s := scheduling.New(scheduling.Config{Driver: drv.Node(n.name, clock), Clock: clock, Node: n.name,
			Location: time.UTC, Listeners: []scheduling.Listener{rec}, Logger: slog.New(slog.DiscardHandler)})
		var tasks []scheduling.Task
		for _, st := range w.tasks {
			opts := []scheduling.Option{scheduling.Name(st.name), scheduling.Cron("@every " + st.period.String()),
				scheduling.Lock(st.lock), scheduling.LockTTL(st.ttl), scheduling.LockWait(st.wait)}
			if st.renew {
				opts = append(opts, scheduling.Renew())
			}
			tasks = append(tasks, scheduling.NewTask(w.work(st), opts...))
		}
		if err := s.Add(tasks...); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	running := map[string]*scheduling.Scheduler{}
	for _, n := range w.nodes {
		running[n.name] = start(n)
	}
	// Kills and restarts, in time order.
	type event struct {
		at   time.Time
		n    *simNode
		kill bool
	}
	var events []event
	for _, n := range w.nodes {
		for _, k := range n.kills {
			events = append(events, event{k.from, n, true}, event{k.to, n, false})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	for _, ev := range events {
		time.Sleep(time.Until(ev.at))
		if ev.kill {
			w.mu.Lock()
			w.dead[ev.n.name] = true
			w.mu.Unlock()
			cut, cancel := context.WithCancel(context.Background())
			cancel()
			_ = running[ev.n.name].Stop(cut) // a dead node releases nothing: its calls fail
		} else {
			w.mu.Lock()
			w.dead[ev.n.name] = false
			w.mu.Unlock()
			running[ev.n.name] = start(ev.n)
		}
	}
	time.Sleep(time.Until(w.start.Add(simSpan)))
	for _, s := range running {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := s.Stop(ctx); err != nil && !errors.Is(err, scheduling.ErrStopTimeout) {
			t.Errorf("Stop: %v", err)
		}
		cancel()
	}
	synctest.Wait()
	return w.check(t)
}

func (w *simWorld) recorder(node string) *schedulingtest.Recorder {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.recs[node]
	if r == nil {
		r = &schedulingtest.Recorder{}
		w.recs[node] = r
	}
	return r
}

// fault decides the fault of one call.
func (w *simWorld) fault(c schedulingtest.Call) schedulingtest.Fault {
	now := time.Now()
	w.mu.Lock()
	dead := w.dead[c.Node]
	w.mu.Unlock()
	if dead {
		return schedulingtest.Fault{Err: errors.New("node is dead")}
	}
	for _, n := range w.nodes {
		if n.name != c.Node {
			continue
		}
		for _, p := range n.pauses {
			if !now.Before(p.from) && now.Before(p.to) {
				return schedulingtest.Fault{Delay: p.to.Sub(now)}
			}
		}
	}
	r := w.roll(c.Node, c.Op, c.Key, c.Seq, c.Token, now.UnixNano())
	switch {
	case r < w.rate/3:
		return schedulingtest.Fault{Err: errors.New("connection reset")}
	case r < 2*w.rate/3:
		return schedulingtest.Fault{LoseReply: true}
	case r < w.rate:
		return schedulingtest.Fault{Delay: time.Duration(w.roll("delay", r) * float64(time.Second))}
	}
	return schedulingtest.Fault{}
}

// work returns the task of st: it runs for a length fixed by the fire and
// node, 0 to 3 periods, or until its context ends, and records its hold.
func (w *simWorld) work(st simTask) func(context.Context) error {
	return func(ctx context.Context) error {
		run, _ := scheduling.RunFromContext(ctx)
		from := time.Now()
		d := time.Duration(w.roll("run", st.name, run.Fire.UnixNano(), run.Node) * float64(st.maxRun))
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		w.mu.Lock()
		w.held = append(w.held, interval{task: st.name, node: run.Node, fire: run.Fire, from: from, to: time.Now()})
		w.mu.Unlock()
		return nil
	}
}

func (w *simWorld) check(t *testing.T) stats {
	var recs []*schedulingtest.Recorder
	for _, r := range w.recs {
		recs = append(recs, r)
	}
	// (a)
	if err := schedulingtest.AtMostOnce(recs...); err != nil {
		t.Error(err)
	}
	// (b)
	lockOf := map[string]string{}
	for _, st := range w.tasks {
		lockOf[st.name] = st.lock
	}
	byLock := map[string][]interval{}
	for _, h := range w.held {
		byLock[lockOf[h.task]] = append(byLock[lockOf[h.task]], h)
	}
	for lock, hs := range byLock {
		slices.SortFunc(hs, func(a, b interval) int { return a.from.Compare(b.from) })
		for i := 1; i < len(hs); i++ {
			for j := i - 1; j >= 0 && j >= i-8; j-- {
				if hs[j].to.After(hs[i].from) {
					t.Errorf("lock %s held by two runs at once: %s fire %v on %s [%v, %v] and %s fire %v on %s [%v, %v]",
						lock, hs[j].task, hs[j].fire, hs[j].node, hs[j].from.Sub(w.start), hs[j].to.Sub(w.start),
						hs[i].task, hs[i].fire, hs[i].node, hs[i].from.Sub(w.start), hs[i].to.Sub(w.start))
				}
			}
		}
	}
	// (c)
	type report struct {
		node    string
		outcome scheduling.Outcome
	}
	reports := map[schedulingtest.FireKey][]report{}
	for _, r := range recs {
		for _, e := range r.Started() {
			k := schedulingtest.Key(e.Task, e.Fire)
			reports[k] = append(reports[k], report{e.Node, "run"})
		}
		for _, e := range r.Skips() {
			k := schedulingtest.Key(e.Task, e.Fire)
			reports[k] = append(reports[k], report{e.Node, e.Outcome})
		}
	}
	var st stats
	for _, task := range w.tasks {
		for f := w.start.Add(warmup).Truncate(task.period); f.Before(w.start.Add(simSpan - cooldown)); f = f.Add(task.period) {
			k := schedulingtest.Key(task.name, f)
			rs := reports[k]
			st.fires++
			ran, contended := 0, false
			seen := map[string]int{}
			for _, r := range rs {
				seen[r.node]++
				switch r.outcome {
				case "run":
					ran++
				case scheduling.OutcomeLockHeld, scheduling.OutcomeRunning:
					contended = true
				}
			}
			st.runs += ran
			span := window{f.Add(-2*maxSkew - time.Second), f.Add(2*maxSkew + task.wait + task.ttl + 2*task.period + time.Second)}
			touched := w.touched(task, span)
			if touched {
				st.touched++
			}
			for _, n := range w.nodes {
				if w.down(n, span) {
					continue
				}
				if seen[n.name] != 1 {
					t.Errorf("%s fire %v: node %s reported it %d times, want once (reports %v)", task.name, f.Sub(w.start), n.name, seen[n.name], rs)
				}
			}
			if !touched && !contended {
				st.free++
			}
			if !touched && !contended && ran != 1 {
				t.Errorf("%s fire %v: untouched and uncontended, ran %d times (reports %v)", task.name, f.Sub(w.start), ran, rs)
			}
		}
	}
	return st
}

// touched reports whether a fault, a pause or a kill may have affected a
// fire of task whose processing falls in span.
func (w *simWorld) touched(task simTask, span window) bool {
	for _, n := range w.nodes {
		if w.down(n, span) {
			return true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.faults {
		if !f.at.Before(span.from) && f.at.Before(span.to) &&
			(f.key == task.lock || strings.HasPrefix(f.key, task.lock+"@")) {
			return true
		}
	}
	return false
}

// down reports whether n was paused or dead at some time in span.
func (w *simWorld) down(n *simNode, span window) bool {
	for _, p := range n.pauses {
		if p.overlaps(span.from, span.to) {
			return true
		}
	}
	for _, k := range n.kills {
		if k.overlaps(span.from, span.to) {
			return true
		}
	}
	return false
}
