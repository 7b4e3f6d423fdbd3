package scheduling

import (
	"strings"
	"time"

	"github.com/ndigo/ndigo/internal/declare"
)

// An Option sets one field of a task's spec. Options only record values;
// the spec is validated as a whole when the task is added to a scheduler, so
// that every problem is reported at once.
type Option func(*Task)

// Cron sets the schedule: a cron expression of five fields (minute, hour,
// day of month, month, day of week) or six with a leading seconds field, a
// descriptor (@yearly, @monthly, @weekly, @daily, @hourly), "@every D"
// with D a Go duration, or "@at T [Zone]", which fires once at T: an RFC
// 3339 instant, or a wall time (2027-01-15T09:00) or a date in Zone (by
// default the scheduler's), a wall time that DST skips at the end of the
// gap, a repeated one at its first pass; a T past fires never. A
// "CRON_TZ=Zone " prefix sets the zone. Required.
//
// H in a field stands for a value that a hash of the task's name picks, as
// Jenkins' H does, so that many tasks on one schedule spread their fires
// instead of all hitting the lock store at once: "H * * * *" fires hourly
// at a minute of the task's own, "H(0-29) 2 * * *" once between 02:00 and
// 02:29, "H/15 * * * *" every 15 minutes from an offset below 15. H in the
// day of the month picks 1 to 28. Every node, and every restart, resolves
// the same instants; Spec.Cron keeps the expression as written.
func Cron(expr string) Option {
	return func(t *Task) { t.decl.Cron = expr }
}

// Lock makes each run hold a lease on key, so that a fire runs on one node
// only. A fire that finds the key held is skipped (see [LockWait]).
func Lock(key string) Option {
	return func(t *Task) { t.decl.Lock = &key }
}

// LockWait sets how long a fire waits for a held lock before it is skipped.
// The default, zero, skips at once. Requires [Lock].
func LockWait(d time.Duration) Option {
	return func(t *Task) { t.decl.LockWait = &d }
}

// LockWaitStep sets the poll interval while waiting for a held lock (default
// 100ms; a driver that reports releases wakes the waiter at once). Requires
// [Lock].
func LockWaitStep(d time.Duration) Option {
	return func(t *Task) { t.decl.LockWaitStep = &d }
}

// LockTTL sets the lease duration (default 60s). It must cover the whole run
// unless [Renew] is on: a lapsed lease lets another node take over. Requires
// [Lock].
func LockTTL(d time.Duration) Option {
	return func(t *Task) { t.decl.LockTTL = &d }
}

// MaxRunTime sets the run context's deadline, measured with
// clockwork.WithTimeout on the scheduler's clock (a *clockwork.FakeClock, or
// real time for any other clock). For a locked task it must not exceed the
// lock TTL unless [Renew] is on.
func MaxRunTime(d time.Duration) Option {
	return func(t *Task) { t.decl.MaxRunTime = &d }
}

// Renew extends the lease every third of the lock TTL while the run lasts, so
// that a run may outlast the TTL. A failed extension cancels the run's
// context. Requires [Lock].
func Renew() Option {
	return func(t *Task) { t.decl.Renew = true }
}

// CatchUp sets how a fire missed while no node ran is handled. Zero, the
// default, skips it: the schedule goes on from the next fire. A positive
// window makes a scheduler that starts run the task's most recent fire
// within the window before the start, once in the cluster, if no node
// claimed it: the fire goes through the lock and the fire claim like any
// other, so of the nodes starting together one runs it and the others find
// it claimed, and a fire that ran before the cluster went down is not run
// again. The window is at most [MaxCatchUp]. Requires [Lock]: only a locked
// task's fires are claimed. The claims must outlive the nodes, as the Redis
// and PostgreSQL drivers' do; the in-process driver's die with the process,
// which then catches up a fire it may have run before it stopped.
func CatchUp(window time.Duration) Option {
	return func(t *Task) { t.decl.CatchUp = &window }
}

// DST sets what a schedule on the wall clock (one whose hour field names
// particular hours, in a zone with daylight saving) does when clocks
// change: for a wall time that clocks fall back over, "once" fires at its
// first occurrence (the default) and "twice" at both; for a wall time that
// clocks spring forward over, "shift" fires at the first instant after the
// gap (the default) and "skip" does not fire. policy names one of each or
// either ("twice", "skip", "twice,skip"); what it leaves out keeps its
// default. Every node resolves the same instants. A schedule that follows
// elapsed time (every hour, "*/15 * * * *", @every, a fixed zone) has no
// repeated or skipped wall time, and ignores the policy, but in a zone
// whose clocks change by other than whole hours (Australia/Lord_Howe's
// half hour), where a schedule of every hour has such wall times too, and
// takes the policy.
func DST(policy string) Option {
	return func(t *Task) { t.decl.DST = &policy }
}

