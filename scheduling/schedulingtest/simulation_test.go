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
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

var (
	simFires   = flag.Int("sim.fires", 10000, "fires the cluster simulation covers, at least (make chaos: 100000)")
	simSeed    = flag.Uint64("sim.seed", 0, "seed of the cluster simulation; 0 picks one")
	simHistory = flag.Int("sim.history", -1, "replay only this history of the seed")
	simLog     = flag.Bool("sim.log", false, "print the schedulers' logs (at Debug) and the history's nodes")
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
// its runs are cut, nothing it held is released; it restarts later, catching
// up the fire it missed if its task has a catch-up window), graceful stops
// and restarts, and nodes that join late. In half the histories the nodes
// spread their tasks ([scheduling.Config.Spread]), so that ownership moves
// with every join, stop, death and pause, and heartbeats fail as other calls
// do. Operators act
// through random live nodes: they pause and resume tasks and ask for manual
// runs, on a shared task state whose calls fail or lose their reply at the
// same rate as the driver's. Each history runs in a synctest bubble, so time
// is simulated and a history takes milliseconds. It checks:
//
//	(a) no fire runs twice across the cluster;
//	(b) no two runs on one lock key overlap in time: a run ends when its
//	    lease does;
//	(c) every fire that no fault touched, and whose lock was not held by a
//	    run of another fire, runs exactly once; every fire is accounted for
//	    by every node that was up around it (a run or a skip with a reason);
//	(d) no panic, and every goroutine ends (synctest fails a history whose
//	    goroutines outlive it);
//	(e) no scheduled or catch-up fire whose instant fell while its task was
//	    paused on every node's clock, and had been for one request poll (the
//	    nodes learn of a pause at their next poll), runs, unless a fault
//	    touched it;
//	(f) every manual-run request is run at most once and accounted for: each
//	    take is in the shared history (run, failed, or taken by a node that
//	    died), each request made is served by a later take of its task (the
//	    one it was merged into) or still pending at the end, and every manual
//	    run is a take's.
//
// About a third of the tasks retry (Retry 1 to 3, a backoff of a quarter
// to one period, sometimes capped), and fail 40% of their runs (an error,
// or one time in four a panic; a run cut by a lost lease or Stop returns
// its context's cause); the other tasks fail 15% of theirs, and never
// retry. Checks (a), (c) and (e) above are of first attempts (a retry is
// another run of its fire); a fire skipped while a retry of an earlier one
// is pending is contended, as one skipped for a held lock. Every attempt of
// a fire is then checked:
//
//	(g) every (task, fire, attempt), the run's identity from
//	    scheduling.RunFromContext, runs at most once across the cluster;
//	(h) a run of attempt k > 1 follows a failed run (an error, a panic, a
//	    cut) of attempt k-1 of its fire, and k is at most Retry + 1;
//	(i) check (b) covers every attempt: a retry holds its task's lock;
//	(j) each attempt is taken from the shared store at most once, every
//	    retry run follows its node's take of it, and every take is in the
//	    shared history;
//	(e) holds for a retry at its start: one that starts while its task
//	    had been paused for a request poll does not run, unless a fault
//	    touched it.
//
// The test fails if too few retries ran across the histories to cover
// these checks.
//
// A fifth of the tasks each have overlap buffer-one, cancel-previous, or
// allow with MaxConcurrent 2 or 3 (on a lock key of their own); their runs,
// of 0 to 3 periods, mostly outlast their period, so that fires wait for
// the run going, supersede it, or run beside it. Checks (a) to (j) hold
// for them: (b) per slot key with allow (each run's lease key is its
// task's lock, or one of its slots); in (c), a fire that waited is
// contended, and a node may report it more than once (at its instant, and
// where it took it from the store: attempt 1); (e) holds for a fire that
// waited as for a retry, at its start. And, in checkOverlap:
//
//	(k) each fire runs at most once under every policy, and a fire that
//	    waited runs only as a take from the store, once every earlier run
//	    of its lock ended;
//	(l) at most one fire of a task waits at a time, in the cluster;
//	(m) with cancel-previous, the runs going when a later fire was left
//	    waiting end within a poll, unless their node was paused, killed, stopped
//	    or failed its poll; a superseded run is recorded as cancelled, and
//	    is not retried;
//	(n) with allow, at most MaxConcurrent runs of the task go at once.
//
// The test fails if, over all histories, no fire that waited ran, no run
// was superseded, or no run of allow ran beside another.
//
// In two histories of three an operator backfills a locked task over
// eight periods before the history and its catch-up window, and in half
// of them a task (not allow: Backfill refuses its recent instants) or a
// stored schedule over the eight seconds before, through any live node,
// with the faults of every other call:
//
//	(o) each backfill instant runs at most once across the cluster, under
//	    a lease (check b covers its hold), the instants of a task without
//	    allow in order; it is an instant of the spec in force at it (of a
//	    stored schedule, or of its first spec before its creation); it
//	    does not run an instant that ran already, unless that run's record
//	    may not have reached the store before its lease ended (its node
//	    died, stopped or failed a store call, or the lease ended under the
//	    run: the limit Backfill states); it does not run while its task was
//	    paused on every node; the test fails if no backfill ran in any
//	    history.
//
// In two histories of three operators create one or two stored schedules
// (handlers registered on every node with Scheduler.Handle), update them
// every 4 to 10 s (one time in five 1 to 3 s: before the update before is
// in force, or while its gate is closed), changing their cron, lock or
// options (lock TTL and wait, renewal, overlap skip, buffer-one or
// cancel-previous, retry 1 or 2 times, failing 40% of the runs then),
// delete them and create them again, through a live node, with the faults
// of every store call (errors, lost replies: the change may have taken
// effect). A schedule is created again only on the lock every spec of its
// deleted life had: on another, its fires would not wait for a run of the
// deleted one going (a defect not fixed, see storedPlan). The store's log of the changes that took
// effect gives each instant's spec in force (taskstate.Schedule.From):
//
//	(p) every run of a stored schedule is of an instant of the spec in
//	    force at it, under that spec's lock (a node whose polls failed, or
//	    that was down, in the seconds before may run the spec it knew); no
//	    two runs of a schedule overlap, across its changes; every instant
//	    of a spec a poll after its create and before its delete that no
//	    fault touched and no run contended runs exactly once; checks (a),
//	    (b) and (g) to (k) cover its runs as every task's.
//
// At the end, every task of a node up since the start (its code tasks and
// the stored schedules it read as the store holds them) is audited
// (Scheduler.Audit), once every instant is past the audit's horizon:
//
//	(q) the audit lists every instant of the spec in force in its range
//	    and no other; an instant it finds ran started a run (scheduled,
//	    catch-up, retry, waiting, backfill); an instant whose run started
//	    is found ran unless a fault may have lost the run's record (its
//	    node died or stopped after it started, or a store call of its node
//	    on the task failed). The test fails if no instant was audited, or
//	    no stored schedule ran.
//
// In half the histories with stored schedules, operators create one or
// two calendars (windows of a few seconds) and update them every 4 to 10 s
// through live nodes, with the faults of every store call; most specs of
// the stored schedules name them, and a third of the schedules have
// maxRuns 3 to 30 (simulation_calendar_test.go states the checks):
//
//	(r) no run but a manual one is of an instant that the calendars in
//	    force at it exclude, unless a node may have missed an update; the
//	    excluded instants are left out of check (p)'s liveness;
//	(s) a schedule with maxRuns N runs at most the fires the store counts
//	    taken, at most N, each after its node's take; one with more than
//	    N+5 free instants took all N.
//
// The test fails if a run of 10,000 fires or more changed no calendar,
// ran no schedule naming one, or had no free instant of one excluded or
// none included, or if no schedule with maxRuns ran and took all its
// runs.
//
// A failure prints the seed and history; -sim.seed and -sim.history replay
// it: the same specs, run lengths and faults.
func TestClusterSimulation(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test ./scheduling/schedulingtest -run TestClusterSimulation -sim.seed %d)", seed, seed)
	var total, runs, touched, free, retries, buffered, superseded, concurrent, doubleWaits, backfilled int
	var sum stats
	for h := 0; total < *simFires; h++ {
		if *simHistory >= 0 && h != *simHistory {
			if h > *simHistory {
				break
			}
			continue
		}
		var st stats
		synctest.Test(t, func(t *testing.T) {
			st = simulate(t, seed, h)
			if t.Failed() { // the bubble's failure ends the test
				t.Logf("history %d of seed %d failed (replay: -sim.seed %d -sim.history %d -sim.log)", h, seed, seed, h)
			}
		})
		total, runs, touched, free = total+st.fires, runs+st.runs, touched+st.touched, free+st.free
		retries += st.retries
		buffered, superseded, concurrent = buffered+st.buffered, superseded+st.superseded, concurrent+st.concurrent
		doubleWaits += st.doubleWaits
		backfilled += st.backfilled
		sum.storedWrites, sum.storedRuns, sum.storedFires, sum.storedFree = sum.storedWrites+st.storedWrites,
			sum.storedRuns+st.storedRuns, sum.storedFires+st.storedFires, sum.storedFree+st.storedFree
		sum.audited, sum.auditMissed = sum.audited+st.audited, sum.auditMissed+st.auditMissed
		sum.recentBackfilled += st.recentBackfilled
		sum.calWrites, sum.calExcluded, sum.calIncluded = sum.calWrites+st.calWrites, sum.calExcluded+st.calExcluded, sum.calIncluded+st.calIncluded
		sum.calRuns, sum.calStaleRuns = sum.calRuns+st.calRuns, sum.calStaleRuns+st.calStaleRuns
		sum.maxRunsTasks, sum.maxRunsDone, sum.maxRunsAfter = sum.maxRunsTasks+st.maxRunsTasks, sum.maxRunsDone+st.maxRunsDone,
			sum.maxRunsAfter+st.maxRunsAfter
	}
	t.Logf("%d fires checked: %d ran, %d touched by a fault, %d untouched and uncontended (each ran once); %d retries ran",
		total, runs, touched, free, retries)
	t.Logf("overlap: %d runs of fires that waited (buffer-one, cancel-previous), %d runs superseded (cancel-previous), %d runs beside another (allow); "+
		"%d fires left waiting while another waited (check l); %d backfill runs, %d of them over recent instants", buffered, superseded, concurrent, doubleWaits,
		backfilled, sum.recentBackfilled)
	t.Logf("stored schedules: %d changes took effect, %d runs, %d instants checked, %d free of faults and contention (check p); "+
		"audits: %d instants judged, %d missed (check q)", sum.storedWrites, sum.storedRuns, sum.storedFires, sum.storedFree, sum.audited, sum.auditMissed)
	t.Logf("calendars: %d changes took effect, %d free instants excluded, %d not; %d runs of schedules naming them, %d excused as by a node that "+
		"may have missed a change (check r); maxRuns: %d schedules ran, %d took all their runs, %d free instants after (check s)",
		sum.calWrites, sum.calExcluded, sum.calIncluded, sum.calRuns, sum.calStaleRuns, sum.maxRunsTasks, sum.maxRunsDone, sum.maxRunsAfter)
	if *simHistory >= 0 {
		return // one history's replay: the coverage of the checks is the seed's
	}
	if free < total/40 {
		t.Errorf("only %d of %d fires were free of faults and contention: the liveness check covers too little", free, total)
	}
	if retries < total/40 {
		t.Errorf("only %d retries ran in histories of %d fires: the retry checks (g to j) cover too little", retries, total)
	}
	if sum.storedRuns == 0 || sum.storedFree == 0 || sum.storedWrites == 0 {
		t.Errorf("%d changes of stored schedules, %d runs, %d free instants: check (p) covers too little", sum.storedWrites, sum.storedRuns, sum.storedFree)
	}
	if total >= 10000 && (sum.calWrites == 0 || sum.calExcluded == 0 || sum.calIncluded == 0 || sum.calRuns == 0) {
		t.Errorf("%d changes of calendars, %d free instants excluded, %d not, %d runs of schedules naming them: check (r) covers too little",
			sum.calWrites, sum.calExcluded, sum.calIncluded, sum.calRuns)
	}
	if total >= 10000 && (sum.maxRunsTasks == 0 || sum.maxRunsDone == 0) {
		t.Errorf("%d schedules with maxRuns ran, %d took all their runs: check (s) covers too little", sum.maxRunsTasks, sum.maxRunsDone)
	}
	if sum.audited == 0 {
		t.Error("no instant audited: check (q) covers nothing")
	}
	if backfilled == 0 || sum.recentBackfilled == 0 {
		t.Errorf("%d backfill runs, %d over recent instants: check (o) needs both", backfilled, sum.recentBackfilled)
	}
	if buffered == 0 || superseded == 0 || concurrent == 0 {
		t.Errorf("%d runs of fires that waited, %d superseded runs, %d runs beside another: the overlap checks (k to n) need each",
			buffered, superseded, concurrent)
	}
}

