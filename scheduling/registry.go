package scheduling

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// An Outcome says how a fire ended on this node.
type Outcome string

// Outcomes of a fire.
const (
	OutcomeOK        Outcome = "ok"                     // the task returned nil
	OutcomeError     Outcome = "error"                  // the task returned an error
	OutcomePanic     Outcome = "panic"                  // the task panicked
	OutcomeCancelled Outcome = "cancelled"              // Stop cancelled the run at its deadline
	OutcomeLockHeld  Outcome = "skipped: lock held"     // another holder had the lock (through the wait, if any)
	OutcomeRunning   Outcome = "skipped: still running" // this node's previous fire was still running
	// this node's previous fire was still in its lock step: its driver had
	// not answered (a hung backend), or it waited for the key (LockWait)
	OutcomeLockPending Outcome = "skipped: lock pending"
	OutcomeAlreadyRun  Outcome = "skipped: already run" // another node claimed this fire (or a later one)
	OutcomeMissed      Outcome = "skipped: missed"      // the node reached the fire too late to claim it
	OutcomePaused      Outcome = "skipped: paused"      // the task is paused cluster-wide (Pause)
	// OutcomeExcluded is a fire whose instant a calendar of the task
	// excludes ([Calendar]): no node runs it. The record's error names
	// the calendar ("calendar eu-holidays").
	OutcomeExcluded Outcome = "excluded"
	// OutcomeCompleted is a fire of a task whose MaxRuns runs were all
	// taken in the cluster: the task is completed.
	OutcomeCompleted  Outcome = "skipped: completed"
	OutcomeNotOwner   Outcome = "skipped: not owner"   // another live node owns the task's lock key (Config.Spread)
	OutcomeRetrying   Outcome = "skipped: retrying"    // a retry of an earlier fire of the task is pending (Retry)
	OutcomeBuffered   Outcome = "buffered"             // it waits for the run going, and runs once it ends (Overlap)
	OutcomeBufferFull Outcome = "skipped: one waiting" // another fire already waits for the run going (Overlap buffer-one, cancel-previous)
	OutcomeLockFailed Outcome = "failed: lock"         // the driver failed, or there was none
)

// LastRun describes the last fire of a task on this node.
type LastRun struct {
	Fire     time.Time     // the scheduled instant
	Start    time.Time     // when the task started; zero if it did not run
	Duration time.Duration // how long it ran
	Outcome  Outcome
	Err      error  // the task's error, panic or lock failure
	Token    uint64 // the lease's fencing token; 0 if unlocked or not acquired
	Node     string
	Manual   bool // an operator asked for this run (RunNow); Fire is when
	Attempt  int  // the attempt at the fire: 1 for its first run, k+1 for its k-th retry (Retry)
	Backfill bool // a run of a backfill (Scheduler.Backfill); Fire is the past instant it ran for
	// RetryAt is when the retry that this failed run left is due; zero if
	// it left none.
	RetryAt time.Time
}

// TaskInfo describes one task in a scheduler's registry.
type TaskInfo struct {
	Name   string
	Type   string // the controller type; "" for a plain func
	Method string
	Spec   Spec
	// Next is the next fire that runs: for a task with calendars, the
	// next one that none excludes, by their rules now (looked for within
	// a year); zero if none.
	Next time.Time
	// Completed reports a task that fires no more: past its EndAt, its
	// one-off instant (@at), or its MaxRuns. It stays listed, with its
	// history, until it is removed.
	Completed bool
	Running   bool // a fire is in flight on this node: running, or waiting for its lock
	Waiting   bool // that fire is in its lock step: waiting for its driver's answer, or for the key (LockWait)
	// Owner is, for a locked task of a spreading scheduler (Config.Spread),
	// the node that this node takes to own the task's lock key; "" without
	// spreading, for an unlocked task, or before this node's first view of
	// its group (it then tries every fire).
	Owner string
	// Backfill is the task's last backfill, running or ended, as this
	// node's last poll of the task state read it; nil if none.
	Backfill *taskstate.Backfill
	// Schedule is the stored schedule the task runs ([Scheduler.CreateSchedule]);
	// nil for a task declared in code.
	Schedule *taskstate.Schedule
	// Retry is the pending retry of the task that this node knows of (from
	// its last poll of the task state, or one its own failed run left
	// since); nil if none.
	Retry    *taskstate.Retry
	Last     LastRun // the last fire, run or not; zero Fire if it never fired
	LastRan  LastRun // the last fire that ran (its task was called); zero Fire if none
	Runs     uint64  // fires that ran (whatever they returned)
	Skips    uint64  // fires skipped: lock held, still running, already run, missed, paused
	Failures uint64  // runs that errored, panicked or were cancelled, and lock failures

	// Paused, PauseNote and ClusterLast come from the task state the
	// nodes share; only [Scheduler.ClusterTasks] fills them.
	Paused bool // the task is paused cluster-wide
	// PauseNote is the task's last pause or resume, as the store keeps it:
	// its flag (Paused's), note, who made it and when; zero if the task was
	// never paused.
	PauseNote   taskstate.Pause
	ClusterLast *taskstate.Run // the newest fire recorded on any node (a run, or a paused, failed or missed fire); nil if none
	// ClusterRecent are the newest fires recorded on any node, newest
	// first, at most RecentFires; ClusterLast is the first.
	ClusterRecent []taskstate.Run
	// Health is the task's health ([Scheduler.Health]), as ClusterTasks
	// derives it from the history it reads; [Scheduler.Tasks] leaves it
	// unknown, with the reason.
	Health TaskHealth
}