// Jitter starts each fire of the task up to d after its instant, by an
// offset in [0, d) that a hash of the task's name and the instant picks:
// the same on every node, so that the fire is still claimed once, and
// different from fire to fire and from task to task, so that tasks on one
// schedule do not all reach the lock store at once. The fire keeps its
// instant as its identity (its claim, Run.Fire, the history, metrics);
// its lateness is measured from the shifted start, and the pause rule,
// the lock and the claim apply when it starts. d must be below the
// schedule's shortest interval, so that fires keep their order, and at
// most [MaxJitter].
func Jitter(d time.Duration) Option {
	return func(t *Task) { t.decl.Jitter = &d }
}

// Overlap sets what a fire of the task does when a run of it is going, on
// any node of the cluster (the task's lock is held):
//
//   - OverlapSkip ("skip", the default): the fire is skipped
//     (OutcomeLockHeld; OutcomeRunning on the node running it).
//   - OverlapBufferOne ("buffer-one"): the fire waits, in the task state
//     the nodes share, and runs once the run ends, on the node that then
//     holds the lock (within a [Config.RequestPoll]); at most one fire
//     waits: a later one is skipped while it does ([OutcomeBufferFull]).
//   - OverlapCancelPrevious ("cancel-previous"): as buffer-one, and the run
//     going is cancelled, on whatever node runs it (within a poll; at once
//     on this node), its context's cause being [ErrSuperseded]; the waiting
//     fire runs once its lease is released.
//   - OverlapAllow ("allow"): the fire runs beside the runs going, up to
//     [MaxConcurrent] at once in the cluster, each under a lease of its
//     own on a slot of the lock key ([locks.AcquireSlot]) with its own
//     fencing token; a fire that finds every slot taken is skipped.
//
// Each fire still runs at most once, under every policy. Tasks that share a
// lock key take it in registration order under skip; a task with allow
// must have its lock key to itself. Every policy but skip needs a lock,
// and buffer-one and cancel-previous a task state store.
func Overlap(policy string) Option {
	return func(t *Task) { t.decl.Overlap = &policy }
}

// MaxConcurrent bounds, with [Overlap] allow, the runs of the task going at
// once in the cluster: n slots of its lock key, at most [locks.MaxSlots].
func MaxConcurrent(n int) Option {
	return func(t *Task) { t.decl.MaxConc = &n }
}

// Retry retries a run of the task that fails (returns an error, panics, or
// is cut by Stop at its deadline), up to times times per fire, each after a
// backoff: before attempt k+1 (the first run being attempt 1), a delay
// drawn in [0, min(b·2^(k-1), cap)), b being [RetryBackoff] and cap
// [RetryMaxBackoff] ("full jitter": tasks that fail together do not retry
// in step). The draw is a hash of the task's name, the fire and the
// attempt, so the delays are the same in every run of a test.
//
// A retry is a run of the same fire ([Run].Fire, with [Run].Attempt k+1)
// through the same steps as every run: the pause rule (a retry of a paused
// task is dropped, recorded as skipped), the task's lock (a fencing token
// above the failed attempt's), and a claim of the attempt. The failed
// run's record leaves the retry pending in the task state the nodes share
// ([Config.State]), so that any node runs it when it is due (within a
// [Config.RequestPoll]), also when the node that failed died, and each
// attempt runs at most once. A scheduled fire due while a retry of the task
// is pending is skipped ([OutcomeRetrying]), as a fire that finds the
// previous run still going is. The task needs a lock and the scheduler a
// task state store; times is at most [MaxRetries].
func Retry(times int) Option {
	return func(t *Task) { t.decl.Retry = &times }
}

// RetryBackoff sets the backoff of [Retry] before the first retry, doubled
// for each next one; the default is [DefaultRetryBackoff]. It must be
// positive, at most [MaxRetryBackoff].
func RetryBackoff(d time.Duration) Option {
	return func(t *Task) { t.decl.RetryBackoff = &d }
}

// RetryMaxBackoff caps the doubling backoff of [Retry]; the default is 100
// times [RetryBackoff], at most [MaxRetryBackoff]. It must not be below
// the first backoff.
func RetryMaxBackoff(d time.Duration) Option {
	return func(t *Task) { t.decl.RetryMax = &d }
}

// Calendar makes the task's fires skip the instants that the named
// calendars exclude: every node skips them, and the history and the audit
// show each as excluded by its calendar, never as missed. Calendars are
// kept in the task state and shared by the cluster ([Scheduler.CreateCalendar]);
// a task naming one that does not exist fails Start. They are evaluated in
// the task's zone. Requires a task state store.
func Calendar(names ...string) Option {
	list := strings.Join(names, ",")
	return func(t *Task) { t.decl.Calendars = &list }
}