type stats struct {
	fires, runs, touched, free, retries int
	// The overlap policies at work: runs of fires that waited for the run
	// going, runs that a later fire superseded, runs of allow that started
	// beside another.
	buffered, superseded, concurrent int
	doubleWaits                      int
	backfilled                       int // runs of backfills (check o)
	// The stored schedules (check p): changes that took effect, runs,
	// instants checked for liveness and those free of faults and
	// contention; the audits (check q): instants judged, and found missed.
	recentBackfilled                                  int // runs of backfills over recent instants (check o)
	storedWrites, storedRuns, storedFires, storedFree int
	audited, auditMissed                              int
	// The calendars (check r): their changes that took effect, the free
	// instants of schedules naming them that they exclude and that they
	// do not, the runs of such schedules, and those excused as run by a
	// node that may have missed a change. The schedules with maxRuns
	// (check s): those that ran, those that took all their runs, and the
	// free instants after their last run was taken.
	calWrites, calExcluded, calIncluded, calRuns, calStaleRuns int
	maxRunsTasks, maxRunsDone, maxRunsAfter                    int
}

type simTask struct {
	name, lock string
	period     time.Duration
	ttl, wait  time.Duration
	renew      bool
	maxRun     time.Duration
	catchUp    time.Duration
	jitter     time.Duration // each fire starts up to this much after its instant
	// retries is the task's Retry (0: none), with its RetryBackoff and,
	// if set, its RetryMaxBackoff.
	retries             int
	backoff, maxBackoff time.Duration
	failRate            float64 // the share of its runs that fail (return an error or panic)
	// overlap is the task's Overlap ("" for the default, skip), and
	// maxConc its MaxConcurrent with allow.
	overlap string
	maxConc int
}

type window struct{ from, to time.Time }

func (w window) overlaps(from, to time.Time) bool { return w.from.Before(to) && from.Before(w.to) }

type simNode struct {
	name   string
	off    time.Duration
	pauses []window
	kills  []window  // down from .from to .to
	leaves []window  // stopped gracefully at .from, started again at .to
	late   time.Time // first started then, if not zero
}

// interval is one run's hold of its lock, in true time, with the run's
// identity (from scheduling.RunFromContext) and how it ended: failed is
// "" for a run that returned nil, else "error", "panic" or "cut" (its
// context ended under it, and a task that retries then returns an error).
type interval struct {
	task, node string
	fire       time.Time
	manual     bool
	attempt    int
	from, to   time.Time
	failed     string
	// slot is the key of the run's lease (locks.FromContext): the task's
	// lock, or with allow one of its slot keys.
	slot string
	// superseded reports a run whose context ended with cause
	// scheduling.ErrSuperseded: a later fire of its task cancelled it.
	superseded bool
	backfill   bool // a backfill's run (check o)
	cut        bool // its context ended under it (its lease ended, Stop)
}