// A LeaseInfo describes a lease this node holds for a locked run in flight.
type LeaseInfo struct {
	Task  string    // the task running under it
	Key   string    // the lock key
	Token uint64    // the fencing token
	Fire  time.Time // the fire being run
	Since time.Time // when the run started holding it, on the scheduler's clock
}

// entry is one task in a scheduler.
type entry struct {
	// flight is what this node knows of the task's fires; a stored
	// schedule's entry hands it on to the entry that replaces it at an
	// update, so that a run of the old spec still counts as in flight.
	*flight
	fn     func(context.Context) error
	name   string
	typ    string
	method string
	cron   string         // Spec.Cron
	zone   *time.Location // the zone of its wall-clock rules: calendars, bounds
	// spec is the task's spec but for Cron, which is empty here: the
	// tasks of one Add whose specs differ in their expressions alone share
	// it. Use Spec for the whole of it.
	spec  *Spec
	sched schedule
	seq   int32 // registration order
	// keep is how many runs of the task the shared history keeps for its
	// audit (historyKeep): 0 until its first record, -1 for the store's
	// history length.
	keep atomic.Int32
	// runsTaken reports that the task's MaxRuns runs were taken in the
	// cluster: it fires no more.
	runsTaken atomic.Bool
	claimKey  string // fireKey(name), the key of this task's fire claims; "" if unlocked
	// stored is the stored schedule the entry runs; nil for a task
	// declared in code.
	stored *taskstate.Schedule
	// prior is the entry of the spec this one replaced while that one
	// still has fires before this one's From; nil otherwise.
	prior *entry
	// gate is the lock of the replaced spec, which this spec's fires hold
	// too until no run of that spec can be going; nil if none.
	gate *gate

	// Guarded by Scheduler.mu.
	next   time.Time     // zero when the schedule has no further fire
	jitter time.Duration // next starts this much after its instant (setNext)
	index  int32         // in Scheduler.due; -1 when absent
	gone   bool          // a stored schedule's entry, replaced or deleted: it fires no more
	until  time.Time     // a replaced spec's: its fires are those before this; zero: no end
}

// completed reports whether e fires no more: its schedule has no next
// instant (bounds, a one-off), or its runs are all taken (MaxRuns). s.mu is
// held.
func (e *entry) completed() bool { return (e.next.IsZero() && !e.gone) || e.runsTaken.Load() }

// ended reports whether e's next fire is past its spec's end: the spec
// that replaced it has that fire. s.mu is held.
func (e *entry) ended() bool { return !e.until.IsZero() && !e.next.Before(e.until) }

// inForce returns the entry of the spec in force at instant t: e, or the
// spec e replaced (or one before it) if t is before e's From. A fire that
// runs after its instant (a retry, a fire that waited for the run going, a
// takeover's) runs the spec of its instant, as every node does (G36).
func (e *entry) inForce(t time.Time) *entry {
	for e.prior != nil && t.Before(e.prior.until) {
		e = e.prior
	}
	return e
}

// flight is the state of a task's fires on this node.
type flight struct {
	busy     atomic.Bool  // a fire is in flight on this node: single flight
	inFlight atomic.Int32 // with OverlapAllow, the fires in flight on this node, instead of busy
	waiting  atomic.Bool  // that fire is waiting for its lock
	tried    atomic.Int64 // the latest fire (Unix ns) this node owned or found busy: a takeover does not try it again
	late     lateFires    // the fires a takeover left this node to run late
	// runStart is the start (Unix ns) of the newest run in flight on this
	// node, for its health; 0 when none is.
	runStart atomic.Int64

	mu   sync.Mutex // protects hist, apart from Scheduler.mu so runs do not contend
	hist *history   // nil until the first fire, so that an idle task keeps none
}

// history is what a task's fires left on this node.
type history struct {
	last  LastRun // the last fire
	ran   LastRun // the last run; zero Fire until the first
	stats counts
}

type counts struct{ runs, skips, failures uint64 }

// Spec returns the task's spec.
func (e *entry) Spec() Spec {
	s := *e.spec
	s.Cron = e.cron
	return s
}