// StartAt makes the task's first fire its first instant at or after v: an
// RFC 3339 instant ("2027-01-15T09:00:00Z"), a wall time in the task's zone
// ("2027-01-15T09:00"), or a date, that day's start in the task's zone
// ("2027-01-15").
func StartAt(v string) Option {
	return func(t *Task) { t.decl.StartAt = &v }
}

// EndAt makes the task fire only before v, written as for [StartAt]. Past
// its end the task is completed: listed with its history, never removed by
// itself.
func EndAt(v string) Option {
	return func(t *Task) { t.decl.EndAt = &v }
}

// MaxRuns makes the task run at most n times in the cluster, counted in the
// task state by its name: each run takes one of the n before it starts, in
// the same claim that makes it run once, so that n runs are made whatever
// nodes die. Then the task is completed. Requires [Lock] and a task state
// store.
func MaxRuns(n int) Option {
	return func(t *Task) { t.decl.MaxRuns = &n }
}

// PauseAfterFailures pauses the task in the cluster after n failed fires in
// a row (an error, a panic), with a note that says so; [Scheduler.Resume]
// resumes it. Requires a task state store, whose history must keep n runs.
func PauseAfterFailures(n int) Option {
	return func(t *Task) { t.decl.PauseAfter = &n }
}

// LateAfter sets the grace of the task's fires for its health
// ([Scheduler.Health]): a fire that has not started d after its instant
// (after its jittered start, with [Jitter]) makes the task late. The
// default is what the audit waits for before it judges a fire: the lock
// wait, the longest a run can take before its record lands ([MaxRunTime];
// the lock TTL of a locked task that does not renew; else the longest run
// in the history) and a minute. A run is recorded when it ends: a grace
// shorter than a run lets the nodes that do not run it see the task late
// while it runs. Positive, at most [MaxHealthSpan]. Requires a task state
// store.
func LateAfter(d time.Duration) Option {
	return func(t *Task) { t.decl.LateAfter = &d }
}

// DownAfter makes the task down ([HealthDown]) once a fire due after its
// last run started has not started for d (and its grace, [LateAfter], has
// passed). The default is the third fire in a row that has not started
// being late. Not below LateAfter, positive, at most [MaxHealthSpan].
// Requires a task state store.
func DownAfter(d time.Duration) Option {
	return func(t *Task) { t.decl.DownAfter = &d }
}

// FailingAfter makes the task failing ([HealthFailing]) once its newest n
// fires that ran all failed (an error or a panic; a fire's retries are
// one fire, manual runs aside). The default is [DefaultFailingAfter], 1.
// At most taskstate.MaxHistory. Requires a task state store.
func FailingAfter(n int) Option {
	return func(t *Task) { t.decl.FailingAfter = &n }
}

// RunBudget makes the task overrun ([HealthOverrun]) while a run of it
// has gone on for longer than d, as the node running it sees it, and,
// once its record lands, for every node until a run ends within it. The
// run goes on: [MaxRunTime] cuts it. Below MaxRunTime, positive, at most
// [MaxHealthSpan]; no budget by default. Requires a task state store.
func RunBudget(d time.Duration) Option {
	return func(t *Task) { t.decl.RunBudget = &d }
}

// Name sets the task's name, used in logs, metrics, [Scheduler.Tasks] and
// the fire claim. The default is "Type.Method" for a method value, Type
// being the type that declares the method (for a method promoted from an
// embedded struct, that struct), or the package-qualified name of a plain
// function. A func literal has no stable default (its generated name
// changes when code moves) and must be named. Names are unique within a
// scheduler.
func Name(name string) Option {
	return func(t *Task) { t.decl.Name = &name }
}

func init() {
	declare.Origin = func(controllerType, method string) any {
		return Option(func(t *Task) { t.typ, t.method = controllerType, method })
	}
	declare.Invalid = func(option, value, rule string) any {
		return Option(func(t *Task) {
			t.problems = append(t.problems, Problem{Option: option, Value: value, Rule: rule})
		})
	}
	declare.From = func(option, source string) any {
		return Option(func(t *Task) {
			if t.from == nil {
				t.from = map[string]string{}
			}
			t.from[option] = source
		})
	}
}

// origin and invalid are declare's options, for this package's tests.
func origin(controllerType, method string) Option {
	return declare.Origin(controllerType, method).(Option)
}

func invalid(option, value, rule string) Option { return declare.Invalid(option, value, rule).(Option) }