type simWorld struct {
	rate   float64       // the share of calls that fail, lose their reply, or are slow (a third each)
	spread bool          // the nodes spread their tasks
	beat   time.Duration // their heartbeat interval
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
	store  *simStore
	// storedOps are the operators' changes of the stored schedules, in
	// time order (storedPlan).
	storedOps []storedOp
	// calm turns the faults off: the audits at the end read the store
	// without them.
	calm atomic.Bool
	// audited are the audits of the tasks at the end (check q).
	audited map[string]scheduling.Audit
	// calNames are the history's calendars, calOps their changes
	// (calendarPlan), calDocs their documents as the store holds them at
	// the end (check r).
	calNames []string
	calOps   []calOp
	calDocs  map[string]taskstate.Schedule
	// freeOf counts, by stored schedule, the instants free of faults and
	// contention that no calendar excludes; completedAt is the fire that
	// took the last run of a schedule with maxRuns (check s).
	freeOf      map[string]int
	completedAt map[string]time.Time
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
	w.spread = rng.IntN(2) == 0
	w.beat = []time.Duration{300 * time.Millisecond, time.Second}[rng.IntN(2)]
	periods := []time.Duration{400 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for i := range 1 + rng.IntN(3) {
		p := periods[rng.IntN(len(periods))]
		st := simTask{name: fmt.Sprint("t", i), lock: fmt.Sprint("L", rng.IntN(2)), period: p,
			ttl: p/2 + time.Duration(rng.Int64N(int64(5*p/2))), renew: rng.IntN(2) == 0, maxRun: 3 * p}
		if rng.IntN(2) == 0 {
			st.wait = time.Duration(rng.Int64N(int64(3 * p)))
		}
		if rng.IntN(2) == 0 {
			st.catchUp = time.Duration(1+rng.IntN(4)) * p
		}
		st.ttl = max(st.ttl, scheduling.MinRenewTTL)
		if rng.IntN(3) == 0 {
			st.jitter = time.Duration(rng.Int64N(int64(p / 2)))
		}
		w.tasks = append(w.tasks, st)
	}
	w.retrySpecs()
	w.overlapSpecs()
	w.calendarPlan()
	w.storedPlan()
	for i := range 3 + rng.IntN(3) {
		n := &simNode{name: fmt.Sprint("n", i), off: time.Duration(rng.Int64N(int64(2*maxSkew+1))) - maxSkew}
		for range rng.IntN(3) * min(1, int(w.rate*1000)) {
			at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan))))
			n.pauses = append(n.pauses, window{at, at.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))})
		}
		switch at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan - 8*time.Second)))); {
		case w.rate > 0 && rng.IntN(3) == 0:
			n.kills = append(n.kills, window{at, at.Add(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))})
		case i > 0 && rng.IntN(4) == 0:
			n.leaves = append(n.leaves, window{at, at.Add(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))})
		case i > 0 && rng.IntN(4) == 0:
			n.late = at
		}
		w.nodes = append(w.nodes, n)
	}
	if *simLog {
		for _, n := range w.nodes {
			t.Logf("node %s: clock %v, pauses %v, kills %v, leaves %v, late %v", n.name, n.off, n.pauses, n.kills, n.leaves, n.late)
		}
		t.Logf("tasks %+v, spread %v, heartbeat %v, fault rate %v", w.tasks, w.spread, w.beat, w.rate)
		for _, op := range w.storedOps {
			t.Logf("stored op at %v: %s %s %+v", op.at.Sub(w.start), op.kind, op.name, op.spec)
		}
		for _, op := range w.calOps {
			t.Logf("calendar op at %v: %s create %v windows %v", op.at.Sub(w.start), op.cal, op.create, op.windows)
		}
	}
	inner := locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock()))
	drv := schedulingtest.NewDriver(inner)
	drv.SetFaults(w.fault)
	drv.Observe(func(r schedulingtest.Result) {
		if r.Fault != (schedulingtest.Fault{}) {
			key := r.Key
			switch {
			case r.Op == schedulingtest.OpBeat || r.Op == schedulingtest.OpLeave:
				key = "*" // a node's view of its group: every task's ownership
			case r.Op == schedulingtest.OpAcquireClaim && r.Fault.Delay > 0:
				// One fire of a lock batch: the others, on other keys, wait
				// for it, and may find their lease ended (seed 234 history
				// 42).
				key = "*"
			}
			w.mu.Lock()
			w.faults = append(w.faults, faultAt{time.Now(), r.Node, key})
			w.mu.Unlock()
		}
	})

	inner2, err := taskstate.NewInProcess(taskstate.MaxHistory)
	if err != nil {
		t.Fatal(err)
	}
	w.store = &simStore{inner: inner2, w: w, paused: map[string][]pauseAt{}, polls: map[string][]time.Time{}}
	start := func(n *simNode) *scheduling.Scheduler {
		clock := schedulingtest.SkewedClock(clockwork.NewRealClock(), n.off)
		rec := w.recorder(n.name)
		logger := slog.New(slog.DiscardHandler)
		if *simLog {
			logger = slog.New(slog.NewTextHandler(simLogWriter{t, w.start}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", n.name)
		}
		s := scheduling.New(scheduling.Config{Driver: drv.Node(n.name, clock), Clock: clock, Node: n.name,
			Location: time.UTC, Listeners: []scheduling.Listener{rec}, Logger: logger,
			State: w.store.node(n.name), Spread: w.spread, Heartbeat: w.beat})
		var tasks []scheduling.Task
		for _, st := range w.tasks {
			opts := []scheduling.Option{scheduling.Name(st.name), scheduling.Cron("@every " + st.period.String()),
				scheduling.Lock(st.lock), scheduling.LockTTL(st.ttl), scheduling.LockWait(st.wait)}
			if st.renew {
				opts = append(opts, scheduling.Renew())
			}
			if st.catchUp > 0 {
				opts = append(opts, scheduling.CatchUp(st.catchUp))
			}
			if st.jitter > 0 {
				opts = append(opts, scheduling.Jitter(st.jitter))
			}
			if st.retries > 0 {
				opts = append(opts, scheduling.Retry(st.retries), scheduling.RetryBackoff(st.backoff))
				if st.maxBackoff > 0 {
					opts = append(opts, scheduling.RetryMaxBackoff(st.maxBackoff))
				}
			}
			if st.overlap != "" {
				opts = append(opts, scheduling.Overlap(st.overlap))
			}
			if st.maxConc > 0 {
				opts = append(opts, scheduling.MaxConcurrent(st.maxConc))
			}
			tasks = append(tasks, scheduling.NewTask(w.work(st), opts...))
		}
		if err := s.Add(tasks...); err != nil {
			t.Fatal(err)
		}
		if err := s.Handle(storedHandler, w.storedWork); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	running := map[string]*scheduling.Scheduler{}
	for _, n := range w.nodes {
		if n.late.IsZero() {
			running[n.name] = start(n)
		}
	}
	// Kills and restarts, and the operators' actions, in time order.
	type event struct {
		at      time.Time
		n       *simNode
		kill    bool
		leave   bool
		control controlOp // with n nil
		task    string
		stored  *storedOp // with n nil
		cal     *calOp    // with n nil
	}
	var events []event
	for _, n := range w.nodes {
		for _, k := range n.kills {
			events = append(events, event{at: k.from, n: n, kill: true}, event{at: k.to, n: n})
		}
		for _, l := range n.leaves {
			events = append(events, event{at: l.from, n: n, leave: true}, event{at: l.to, n: n})
		}
		if !n.late.IsZero() {
			events = append(events, event{at: n.late, n: n})
		}
	}
	leaving := map[string]chan struct{}{} // closed when the node's graceful Stop returned
	var acting sync.WaitGroup             // the operators' calls in flight
	// Requests, and pauses of 1 to 4 s, in half the histories.
	for range rng.IntN(2) * rng.IntN(8) {
		at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan - cooldown))))
		task := w.tasks[rng.IntN(len(w.tasks))].name
		if rng.IntN(2) == 0 {
			events = append(events, event{at: at, control: opRunNow, task: task})
			continue
		}
		resume := at.Add(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		events = append(events, event{at: at, control: opPause, task: task}, event{at: resume, control: opResume, task: task})
	}
	// A backfill of a locked task in two histories of three.
	if locked := w.locked(); len(locked) > 0 && rng.IntN(3) > 0 {
		at := w.start.Add(time.Duration(rng.Int64N(int64(simSpan - cooldown))))
		events = append(events, event{at: at, control: opBackfill, task: locked[rng.IntN(len(locked))]})
	}
	for i := range w.storedOps {
		events = append(events, event{at: w.storedOps[i].at, stored: &w.storedOps[i]})
	}
	for i := range w.calOps {
		events = append(events, event{at: w.calOps[i].at, cal: &w.calOps[i]})
	}
	if task, at := w.recentBackfill(); task != "" {
		events = append(events, event{at: at, control: opRecentBackfill, task: task})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	for _, ev := range events {
		time.Sleep(time.Until(ev.at))
		if ev.cal != nil {
			actors := w.calActors(running, *ev.cal)
			acting.Add(1)
			go func() { defer acting.Done(); w.actCalendar(actors, *ev.cal) }()
			continue
		}
		if ev.stored != nil {
			s := w.storedActor(running)
			acting.Add(1)
			go func() { defer acting.Done(); w.actStored(s, *ev.stored) }()
			continue
		}
		if ev.control != 0 {
			// On a goroutine: a node paused holds its store calls.
			s := w.actor(running)
			acting.Add(1)
			go func() { defer acting.Done(); w.act(s, ev.control, ev.task) }()
			continue
		}
		switch {
		case ev.kill:
			w.mu.Lock()
			w.dead[ev.n.name] = true
			w.mu.Unlock()
			cut, cancel := context.WithCancel(context.Background())
			cancel()
			_ = running[ev.n.name].Stop(cut) // a dead node releases nothing: its calls fail
		case ev.leave:
			s, done := running[ev.n.name], make(chan struct{})
			delete(running, ev.n.name)
			leaving[ev.n.name] = done
			go func() {
				defer close(done)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := s.Stop(ctx); err != nil && !errors.Is(err, scheduling.ErrStopTimeout) {
					t.Errorf("Stop: %v", err)
				}
			}()
		default:
			if done := leaving[ev.n.name]; done != nil {
				<-done // its Stop waited for its runs: it is away until now
				delete(leaving, ev.n.name)
				l := &ev.n.leaves[len(ev.n.leaves)-1]
				l.to = time.Now()
			}
			if !ev.n.late.IsZero() && ev.at.Equal(ev.n.late) {
				ev.n.late = time.Now()
			}
			// A graceful Stop waited for above delays the events after it:
			// a dead node is dead until it restarts.
			for i := range ev.n.kills {
				if ev.n.kills[i].to.Equal(ev.at) {
					ev.n.kills[i].to = time.Now()
				}
			}
			w.mu.Lock()
			w.dead[ev.n.name] = false
			w.mu.Unlock()
			running[ev.n.name] = start(ev.n)
		}
	}
	time.Sleep(time.Until(w.start.Add(simSpan)))
	acting.Wait()
	for _, s := range running {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := s.Stop(ctx); err != nil && !errors.Is(err, scheduling.ErrStopTimeout) {
			t.Errorf("Stop: %v", err)
		}
		cancel()
	}
	synctest.Wait()
	// The audits, through a node up since the start, once every instant
	// of the history is past their horizon.
	w.calm.Store(true)
	time.Sleep(2 * time.Minute)
	for _, n := range w.nodes {
		if len(n.kills) == 0 && len(n.leaves) == 0 && n.late.IsZero() {
			w.audited = w.audits(t, running[n.name])
			break
		}
	}
	return w.check(t)
}

// simLogWriter writes log lines to the test's log, with the simulated time
// since the history's start.
type simLogWriter struct {
	t     *testing.T
	start time.Time
}

func (l simLogWriter) Write(p []byte) (int, error) {
	l.t.Logf("%v %s", time.Since(l.start), strings.TrimSpace(string(p)))
	return len(p), nil
}

// controlOp is an operator's action in a history.
type controlOp int

const (
	opPause controlOp = 1 + iota
	opResume
	opRunNow
	opBackfill
	opRecentBackfill
)

// actor returns the first live node, through which an operator acts, or
// nil.
func (w *simWorld) actor(running map[string]*scheduling.Scheduler) *scheduling.Scheduler {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.nodes {
		if s := running[n.name]; s != nil && !w.dead[n.name] {
			return s
		}
	}
	return nil
}