// specPool shares one Spec between the tasks whose specs (Cron aside)
// are equal. A nil pool shares nothing.
type specPool map[Spec]*Spec

// share returns the pool's Spec equal to s but for Cron, which it leaves
// empty.
func (p specPool) share(s Spec) *Spec {
	s.Cron = ""
	if sp, ok := p[s]; ok {
		return sp
	}
	sp := &s
	if p != nil {
		p[s] = sp
	}
	return sp
}

// record stores the outcome of a fire and returns the previous fire's
// ("" before the first).
func (e *entry) record(r LastRun, c counts) (prev Outcome) {
	e.mu.Lock()
	if e.hist == nil {
		e.hist = new(history)
	}
	h := e.hist
	prev = h.last.Outcome
	h.last = r
	if c.runs > 0 {
		h.ran = r
	}
	h.stats.runs += c.runs
	h.stats.skips += c.skips
	h.stats.failures += c.failures
	e.mu.Unlock()
	return prev
}

// Tasks returns the registry: every task in registration order, with its
// spec, next fire and last fire on this node.
func (s *Scheduler) Tasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskInfo, len(s.entries))
	for i, e := range s.entries {
		out[i] = TaskInfo{Name: e.name, Type: e.typ, Method: e.method, Spec: e.Spec(), Next: e.next,
			Running: e.running(), Waiting: e.waiting.Load(), Schedule: e.stored, Completed: e.completed(),
			Health: TaskHealth{State: HealthUnknown, Reason: "the shared task state was not read (Scheduler.Tasks reads none)"}}
		if e.spec.Calendars != "" && !e.next.IsZero() {
			// The next fire that no calendar excludes, by their rules now.
			if cs, err := s.cals.at(calendarNames(e.spec.Calendars), s.clock.Now()); err == nil {
				out[i].Next = nextRun(e.sched, cs, bounds{}, e.zone, e.next.Add(-time.Nanosecond), nextRunHorizon)
			}
		}
		if e.spec.Lock != "" && s.spread != nil {
			out[i].Owner = s.ownerNow(e.spec.Lock)
		}
		if r, ok := s.retries[e.name]; ok {
			out[i].Retry = &r
		}
		if b, ok := s.backfills[e.name]; ok {
			out[i].Backfill = &b
		}
		e.mu.Lock()
		if h := e.hist; h != nil {
			out[i].Runs, out[i].Skips, out[i].Failures = h.stats.runs, h.stats.skips, h.stats.failures
			out[i].Last, out[i].LastRan = h.last, h.ran
		}
		e.mu.Unlock()
	}
	return out
}

// Leases returns the leases this node holds for locked runs in flight,
// ordered by key, then task. Fire claims are not leases and are not listed.
func (s *Scheduler) Leases() []LeaseInfo {
	s.mu.Lock()
	out := make([]LeaseInfo, 0, len(s.held))
	for h := range s.held {
		out = append(out, LeaseInfo{Task: h.e.name, Key: h.lease.Key(), Token: h.lease.Token(), Fire: h.fire, Since: h.since})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b LeaseInfo) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Task, b.Task))
	})
	return out
}

// A holding is a lease held by a run in flight, so that Stop can release it
// and Leases can list it.
type holding struct {
	e     *entry
	lease locks.Lease
	fire  time.Time
	since time.Time // when the run started holding the lease, on the scheduler's clock
	// cancel cancels the run's context; superseded is set when a later
	// fire did (OverlapCancelPrevious).
	cancel     context.CancelCauseFunc
	superseded atomic.Bool
	once       sync.Once
	err        error  // Release's error
	recorded   uint64 // the run's shared record (recordShared's seq); 0 for none
}

// release releases the lease once, whoever calls first: the run's end or
// Stop at its deadline.
func (h *holding) release(ctx context.Context) error {
	h.once.Do(func() { h.err = h.lease.Release(ctx) })
	return h.err
}

// setNext sets e's next fire and when it starts: its instant, plus the
// jitter that a hash of the task's name and the instant picks below
// spec.Jitter. s.mu is held.
func (e *entry) setNext(next time.Time) {
	e.next, e.jitter = next, 0
	if j := e.spec.Jitter; j > 0 && !next.IsZero() {
		e.jitter = jitterOffset(e.name, next, j)
	}
}

// at returns when e's next fire starts: its instant, plus its jitter.
// s.mu is held.
func (e *entry) at() time.Time { return e.next.Add(e.jitter) }

// nextAfter sets e's next fire to the first whose start is after now:
// with Jitter, a fire whose instant has passed may not have started yet,
// and a node that starts (or comes back) then must not drop it. s.mu is
// held.
func (e *entry) nextAfter(now time.Time) {
	for t := e.sched.Next(now.Add(-e.spec.Jitter)); !t.IsZero(); t = e.sched.Next(t) {
		if e.setNext(t); e.at().After(now) {
			return
		}
	}
	e.setNext(time.Time{})
}