// act does op on task through s, as an operator would through any node's
// API; its store calls fail as any other's may.
func (w *simWorld) act(s *scheduling.Scheduler, op controlOp, task string) {
	if s == nil {
		return
	}
	ctx := context.Background()
	switch op {
	case opPause:
		_ = s.Pause(ctx, task)
	case opResume:
		_ = s.Resume(ctx, task)
	case opRunNow:
		_ = s.RunNow(ctx, task)
	case opBackfill:
		// Eight periods before the history and its catch-up window:
		// instants that no fire of the history reaches. (A catch-up
		// fire's run that the kept history no longer shows when the
		// backfill starts would be run again: the limit Backfill states.)
		st := w.taskOf(task)
		to := w.start.Add(-st.catchUp - st.period)
		if st.overlap == scheduling.OverlapAllow {
			// An allow task's backfill reaches only instants its lease and
			// a minute before now (Backfill refuses the others).
			to = to.Add(-2 * time.Minute)
		}
		_, _ = s.Backfill(ctx, task, to.Add(-8*st.period), to, scheduling.BackfillOptions{})
	case opRecentBackfill:
		// The last eight seconds, to a second ago: instants that ran,
		// were skipped, or were missed (check o).
		now := time.Now()
		_, _ = s.Backfill(ctx, task, now.Add(-8*time.Second), now.Add(-time.Second), scheduling.BackfillOptions{})
	}
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
	if w.calm.Load() {
		return schedulingtest.Fault{}
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

// retrySpecs makes some of the tasks, a third on average, retry: Retry(1
// to 3), a backoff of a quarter to one period (so that a retry runs within
// a few periods of its failure: at the next request poll after its
// backoff), in half of them capped at twice that. A retrying task fails
// 40% of its runs, any other 15% (which it must never retry). The draws are
// rolls, not the history's rng, so that the specs, run lengths and faults
// the rng draws stay those of the history before retries were simulated.
func (w *simWorld) retrySpecs() {
	some := false
	for i := range w.tasks {
		st := &w.tasks[i]
		st.failRate = 0.15
		if w.roll("retry", st.name) < 1.0/3 {
			some = true
			w.retrying(st)
		}
	}
	// So that about three histories in four retry, whatever their number
	// of tasks.
	if !some && w.roll("retry any") < 0.5 {
		w.retrying(&w.tasks[int(w.roll("retry which")*float64(len(w.tasks)))])
	}
}

// overlapSpecs gives some of the tasks an overlap policy, a fifth each:
// buffer-one, cancel-previous, or allow with MaxConcurrent 2 or 3, the
// last on a lock key of its own and without a lock wait (both of which
// allow requires). Their runs last 0 to 3 periods, as every task's, so
// that most outlast the period and the policies act. The draws are rolls,
// as retrySpecs' are.
func (w *simWorld) overlapSpecs() {
	for i := range w.tasks {
		st := &w.tasks[i]
		switch r := w.roll("overlap", st.name); {
		case r < 0.2:
			st.overlap = scheduling.OverlapBufferOne
		case r < 0.4:
			st.overlap = scheduling.OverlapCancelPrevious
		case r < 0.6:
			st.overlap = scheduling.OverlapAllow
			st.maxConc = 2 + int(w.roll("maxConcurrent", st.name)*2)
			st.lock = "L" + st.name // "Lt0": no other task's key, nor a slot key of one
			st.wait = 0
		}
	}
}

func (w *simWorld) retrying(st *simTask) {
	st.retries = 1 + int(w.roll("retries", st.name)*3)
	st.backoff = st.period/4 + time.Duration(w.roll("backoff", st.name)*float64(3*st.period/4))
	if w.roll("cap", st.name) < 0.5 {
		st.maxBackoff = 2 * st.backoff
	}
	st.failRate = 0.4
}

// work returns the task of st: it runs for a length fixed by the fire,
// attempt and node, 0 to 3 periods, or until its context ends, and records
// its hold. It then fails at random (a roll of the fire and attempt, the
// same on every node): returns an error, or, one time in four, panics. A
// run of a task that retries and whose context ended under it returns the
// context's cause: it was cut (by a lost lease, by Stop), and is retried;
// so does a run that a later fire superseded (cancel-previous), which is
// recorded as cancelled, and not retried. It records the key of its lease:
// with allow, its slot.
func (w *simWorld) work(st simTask) func(context.Context) error {
	return func(ctx context.Context) error {
		run, _ := scheduling.RunFromContext(ctx)
		slot := ""
		if l, ok := locks.FromContext(ctx); ok {
			slot = l.Key()
		}
		from := time.Now()
		parts := []any{"run", st.name, run.Fire.UnixNano(), run.Node}
		if run.Attempt > 1 {
			parts = append(parts, run.Attempt) // a first attempt's length as before retries were simulated
		}
		d := time.Duration(w.roll(parts...) * float64(st.maxRun))
		cut := false
		select {
		case <-time.After(d):
		case <-ctx.Done():
			cut = true
		}
		h := interval{task: st.name, node: run.Node, fire: run.Fire, manual: run.Manual, attempt: run.Attempt, from: from,
			slot: slot, superseded: cut && errors.Is(context.Cause(ctx), scheduling.ErrSuperseded), backfill: run.Backfill, cut: cut}
		fail := w.roll("fail", st.name, run.Fire.UnixNano(), run.Attempt)
		switch {
		case cut && (st.retries > 0 || h.superseded):
			// A superseded run returns its context's cause, as a task
			// should: it is then recorded as cancelled, and not retried.
			h.failed = "cut"
		case fail < st.failRate/4:
			h.failed = "panic"
		case fail < st.failRate:
			h.failed = "error"
		}
		h.to = time.Now()
		w.mu.Lock()
		w.held = append(w.held, h)
		w.mu.Unlock()
		switch h.failed {
		case "cut":
			return fmt.Errorf("simulated run cut: %w", context.Cause(ctx))
		case "panic":
			panic(fmt.Sprintf("simulated panic: %s fire %v attempt %d", st.name, run.Fire, run.Attempt))
		case "error":
			return fmt.Errorf("simulated failure: %s fire %v attempt %d", st.name, run.Fire, run.Attempt)
		}
		return nil
	}
}

func (w *simWorld) check(t *testing.T) stats {
	var recs []*schedulingtest.Recorder
	for _, r := range w.recs {
		recs = append(recs, r)
	}
	// (a), over the first attempts: a retry runs its fire again (check g
	// covers every attempt).
	var firsts []*schedulingtest.Recorder
	for _, r := range recs {
		f := &schedulingtest.Recorder{}
		for _, e := range r.Started() {
			if e.Attempt <= 1 && !e.Backfill { // a backfill's instants: check (o)
				f.BeforeRun(context.Background(), e)
			}
		}
		firsts = append(firsts, f)
	}
	if err := schedulingtest.AtMostOnce(firsts...); err != nil {
		t.Error(err)
	}
	// (b), and (i): every run's hold, retries included (work records each
	// attempt's).
	lockOf := map[string]string{}
	for _, st := range w.tasks {
		lockOf[st.name] = st.lock
	}
	w.mu.Lock()
	held := slices.Clone(w.held)
	w.mu.Unlock()
	v := w.overlapView(t)
	// With allow, the key of one run is a slot of the task's lock: no two
	// runs on one slot overlap, and (n) bounds the runs of the key.
	byLock := map[string][]interval{}
	for _, h := range held {
		if w.isStored(h.task) {
			byLock[h.slot] = append(byLock[h.slot], h) // its spec's lock: check (p)
			continue
		}
		st := w.taskOf(h.task)
		key := st.lock
		switch {
		case st.overlap == scheduling.OverlapAllow:
			key = h.slot
			if !isSlot(st, h.slot) {
				t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s under lease key %q, no slot of %s's %d",
					w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.slot, st.lock, st.maxConc)
			}
		case h.slot != st.lock:
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s under lease key %q, not its lock %s",
				w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.slot, st.lock)
		}
		byLock[key] = append(byLock[key], h)
	}
	for lock, hs := range byLock {
		slices.SortFunc(hs, func(a, b interval) int { return a.from.Compare(b.from) })
		for i := 1; i < len(hs); i++ {
			for j := i - 1; j >= 0 && j >= i-8; j-- {
				if hs[j].to.After(hs[i].from) {
					t.Errorf("seed %d history %d: lock %s held by two runs at once: %s fire %v attempt %d on %s [%v, %v] and %s fire %v attempt %d on %s [%v, %v]",
						w.seed, w.hist, lock, hs[j].task, hs[j].fire.Sub(w.start), hs[j].attempt, hs[j].node, hs[j].from.Sub(w.start), hs[j].to.Sub(w.start),
						hs[i].task, hs[i].fire.Sub(w.start), hs[i].attempt, hs[i].node, hs[i].from.Sub(w.start), hs[i].to.Sub(w.start))
				}
			}
		}
	}
	w.checkPaused(t, lockOf, held, v)
	w.checkRequests(t)
	var st stats
	st.retries = w.checkRetries(t, held)
	w.checkOverlap(t, held, v, &st)
	w.checkBackfills(t, recs, &st)
	w.checkRecentBackfills(t, recs, held)
	w.loadCalendars(t)
	w.prepareMaxRuns()
	w.checkStored(t, held, recs, &st)
	w.checkCalendars(t, held, &st)
	w.checkMaxRuns(t, held, &st)
	w.checkAudits(t, w.audited, recs, &st)
	// (c)
	type report struct {
		node    string
		outcome scheduling.Outcome
	}
	reports := map[schedulingtest.FireKey][]report{} // of first attempts: a retry is no report of its fire
	for _, r := range recs {
		for _, e := range r.Started() {
			if e.Attempt > 1 || e.Backfill {
				continue
			}
			k := schedulingtest.Key(e.Task, e.Fire)
			reports[k] = append(reports[k], report{e.Node, "run"})
		}
		for _, e := range r.Skips() {
			if e.Attempt > 1 || e.Backfill {
				continue
			}
			k := schedulingtest.Key(e.Task, e.Fire)
			reports[k] = append(reports[k], report{e.Node, e.Outcome})
		}
	}
	for _, task := range w.tasks {
		for f := w.start.Add(warmup).Truncate(task.period); f.Before(w.start.Add(simSpan - cooldown)); f = f.Add(task.period) {
			k := schedulingtest.Key(task.name, f)
			rs := reports[k]
			st.fires++
			ran, contended := 0, false
			seen := map[string]int{} // reports other than "not owner", which may precede a takeover's
			owned := map[string]bool{}
			for _, r := range rs {
				if r.outcome == scheduling.OutcomeNotOwner {
					owned[r.node] = true
				} else {
					seen[r.node]++
				}
				switch r.outcome {
				case "run":
					ran++
				case scheduling.OutcomeLockHeld, scheduling.OutcomeRunning, scheduling.OutcomeLockPending, scheduling.OutcomePaused, scheduling.OutcomeRetrying,
					scheduling.OutcomeBuffered, scheduling.OutcomeBufferFull:
					// Held by another run (a manual one, a retry, say), paused,
					// retrying an earlier fire, waiting for the run going, or
					// skipped while another fire waits.
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
				if w.down(n, span) || w.away(n, span) {
					continue
				}
				// A fire that waited is also told to listeners where it was
				// taken from the store (run, paused, lock failed): more than
				// once on a node.
				if seen[n.name] > 1 && !v.waited[k] || seen[n.name] == 0 && !owned[n.name] {
					t.Errorf("%s fire %v: node %s reported it %d times, want once (and a \"not owner\" before a takeover's) (reports %v)",
						task.name, f.Sub(w.start), n.name, seen[n.name], rs)
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
		for _, l := range n.leaves {
			// Its Stop, which ends at its handover's end the waits for the
			// lock of fires it claimed.
			if (window{l.from, l.from.Add(2 * w.beat)}).overlaps(span.from, span.to) {
				return true
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.faults {
		if !f.at.Before(span.from) && f.at.Before(span.to) &&
			(f.key == task.lock || f.key == "*" || f.key == "@"+task.name || strings.HasPrefix(f.key, task.lock+"#")) {
			return true
		}
	}
	return false
}

// away reports whether n was stopped gracefully, or not yet started, at
// some time in span: it need not report the fire, which the others run (the
// stop itself, which ends a wait for the lock of a fire claimed, touches
// the fire).
func (w *simWorld) away(n *simNode, span window) bool {
	for _, l := range n.leaves {
		if l.overlaps(span.from, span.to) {
			return true
		}
	}
	return !n.late.IsZero() && n.late.After(span.from)
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

// simStore is the shared task state of a history: an in-process store
// whose calls, made by one node each, fail, lose their reply or wait out
// the node's pause, as the driver's do, and whose effects it logs in call
// order.
type simStore struct {
	inner *taskstate.InProcess
	w     *simWorld

	mu     sync.Mutex // protects the fields below
	seq    int
	paused map[string][]pauseAt // by task, in call order
	asked  []storeCall          // requests that took effect
	takes  []storeCall          // takes that got a request
	// retries are the takes that got a retry (attempt 1: a fire that
	// waited for the run going).
	retries []retryTake
	// waits are the records that left a fire waiting (a retry of attempt
	// 1) and took effect.
	waits []waitAt
	polls map[string][]time.Time // the successful polls, by node
	left  []leftRetry            // the records that left a retry, and took effect
	// schedWrites are the changes of the stored schedules that took
	// effect (the calendars' documents' too).
	schedWrites []schedWrite
	runTakes    []runTake // the TakeRuns that took effect (check s)

	// retryMu serializes the calls that change the pending retries
	// (Record, TakeRetry), so that a Record sees what was pending when it
	// took effect.
	retryMu sync.Mutex
}

// leftRetry is a record of node's run of task that left retry pending.
type leftRetry struct {
	node, task string
	run        taskstate.Run
	retry      taskstate.Retry
}

// waitAt is a record that left a fire waiting for the run going: its
// order, true time, task, node and fire, and the fire of another record
// that still waited, untaken, when it took effect (zero for none).
type waitAt struct {
	seq        int
	at         time.Time
	task, node string
	fire       time.Time
	pending    time.Time
}

// retryTake is a take of a retry: its order, true time, task, node and the
// retry.
type retryTake struct {
	seq   int
	at    time.Time
	task  string
	node  string
	retry taskstate.Retry
}

type pauseAt struct {
	at     time.Time
	paused bool
}

// storeCall is a request or a take: its order, true time, task, node and
// the request's instant.
type storeCall struct {
	seq     int
	at      time.Time
	task    string
	node    string
	instant time.Time
}

// node returns the store as node sees it.
func (s *simStore) node(name string) taskstate.Store { return &nodeStore{s: s, node: name} }

func (s *simStore) log(f func(seq int)) {
	s.mu.Lock()
	s.seq++
	f(s.seq)
	s.mu.Unlock()
}

type nodeStore struct {
	s    *simStore
	node string
}

// call runs op under the node's faults: an error before it, a lost reply
// after it (it took effect), a pause of the node (it waits), or none.
func (n *nodeStore) call(op, task string, do func() error) error {
	w := n.s.w
	now := time.Now()
	w.mu.Lock()
	dead := w.dead[n.node]
	w.mu.Unlock()
	if dead {
		return errors.New("node is dead")
	}
	if w.calm.Load() {
		return do()
	}
	for _, sn := range w.nodes {
		if sn.name != n.node {
			continue
		}
		for _, p := range sn.pauses {
			if !now.Before(p.from) && now.Before(p.to) {
				time.Sleep(p.to.Sub(now))
			}
		}
	}
	r := w.roll("store", n.node, op, task, now.UnixNano())
	if r < 2*w.rate/3 {
		key := ""
		switch {
		case op == "Poll" || op == "Schedules":
			key = "poll" // no task's: checks (m) and (p) read it
		case task != "":
			key = "@" + task // as its fire claims
		}
		w.mu.Lock()
		w.faults = append(w.faults, faultAt{now, n.node, key})
		w.mu.Unlock()
	}
	switch {
	case r < w.rate/3:
		return errors.New("connection reset")
	case r < 2*w.rate/3:
		if err := do(); err != nil {
			return err
		}
		return errors.New("reply lost")
	}
	return do()
}

func (n *nodeStore) SetPaused(ctx context.Context, task string, p taskstate.Pause) error {
	return n.call("SetPaused", task, func() error {
		if err := n.s.inner.SetPaused(ctx, task, p); err != nil {
			return err
		}
		n.s.log(func(int) { n.s.paused[task] = append(n.s.paused[task], pauseAt{time.Now(), p.Paused}) })
		return nil
	})
}

func (n *nodeStore) Paused(ctx context.Context, task string) (p taskstate.Pause, err error) {
	err = n.call("Paused", task, func() error { p, err = n.s.inner.Paused(ctx, task); return err })
	return p, err
}

func (n *nodeStore) RequestRun(ctx context.Context, task string, at time.Time) error {
	return n.call("RequestRun", task, func() error {
		if err := n.s.inner.RequestRun(ctx, task, at); err != nil {
			return err
		}
		n.s.log(func(seq int) { n.s.asked = append(n.s.asked, storeCall{seq, time.Now(), task, n.node, at}) })
		return nil
	})
}

func (n *nodeStore) Poll(ctx context.Context) (p taskstate.Poll, err error) {
	err = n.call("Poll", "", func() error { p, err = n.s.inner.Poll(ctx); return err })
	if err == nil {
		n.s.log(func(int) { n.s.polls[n.node] = append(n.s.polls[n.node], time.Now()) })
	}
	return p, err
}

func (n *nodeStore) CreateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return n.call("CreateSchedule", sc.Name, func() error {
		if err := n.s.inner.CreateSchedule(ctx, sc); err != nil {
			return err
		}
		n.s.wrote(n.node, sc, false)
		return nil
	})
}

func (n *nodeStore) UpdateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return n.call("UpdateSchedule", sc.Name, func() error {
		if err := n.s.inner.UpdateSchedule(ctx, sc); err != nil {
			return err
		}
		n.s.wrote(n.node, sc, false)
		return nil
	})
}

func (n *nodeStore) DeleteSchedule(ctx context.Context, name string) (ok bool, err error) {
	err = n.call("DeleteSchedule", name, func() error {
		if ok, err = n.s.inner.DeleteSchedule(ctx, name); ok && err == nil {
			n.s.wrote(n.node, taskstate.Schedule{Name: name}, true)
		}
		return err
	})
	return ok, err
}

// wrote logs a change of a stored schedule that took effect (check p).
func (s *simStore) wrote(node string, sc taskstate.Schedule, deleted bool) {
	s.log(func(seq int) { s.schedWrites = append(s.schedWrites, schedWrite{seq, time.Now(), node, sc, deleted}) })
}

func (n *nodeStore) Schedules(ctx context.Context) (scs []taskstate.Schedule, err error) {
	err = n.call("Schedules", "", func() error { scs, err = n.s.inner.Schedules(ctx); return err })
	return scs, err
}

func (n *nodeStore) StartBackfill(ctx context.Context, b taskstate.Backfill, ran []time.Time) error {
	return n.call("StartBackfill", b.Task, func() error { return n.s.inner.StartBackfill(ctx, b, ran) })
}

func (n *nodeStore) TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (t taskstate.BackfillTake, err error) {
	err = n.call("TakeBackfill", task, func() error { t, err = n.s.inner.TakeBackfill(ctx, task, id, node, fire); return err })
	return t, err
}

func (n *nodeStore) EndBackfill(ctx context.Context, task, id, state string) (ok bool, err error) {
	err = n.call("EndBackfill", task, func() error { ok, err = n.s.inner.EndBackfill(ctx, task, id, state); return err })
	return ok, err
}

func (n *nodeStore) TakeRequest(ctx context.Context, task, node string) (at time.Time, ok bool, err error) {
	err = n.call("TakeRequest", task, func() error {
		at, ok, err = n.s.inner.TakeRequest(ctx, task, node)
		if ok {
			n.s.log(func(seq int) { n.s.takes = append(n.s.takes, storeCall{seq, time.Now(), task, n.node, at}) })
		}
		return err
	})
	return at, ok, err
}

func (n *nodeStore) TakeRetry(ctx context.Context, task, node string, r taskstate.Retry) (ok bool, err error) {
	err = n.call("TakeRetry", task, func() error {
		n.s.retryMu.Lock()
		defer n.s.retryMu.Unlock()
		ok, err = n.s.inner.TakeRetry(ctx, task, node, r)
		if ok {
			n.s.log(func(seq int) { n.s.retries = append(n.s.retries, retryTake{seq, time.Now(), task, n.node, r}) })
		}
		return err
	})
	return ok, err
}

// LeaveWaiting logs, when the call left its fire waiting (not when it is
// the call sent again), the fire of another that waited, untaken, then
// (check l).
func (n *nodeStore) LeaveWaiting(ctx context.Context, task string, r taskstate.Retry) (ok bool, err error) {
	err = n.call("LeaveWaiting", task, func() error {
		n.s.retryMu.Lock()
		defer n.s.retryMu.Unlock()
		p, err := n.s.inner.Poll(ctx)
		if err != nil {
			return err
		}
		before, waited := p.Retries[task]
		if ok, err = n.s.inner.LeaveWaiting(ctx, task, r); !ok || err != nil || (waited && before.Fire.Equal(r.Fire) && before.Attempt == r.Attempt) {
			return err
		}
		wa := waitAt{at: time.Now(), task: task, node: n.node, fire: r.Fire}
		if waited && before.Attempt == 1 {
			wa.pending = before.Fire
		}
		n.s.log(func(seq int) { wa.seq = seq; n.s.waits = append(n.s.waits, wa) })
		return nil
	})
	return ok, err
}

// TakeRun passes the call on under the node's faults, and logs the takes
// that took effect (check s).
func (n *nodeStore) TakeRun(ctx context.Context, task string, fire time.Time, max int) (k int, err error) {
	err = n.call("TakeRun", task, func() error {
		if k, err = n.s.inner.TakeRun(ctx, task, fire, max); err == nil {
			n.s.log(func(int) { n.s.runTakes = append(n.s.runTakes, runTake{time.Now(), n.node, task, fire, k}) })
		}
		return err
	})
	return k, err
}

// AppendEvent passes the call on under the node's faults (the scheduler
// appends none yet).
func (n *nodeStore) AppendEvent(ctx context.Context, e taskstate.Event) (got taskstate.Event, err error) {
	err = n.call("AppendEvent", e.Target, func() error {
		got, err = n.s.inner.AppendEvent(ctx, e)
		return err
	})
	return got, err
}

// Events passes the call on under the node's faults.
func (n *nodeStore) Events(ctx context.Context, after int64, limit int) (es []taskstate.Event, err error) {
	err = n.call("Events", "", func() error {
		es, err = n.s.inner.Events(ctx, after, limit)
		return err
	})
	return es, err
}

func (n *nodeStore) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	task := ""
	if len(runs) > 0 {
		task = runs[0].Task
	}
	err := n.call("Record", task, func() error { return n.s.record(ctx, n.node, runs) })
	if err != nil && len(runs) > 1 {
		// The fault touched every task of the batch, as call logged it
		// for the first (checks o and q read it).
		now := time.Now()
		n.s.w.mu.Lock()
		for _, tr := range runs[1:] {
			n.s.w.faults = append(n.s.w.faults, faultAt{now, n.node, "@" + tr.Task})
		}
		n.s.w.mu.Unlock()
	}
	return err
}

// record is a node's Record of runs. Of each run that leaves its fire
// waiting (a retry of attempt 1) it logs when it took effect and the fire
// of another that waited, untaken, then: the store keeps one pending run
// per task, so that one is dropped (check l). It logs the runs that left
// a retry (check m).
func (s *simStore) record(ctx context.Context, node string, runs []taskstate.TaskRun) error {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	var pending map[string]taskstate.Retry // the untaken pending runs, as Record changes them
	if slices.ContainsFunc(runs, func(tr taskstate.TaskRun) bool { return tr.Retry != nil && tr.Retry.Attempt == 1 }) {
		p, err := s.inner.Poll(ctx)
		if err != nil {
			return err
		}
		pending = p.Retries
		if pending == nil {
			pending = map[string]taskstate.Retry{}
		}
	}
	if err := s.inner.Record(ctx, runs...); err != nil {
		return err
	}
	now := time.Now()
	for _, tr := range runs {
		r := tr.Retry
		if r == nil {
			continue
		}
		if r.Attempt > 1 {
			s.log(func(int) { s.left = append(s.left, leftRetry{node, tr.Task, tr.Run, *r}) })
		}
		if pending == nil {
			continue
		}
		p, ok := pending[tr.Task]
		if r.Attempt == 1 {
			wa := waitAt{at: now, task: tr.Task, node: node, fire: r.Fire}
			if ok && p.Attempt == 1 && !p.Fire.Equal(r.Fire) {
				wa.pending = p.Fire
			}
			s.log(func(seq int) { wa.seq = seq; s.waits = append(s.waits, wa) })
		}
		if !ok || taskstate.RetryLater(*r, p) {
			pending[tr.Task] = *r
		}
	}
	return nil
}

func (n *nodeStore) Runs(ctx context.Context, task string, limit int) (r []taskstate.Run, err error) {
	err = n.call("Runs", task, func() error { r, err = n.s.inner.Runs(ctx, task, limit); return err })
	return r, err
}

// pausedAround reports whether task was paused from before from until
// after to, in true time.
func (s *simStore) pausedAround(task string, from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	paused := false
	for _, p := range s.paused[task] {
		switch {
		case !p.at.After(from):
			paused = p.paused
		case p.at.Before(to):
			return false // it changed within
		}
	}
	return paused
}

// checkPaused is check (e): a scheduled or catch-up run of a fire whose
// instant (to its jittered start), on every node's clock, fell while its
// task was paused, and had been for one request poll.
func (w *simWorld) checkPaused(t *testing.T, lockOf map[string]string, held []interval, v *overlapView) {
	for _, r := range w.recs {
		for _, e := range r.Started() {
			if e.Attempt > 1 || e.Backfill {
				continue // a retry meets the pause rule when it starts: below; a backfill's run, in check (o)
			}
			var st simTask
			for _, x := range w.tasks {
				if x.name == e.Task {
					st = x
				}
			}
			// A jittered fire meets the pause rule at its shifted start.
			if e.Manual || !w.store.pausedAround(e.Task, e.Fire.Add(-2*maxSkew-scheduling.DefaultRequestPoll), e.Fire.Add(maxSkew+st.jitter)) {
				continue
			}
			span := window{e.Fire.Add(-2*maxSkew - time.Second), e.Fire.Add(2*maxSkew + time.Second)}
			if !w.touched(st, span) {
				t.Errorf("%s fire %v ran on %s (lock %s) while the task was paused on every node", e.Task, e.Fire.Sub(w.start), e.Node, lockOf[e.Task])
			}
		}
	}
	// A retry, and a fire that waited for the run going, starts from a
	// poll, which reads the pause generation first: one that started while
	// its task had been paused for a request poll (and the skew) ran
	// paused, unless a fault touched it.
	for _, h := range held {
		if h.attempt <= 1 && !v.fromStore(h) || !w.store.pausedAround(h.task, h.from.Add(-2*maxSkew-scheduling.DefaultRequestPoll), h.from) {
			continue
		}
		st := w.taskOf(h.task)
		if !w.touched(st, window{h.from.Add(-2*maxSkew - 2*time.Second), h.from.Add(time.Second)}) {
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s at %v (lock %s) while the task was paused on every node",
				w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), lockOf[h.task])
		}
	}
}

// taskOf returns the spec of the task named name.
func (w *simWorld) taskOf(name string) simTask {
	for _, st := range w.tasks {
		if st.name == name {
			return st
		}
	}
	return simTask{}
}

// locked returns the names of the locked tasks that a backfill may take
// (not cancel-previous, which a backfill refuses).
func (w *simWorld) locked() []string {
	var out []string
	for _, st := range w.tasks {
		if st.lock != "" && st.overlap != scheduling.OverlapCancelPrevious {
			out = append(out, st.name)
		}
	}
	return out
}

// checkBackfills is check (o): each instant of a backfill runs at most
// once across the cluster, the instants of a task that does not allow
// runs side by side start in order, and every backfill run's instant is
// one of its schedule's before the history.
// offset returns the skew of the clock of the node named name.
func (w *simWorld) offset(name string) time.Duration {
	for _, n := range w.nodes {
		if n.name == name {
			return n.off
		}
	}
	panic("simulation: no node " + name)
}

func (w *simWorld) checkBackfills(t *testing.T, recs []*schedulingtest.Recorder, st *stats) {
	type run struct {
		fire, start time.Time
		node        string
	}
	byTask := map[string][]run{}
	seen := map[string]string{}
	for _, r := range recs {
		for _, e := range r.Started() {
			if !e.Backfill {
				continue
			}
			st.backfilled++
			id := e.Task + "@" + e.Fire.String()
			if prev, ok := seen[id]; ok {
				t.Errorf("seed %d history %d: (o) backfill instant %v of %s ran twice, on %s and %s", w.seed, w.hist,
					e.Fire.Sub(w.start), e.Task, prev, e.Node)
			}
			seen[id] = e.Node
			if !e.Fire.Before(e.Start.Add(2*maxSkew)) || e.Token == 0 || e.Attempt != 1 {
				t.Errorf("seed %d history %d: (o) backfill run %+v: want a past instant, under a lease, attempt 1",
					w.seed, w.hist, e)
			}
			// Each backfill's instants in order: the one before the
			// history, and the one over recent instants.
			which := e.Task
			if !e.Fire.Before(w.start) {
				which += " (recent)"
				st.recentBackfilled++
			}
			// By the shared clock: starts read on two nodes' clocks, a
			// few ms apart, can invert by their skew (seed
			// 8046802561497256215 history 85: instants 23s and 24s on
			// two nodes).
			byTask[which] = append(byTask[which], run{e.Fire, e.Start.Add(-w.offset(e.Node)), e.Node})
		}
	}
	for task, runs := range byTask {
		if w.taskOf(strings.TrimSuffix(task, " (recent)")).overlap == scheduling.OverlapAllow {
			continue
		}
		slices.SortFunc(runs, func(a, b run) int { return a.start.Compare(b.start) })
		for i := 1; i < len(runs); i++ {
			if !runs[i].fire.After(runs[i-1].fire) {
				t.Errorf("seed %d history %d: (o) backfill of %s ran instant %v on %s after instant %v on %s", w.seed, w.hist, task,
					runs[i].fire.Sub(w.start), runs[i].node, runs[i-1].fire.Sub(w.start), runs[i-1].node)
			}
		}
	}
}

// checkRequests is check (f).
func (w *simWorld) checkRequests(t *testing.T) {
	ctx := context.Background()
	s := w.store
	s.mu.Lock()
	asked, takes := slices.Clone(s.asked), slices.Clone(s.takes)
	s.mu.Unlock()
	p, err := s.inner.Poll(ctx)
	pending := p.Requests
	if err != nil {
		t.Fatal(err)
	}
	history := map[string][]taskstate.Run{}
	for _, st := range w.allTasks() {
		if history[st.name], err = s.inner.Runs(ctx, st.name, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range takes {
		if !slices.ContainsFunc(history[tk.task], func(r taskstate.Run) bool {
			return r.Manual && r.Fire.Equal(tk.instant) && r.Node == tk.node
		}) {
			t.Errorf("%s: the request of %v taken by %s at %v is not in the shared history", tk.task, tk.instant.Sub(w.start), tk.node, tk.at.Sub(w.start))
		}
	}
	// A request made while another is pending is merged into it: the next
	// take of its task serves it.
	for _, a := range asked {
		if slices.ContainsFunc(takes, func(tk storeCall) bool { return tk.task == a.task && tk.seq > a.seq }) {
			continue
		}
		if _, ok := pending[a.task]; !ok {
			t.Errorf("%s: the request made at %v by %s was neither taken nor pending at the end", a.task, a.at.Sub(w.start), a.node)
		}
	}
	for _, r := range w.recs {
		for _, e := range r.Started() {
			if e.Manual && e.Attempt <= 1 && !slices.ContainsFunc(takes, func(tk storeCall) bool {
				return tk.task == e.Task && tk.node == e.Node && tk.instant.Equal(e.Fire)
			}) {
				t.Errorf("%s: manual run of %v on %s was no take of a request", e.Task, e.Fire.Sub(w.start), e.Node)
			}
		}
	}
}

// attemptKey names one attempt of one fire: a run's identity.
type attemptKey struct {
	fire    schedulingtest.FireKey
	attempt int
}

func (h interval) key() attemptKey {
	return attemptKey{schedulingtest.Key(h.task, h.fire), max(h.attempt, 1)}
}

// runsOf describes runs, in simulated time since the history's start.
func (w *simWorld) runsOf(hs []interval) string {
	var b strings.Builder
	for i, h := range hs {
		o := h.failed
		if o == "" {
			o = "ok"
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s fire %v attempt %d on %s [%v, %v] %s", h.task, h.fire.Sub(w.start), h.attempt, h.node,
			h.from.Sub(w.start), h.to.Sub(w.start), o)
	}
	return "[" + b.String() + "]"
}

// takesOf describes takes of retries, as runsOf does runs.
func (w *simWorld) takesOf(tks []retryTake) string {
	var b strings.Builder
	for i, tk := range tks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s fire %v attempt %d by %s at %v", tk.task, tk.retry.Fire.Sub(w.start), tk.retry.Attempt, tk.node, tk.at.Sub(w.start))
	}
	return "[" + b.String() + "]"
}

// checkRetries is checks (g), (h) and (j), on the runs held (each
// attempt's, as work saw it through scheduling.RunFromContext) and the
// store's successful takes of retries. It returns how many retries ran.
//
//	(g) every attempt of every fire runs at most once across the cluster;
//	(h) a run of attempt k > 1 follows, in true time, a failed run (an
//	    error, a panic, a cut) of attempt k-1 of the same fire, and k is at
//	    most the task's Retry + 1: a task that does not retry never does;
//	(j) each attempt is taken from the store at most once, every retry run
//	    is the take of its node, made before it started, and every take is
//	    in the shared history (its run, its skip, or the placeholder of a
//	    taker that died).
func (w *simWorld) checkRetries(t *testing.T, held []interval) (retries int) {
	runs := map[attemptKey][]interval{}
	for _, h := range held {
		if !h.backfill { // a backfill's instants: check (o)
			runs[h.key()] = append(runs[h.key()], h)
		}
	}
	s := w.store
	s.mu.Lock()
	takes := slices.Clone(s.retries)
	s.mu.Unlock()
	taken := map[attemptKey][]retryTake{}
	for _, tk := range takes {
		k := attemptKey{schedulingtest.Key(tk.task, tk.retry.Fire), tk.retry.Attempt}
		taken[k] = append(taken[k], tk)
	}
	// (g)
	for k, hs := range runs {
		if len(hs) > 1 {
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran %d times, want at most once: %v",
				w.seed, w.hist, k.fire.Task, k.fire.Fire.Sub(w.start), k.attempt, len(hs), w.runsOf(hs))
		}
	}
	for _, h := range held {
		if h.attempt <= 1 {
			continue
		}
		retries++
		// (h)
		if n := w.retriesOf(h.task); h.attempt > n+1 {
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s: the task retries %d times, at most attempt %d",
				w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, n, n+1)
		}
		prev := runs[attemptKey{schedulingtest.Key(h.task, h.fire), h.attempt - 1}]
		if !slices.ContainsFunc(prev, func(p interval) bool {
			return p.failed != "" && p.manual == h.manual && !p.to.After(h.from)
		}) {
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s at %v, after no failed run of attempt %d (its runs: %v)",
				w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), h.attempt-1, w.runsOf(prev))
		}
		// (j)
		if !slices.ContainsFunc(taken[h.key()], func(tk retryTake) bool {
			return tk.node == h.node && tk.retry.Manual == h.manual && !tk.at.After(h.from)
		}) {
			t.Errorf("seed %d history %d: %s fire %v attempt %d ran on %s at %v without its node's take of the attempt (takes %v)",
				w.seed, w.hist, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), w.takesOf(taken[h.key()]))
		}
	}
	// (j)
	history := map[string][]taskstate.Run{}
	for _, st := range w.allTasks() {
		var err error
		if history[st.name], err = s.inner.Runs(context.Background(), st.name, 0); err != nil {
			t.Fatal(err)
		}
	}
	for k, tks := range taken {
		if len(tks) > 1 {
			t.Errorf("seed %d history %d: %s fire %v attempt %d taken %d times from the store, want at most once: %s",
				w.seed, w.hist, k.fire.Task, k.fire.Fire.Sub(w.start), k.attempt, len(tks), w.takesOf(tks))
		}
		for _, tk := range tks {
			if !slices.ContainsFunc(history[tk.task], func(r taskstate.Run) bool {
				return r.Attempt == tk.retry.Attempt && r.Fire.Equal(tk.retry.Fire) && r.Node == tk.node
			}) {
				t.Errorf("seed %d history %d: %s fire %v attempt %d taken by %s at %v is not in the shared history",
					w.seed, w.hist, tk.task, tk.retry.Fire.Sub(w.start), tk.retry.Attempt, tk.node, tk.at.Sub(w.start))
			}
		}
	}
	return retries
}

// isSlot reports whether key is one of the slot keys of st's lock.
func isSlot(st simTask, key string) bool {
	for i := 1; i <= st.maxConc; i++ {
		if key == locks.SlotKey(st.lock, i) {
			return true
		}
	}
	return false
}

// overlapView is what the overlap checks read of the store: the takes of
// attempt 1 (a fire that waited for the run going, taken to run), the
// records that left a fire waiting, and the fires that waited.
type overlapView struct {
	takes  map[schedulingtest.FireKey][]retryTake
	waits  []waitAt
	waited map[schedulingtest.FireKey]bool // a record left it waiting, the history says "buffered", or a node took it
	polls  map[string][]time.Time          // the successful polls, by node
}

func (w *simWorld) overlapView(t *testing.T) *overlapView {
	s := w.store
	s.mu.Lock()
	takes, waits := slices.Clone(s.retries), slices.Clone(s.waits)
	polls := map[string][]time.Time{}
	for node, ps := range s.polls {
		polls[node] = slices.Clone(ps)
	}
	s.mu.Unlock()
	v := &overlapView{takes: map[schedulingtest.FireKey][]retryTake{}, waits: waits, waited: map[schedulingtest.FireKey]bool{}, polls: polls}
	for _, tk := range takes {
		if tk.retry.Attempt == 1 {
			k := schedulingtest.Key(tk.task, tk.retry.Fire)
			v.takes[k] = append(v.takes[k], tk)
			v.waited[k] = true
		}
	}
	for _, wa := range waits {
		v.waited[schedulingtest.Key(wa.task, wa.fire)] = true
	}
	for _, st := range w.allTasks() {
		runs, err := s.inner.Runs(context.Background(), st.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Outcome == string(scheduling.OutcomeBuffered) && !r.Manual {
				v.waited[schedulingtest.Key(st.name, r.Fire)] = true
			}
		}
	}
	return v
}

// fromStore reports whether h is the run of a fire that waited for the run
// going, taken from the store by its node (attempt 1) before it started.
func (v *overlapView) fromStore(h interval) bool {
	return h.attempt == 1 && !h.manual && slices.ContainsFunc(v.takes[schedulingtest.Key(h.task, h.fire)], func(tk retryTake) bool {
		return tk.node == h.node && !tk.at.After(h.from)
	})
}

// nodeOf returns the node named name.
func (w *simWorld) nodeOf(name string) *simNode {
	for _, n := range w.nodes {
		if n.name == name {
			return n
		}
	}
	return &simNode{name: name}
}

// faulted reports whether a call of node on key failed or lost its reply
// in span.
func (w *simWorld) faulted(node, key string, span window) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.faults, func(f faultAt) bool {
		return f.node == node && f.key == key && !f.at.Before(span.from) && f.at.Before(span.to)
	})
}

// checkOverlap is checks (k) to (n), on the runs held (with their lease's
// key and whether a later fire superseded them), the store's log and the
// listeners' records. It counts in st the runs of fires that waited, the
// runs superseded and the runs of allow that started beside another.
//
//	(k) under every policy, each fire has at most one first run (attempt
//	    1, or its first manual run); a fire that waited for the run going
//	    (recorded "buffered", or taken from the store as attempt 1) runs
//	    only as its node's take, and starts only once every run of its
//	    lock that started before it ended, in true time;
//	(l) with buffer-one and cancel-previous, at most one fire of a task
//	    waits at a time: no call leaves a fire waiting while another one
//	    waits, untaken, in the store;
//	(m) with cancel-previous, a run of an earlier fire going when a call
//	    left a later one waiting has ended within a request poll and twice
//	    the skew after it, on every node,
//	    unless its node was paused, killed, stopped or failed a poll
//	    meanwhile, or the waiting fire was taken from the store within
//	    that time (by a node that found the task paused); a run whose context's cause was scheduling.ErrSuperseded
//	    is told to the listeners, and recorded, as cancelled, and is not
//	    retried;
//	(n) with allow, no more than MaxConcurrent runs of the task go at once,
//	    in true time.
func (w *simWorld) checkOverlap(t *testing.T, held []interval, v *overlapView, st *stats) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	firstWait := map[schedulingtest.FireKey]waitAt{} // the record that first left each fire waiting
	for _, wa := range v.waits {
		if k := schedulingtest.Key(wa.task, wa.fire); firstWait[k].at.IsZero() {
			firstWait[k] = wa
		}
	}
	// (k): one first run per fire.
	type first struct {
		fire   schedulingtest.FireKey
		manual bool
	}
	firsts := map[first][]interval{}
	runs := map[attemptKey][]interval{}
	byLock := map[string][]interval{}
	for _, h := range held {
		if h.attempt <= 1 && !h.backfill {
			k := first{schedulingtest.Key(h.task, h.fire), h.manual}
			firsts[k] = append(firsts[k], h)
		}
		runs[h.key()] = append(runs[h.key()], h)
		byLock[h.slot] = append(byLock[h.slot], h)
	}
	for k, hs := range firsts {
		if len(hs) > 1 {
			t.Errorf("%s: (k) %s fire %v (manual %v) had %d first runs, want at most one: %v",
				pre, k.fire.Task, k.fire.Fire.Sub(w.start), k.manual, len(hs), w.runsOf(hs))
		}
	}
	// (k): a fire that waited runs as a take, after the runs before it.
	for _, h := range held {
		k := schedulingtest.Key(h.task, h.fire)
		if h.attempt != 1 || h.manual || h.backfill || !v.waited[k] {
			continue
		}
		if !v.fromStore(h) {
			t.Errorf("%s: (k) %s fire %v waited for the run going, but ran on %s at %v without its node's take of it from the store (takes %s)",
				pre, h.task, h.fire.Sub(w.start), h.node, h.from.Sub(w.start), w.takesOf(v.takes[k]))
			continue
		}
		st.buffered++
		lock := h.slot
		for _, o := range byLock[lock] {
			if o.from.Before(h.from) && o.to.After(h.from) {
				t.Errorf("%s: (k) %s fire %v, which waited, started on %s at %v before an earlier run of lock %s ended: %v",
					pre, h.task, h.fire.Sub(w.start), h.node, h.from.Sub(w.start), lock, w.runsOf([]interval{o}))
			}
		}
	}
	// (l): the store leaves a fire waiting only while none waits
	// (LeaveWaiting), whatever node asks, so no fire is left waiting while
	// another one does, untaken.
	for _, wa := range v.waits {
		if wa.pending.IsZero() {
			continue
		}
		st.doubleWaits++
		t.Errorf("%s: (l) %s fire %v was left waiting by %s at %v while fire %v still waited, untaken: two fires of the task waited at once",
			pre, wa.task, wa.fire.Sub(w.start), wa.node, wa.at.Sub(w.start), wa.pending.Sub(w.start))
	}
	// (m): the runs going when a later fire waited end within a poll (on
	// the node that left it waiting, the scheduler cancels them once the
	// store took the waiting fire: the fake-clock tests check that it does
	// at once). From the call that first left it waiting: a node sends it
	// again after a lost reply, maybe once the fire ran.
	for _, wa := range firstWait {
		task := w.taskOf(wa.task)
		if task.overlap != scheduling.OverlapCancelPrevious {
			continue
		}
		// The other nodes read the waiting fire at their next poll, which
		// cancels the run there: no lock TTL is needed on top of the poll
		// (with one, a scheduler that cancelled nothing at a poll passed
		// most seeds), only a margin.
		by := wa.at.Add(scheduling.DefaultRequestPoll + 2*maxSkew)
		// A node that finds the task paused takes the waiting fire (and
		// drops it) without the lock: the nodes that poll after that never
		// read it (seed 34 history 97: a run went on for 2.5s).
		takenSoon := slices.ContainsFunc(v.takes[schedulingtest.Key(wa.task, wa.fire)], func(tk retryTake) bool { return tk.at.Before(by) })
		for _, h := range held {
			if h.task != wa.task || !h.fire.Before(wa.fire) || !h.from.Before(wa.at) || !h.to.After(wa.at) {
				continue
			}
			if !h.to.After(by) || by.After(w.start.Add(simSpan)) || takenSoon {
				continue // in time, the nodes stopped (they poll no more), or the fire no longer waited
			}
			n, span := w.nodeOf(h.node), window{wa.at.Add(-maxSkew), by}
			if w.down(n, span) || w.away(n, span) || w.faulted(h.node, "poll", span) {
				continue
			}
			t.Errorf("%s: (m) %s fire %v attempt %d on %s [%v, %v] was going when fire %v was left waiting at %v (by %s), and ran past %v",
				pre, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), h.to.Sub(w.start),
				wa.fire.Sub(w.start), wa.at.Sub(w.start), wa.node, by.Sub(w.start))
		}
	}
	// (m): a superseded run is cancelled, and not retried.
	history := map[string][]taskstate.Run{}
	for _, x := range w.allTasks() {
		var err error
		if history[x.name], err = w.store.inner.Runs(context.Background(), x.name, 0); err != nil {
			t.Fatal(err)
		}
	}
	w.store.mu.Lock()
	left := slices.Clone(w.store.left)
	w.store.mu.Unlock()
	ended := map[string][]scheduling.Event{}
	for node, r := range w.recs {
		ended[node] = r.Ended()
	}
	for _, h := range held {
		if !h.superseded {
			continue
		}
		st.superseded++
		for _, e := range ended[h.node] {
			if e.Task == h.task && e.Fire.Equal(h.fire) && e.Attempt == h.attempt && e.Manual == h.manual &&
				e.Outcome != scheduling.OutcomeCancelled {
				t.Errorf("%s: (m) %s fire %v attempt %d on %s was superseded (its context's cause), and ended %q, want %q",
					pre, h.task, h.fire.Sub(w.start), h.attempt, h.node, e.Outcome, scheduling.OutcomeCancelled)
			}
		}
		// Its record: the history keeps attempt 0 for a first run that no
		// node took from the store.
		attempt := h.attempt
		if attempt == 1 && !h.manual && !v.fromStore(h) {
			attempt = 0
		}
		for _, r := range history[h.task] {
			if r.Fire.Equal(h.fire) && r.Node == h.node && r.Manual == h.manual && r.Attempt == attempt &&
				(r.Outcome == string(scheduling.OutcomeOK) || r.Outcome == string(scheduling.OutcomeError) || r.Outcome == string(scheduling.OutcomePanic)) {
				t.Errorf("%s: (m) %s fire %v attempt %d on %s was superseded, and is recorded %q, want %q",
					pre, h.task, h.fire.Sub(w.start), h.attempt, h.node, r.Outcome, scheduling.OutcomeCancelled)
			}
		}
		if slices.ContainsFunc(left, func(l leftRetry) bool {
			return l.task == h.task && l.node == h.node && l.run.Fire.Equal(h.fire) && l.run.Manual == h.manual && l.run.Attempt == attempt
		}) {
			t.Errorf("%s: (m) %s fire %v attempt %d on %s was superseded, and its record left a retry", pre, h.task, h.fire.Sub(w.start), h.attempt, h.node)
		}
		if next := runs[attemptKey{schedulingtest.Key(h.task, h.fire), h.attempt + 1}]; len(next) > 0 {
			t.Errorf("%s: (m) %s fire %v attempt %d on %s was superseded, and retried: %v",
				pre, h.task, h.fire.Sub(w.start), h.attempt, h.node, w.runsOf(next))
		}
	}
	// (n)
	for _, task := range w.tasks {
		if task.overlap != scheduling.OverlapAllow {
			continue
		}
		var hs, going []interval
		for _, h := range held {
			if h.task == task.name {
				hs = append(hs, h)
			}
		}
		slices.SortFunc(hs, func(a, b interval) int { return a.from.Compare(b.from) })
		for _, h := range hs {
			going = slices.DeleteFunc(going, func(o interval) bool { return !o.to.After(h.from) })
			if len(going) > 0 {
				st.concurrent++
			}
			if len(going) >= task.maxConc {
				t.Errorf("%s: (n) %s fire %v attempt %d started on %s at %v beside %d runs, MaxConcurrent being %d: %v",
					pre, h.task, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), len(going), task.maxConc, w.runsOf(going))
			}
			going = append(going, h)
		}
	}
}
