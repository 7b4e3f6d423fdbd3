package taskstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// DefaultHistory is how many runs per task a store keeps when its history
// length is not set.
const DefaultHistory = 20

// MaxHistory bounds a store's history length, so that the runs of one task
// stay a small read.
const MaxHistory = 1000

// ErrInvalid reports bad input to a store: an empty task name, a history
// length out of range, a pause's note too long. The wrapping error names
// the argument, the value and the rule.
var ErrInvalid = errors.New("taskstate: invalid argument")

// A HistoryKeeper is a [Store] that tells how many runs per task it keeps:
// the scheduler warns of a task whose fires an audit could not judge with
// that many, and its audit says so. Every store of this module is one.
type HistoryKeeper interface {
	History() int
}

// A Store is the state that every node of a cluster shares about its
// scheduled tasks, keyed by task name. Implementations must be safe for
// concurrent use by any number of nodes and must pass the conformance suite
// in package taskstatetest.
//
// # Taken requests
//
// TakeRequest adds to the task's runs, in the same step as it removes the
// request, a placeholder run of the taker: Fire the request's instant,
// Manual, Node the taker, Outcome [OutcomeTaken], nothing else. Record of
// the manual run replaces it. A request whose taker stopped or died before
// it recorded the run stays in the history as taken by that node, with no
// outcome: a request is run at most once, and never lost without a trace.
//
// # Retries
//
// A run that failed may leave a pending retry of its fire ([TaskRun].Retry),
// which Record stores in the same step as the run: a retry is never pending
// without the record of the failure it retries, nor lost once that record is
// kept. Every node reads the pending retries at each poll ([Poll].Retries),
// and one of them takes the retry ([Store.TakeRetry]) as it takes a manual
// request: of the callers that race for one attempt, exactly one gets it,
// and the store adds that taker's placeholder run {Fire, Manual, Attempt,
// Node, Outcome [OutcomeTaken]}, which the record of the attempt replaces.
// An attempt is thus run at most once, and never lost without a trace.
//
// # Counted runs
//
// TakeRun counts a task's runs cluster-wide, for a task that runs at most
// a number of times (maxRuns) whatever nodes run it and die: each fire
// that runs takes one, numbered in the order they were taken, and of the
// fires that race for the last one exactly one gets it. The count is kept
// per task name since its first take, whatever the max of each call, so
// that a max raised later allows as many more. A store keeps the last
// [MaxRunTakes] fires that took one, with their numbers, so that a call
// for one of them again (a resend, or a node that asks again for its
// fire) answers the same number and takes nothing. Every node reads the
// counts at each poll ([Poll].Runs).
//
// # The trail of control actions
//
// AppendEvent records a control action ([Event]: a pause, a resume, a run
// now, a backfill, a stored schedule's or calendar's change, a
// notification) with its actor, note, time and before/after; Events reads
// the trail, oldest first. The store numbers each entry (Seq) in the order
// the appends committed, never reusing a number, so that a reader tailing
// the trail with Events(after: the last Seq it read) never misses an entry:
// no entry with a Seq below one already read appears later. Each backend
// orders them so: InProcess under its mutex, redislocks in one script
// (scripts run one at a time), pglocks by a counter row that each append
// updates in its statement (its row lock orders the appends' commits; a
// plain sequence would not), etcdlocks by the revision of the append's
// transaction. An append is idempotent by its Key: an append of a Key the
// trail holds (a resend after a lost reply, the client's or the caller's)
// stores nothing and answers the entry stored. A store keeps the newest
// entries, as many as its trail option says ([DefaultTrail] if not set, at
// most [MaxTrail]), and forgets the Keys of the entries it dropped.
//
// # Error texts
//
// A store keeps at most [MaxErrorLen] bytes of a run's Error, cut by
// [CutError].
//
// # Lost replies
//
// A call to a store on a server can lose its reply after the server ran it
// (a connection reset). What the caller then sees is each store's promise,
// which the conformance suite checks for every mutating call (SetPaused,
// RequestRun, TakeRequest, TakeRetry, TakeRun, AppendEvent, Record, the
// backfills' and the schedules' calls) with another node's call between
// the lost reply and what follows:
//
//   - a store whose client retries the call (redislocks: go-redis resends
//     it on a new connection) makes each call carry a nonce, so that the
//     retry answers what the first attempt did and changes nothing again:
//     a SetPaused does not undo a later one (its flag nor its note), a
//     RequestRun makes at most one request (one call, at most one run), a
//     TakeRequest returns the request its first attempt took and never a
//     later one, a TakeRetry answers what its first attempt did (and so
//     does a LeaveWaiting), a TakeRun answers the number its first attempt
//     took (or 0) and takes nothing again, an AppendEvent answers the entry
//     its first attempt stored (by its Key, without a nonce), a Record
//     records once (and leaves its retry once), a
//     CreateSchedule answers nil, an UpdateSchedule does not undo a later
//     one, and a DeleteSchedule answers true and does not delete a
//     schedule created since;
//   - a store whose client does not retry (pglocks: pgx never resends a
//     query) returns an error, and the state is as if the call ran once or
//     not at all, never twice;
//   - [InProcess] has no wire: no reply is lost.
//
// A call whose context ends after the server applied it, before its reply
// came, returns an error wrapping the context's error (no client resends
// it then), and the state is as if it ran once, in full (a SetPaused moved
// the pause generation with the flag, and kept its note with it), or not
// at all; but a Record that a store splits (etcdlocks) may have recorded
// some of its tasks, each whole and each run once, until the caller sends
// it again with the same IDs.
//
// A caller that retries a failed call itself makes a new call, which may
// act again (a second request, a second take); but a Record whose runs
// carry their IDs ([TaskRun.ID]) keeps each run once on every store, as the
// scheduler's recorder relies on when it sends a failed batch again.
type Store interface {
	// SetPaused pauses (p.Paused true) or resumes (false) task, and keeps
	// p's Note, By and At with the flag, in the same step: a resume keeps
	// its own, in place of the pause's. The Pause holds until the next
	// SetPaused of the task, whatever node restarts. Once it returns, the
	// Pauses of every later Poll differs from that of every Poll before the
	// call. A p that [CheckPause] refuses is an error wrapping ErrInvalid,
	// and nothing changes.
	SetPaused(ctx context.Context, task string, p Pause) error
	// Paused returns task's Pause, as the last SetPaused of it stored it
	// (its At in UTC); a task never paused nor resumed has the zero Pause.
	Paused(ctx context.Context, task string) (Pause, error)
	// RequestRun records a pending manual run of task, requested at at. A
	// request made while another is pending is merged into it: the earlier
	// instant stays, and one run serves both.
	RequestRun(ctx context.Context, task string, at time.Time) error
	// Poll returns what every node reads at each of its polls, in one
	// call: the pending requests, and the pause generation.
	Poll(ctx context.Context) (Poll, error)
	// TakeRequest removes task's pending request for node and returns the
	// instant it was made; in the same step it adds the placeholder run
	// {Fire: at, Manual: true, Node: node, Outcome: OutcomeTaken} to task's
	// runs. Of the callers that race for one request, exactly one gets ok;
	// the others, and every caller when none is pending, get false and add
	// nothing. An empty node is an error wrapping ErrInvalid.
	TakeRequest(ctx context.Context, task, node string) (at time.Time, ok bool, err error)
	// TakeRetry removes task's pending retry if it is r (the same Fire and
	// Attempt: a retry read from a Poll, which a later failure may have
	// replaced since) and reports whether it did; in the same step it adds
	// the placeholder run {Fire: r.Fire, Manual: r.Manual, Attempt:
	// r.Attempt, Node: node, Outcome: OutcomeTaken}. Of the callers that
	// race for one retry, exactly one gets true. An empty node, or a retry
	// that [CheckRetry] refuses, is an error wrapping ErrInvalid.
	TakeRetry(ctx context.Context, task, node string, r Retry) (ok bool, err error)
	// LeaveWaiting makes r, a fire of task left to wait for the run going
	// (Attempt 1: the scheduler's overlap buffer-one and cancel-previous),
	// the task's pending run, to be taken as a retry is ([Store.TakeRetry]),
	// unless the task has another pending run (of any fire or attempt, not
	// taken yet) or its last pending run, pending or taken, is of a later
	// fire: then it changes nothing and reports false. It reports true if
	// r is the task's pending run once it returns, or was taken as it: a
	// call sent again answers what the first did. Of the callers that race
	// with different fires while none waits, exactly one gets true, so that
	// at most one fire waits in the cluster. A retry that [CheckRetry]
	// refuses, or of an attempt other than 1, is an error wrapping
	// ErrInvalid.
	LeaveWaiting(ctx context.Context, task string, r Retry) (bool, error)
	// TakeRun takes one of task's runs for its fire at fire, of at most max counted
	// cluster-wide for the task's name since it first took one: it answers n, the number
	// of the run (1 to max), if fire took one, now or in an earlier call (a call sent again,
	// or a second call for a fire among the task's last MaxRunTakes takes, answers the same
	// n and takes nothing); and 0 if max runs were taken by other fires, taking nothing.
	// Of callers racing with different fires for the last run, exactly one gets it.
	// A max below 1, a zero fire, is an error wrapping ErrInvalid (naming field, value, rule).
	TakeRun(ctx context.Context, task string, fire time.Time, max int) (n int, err error)
	// AppendEvent appends e to the trail of control actions, and answers
	// the entry as stored: its Seq given by the store, At in UTC. If the
	// trail holds an entry of e.Key (the call sent again, its reply lost),
	// it stores nothing and answers that entry, whatever e's other fields.
	// An e that CheckEvent refuses is an error wrapping ErrInvalid.
	AppendEvent(ctx context.Context, e Event) (Event, error)
	// Events returns the trail's entries of Seq above after, oldest first,
	// at most limit (1 to MaxEventsLimit). Entries dropped by the trail's
	// bound are not returned: a reader that fell behind by more than the
	// bound sees a gap in Seq.
	Events(ctx context.Context, after int64, limit int) ([]Event, error)
	// Record adds each run to its task's runs, in order, in one call (one
	// round trip on a server: the scheduler records the runs that end
	// together at once). Each Run's Error is cut by [CutError]; the store
	// keeps the newest runs of a task up to its history length, or the
	// run's [TaskRun.Keep] if longer, and drops the older. For a manual run or a run taken from the pending ones
	// (Attempt 1 and more) or a backfill's run, the
	// placeholder that TakeRequest, TakeRetry or TakeBackfill added with the same Fire,
	// Attempt, Backfill and Node, if still kept, is removed: the finished run is then
	// the newest entry. A run with a Retry makes it the task's pending
	// retry, in the same step, in place of any pending one, unless the task
	// had a retry of a later fire, or of the same fire and an attempt as
	// late, pending or taken: a record sent again after its retry was taken
	// (a resend whose first reply was lost) does not make it pending again,
	// so that each attempt runs at most once whatever the client resends. A run with an
	// empty Task or a Retry that CheckRetry refuses is an error wrapping
	// ErrInvalid, and nothing is recorded; no run records nothing.
	//
	// A run with an ID ([TaskRun.ID]) that a kept run of its task was
	// recorded with is a resend: it is not added again, nor moved up, and
	// its retry is left as for any record (a record sent again after its
	// retry was taken leaves nothing). A store that records a call in
	// several steps (etcdlocks, past etcd's ops per transaction) is thus
	// idempotent per run across a resend of the whole call. A run whose
	// first record was already dropped from the history (history-length
	// newer runs since) may be added again.
	Record(ctx context.Context, runs ...TaskRun) error
	// StartBackfill makes b the task's backfill, running from its first
	// instant (Cursor zero, Taken and Refused 0, State BackfillRunning), in
	// place of its last one if that one ended; in the same step it adds ran,
	// instants of the task that the caller knows ran (from its history), to
	// those the store knows ran. A task whose backfill is running gets an
	// error wrapping ErrBackfillRunning, unless that backfill is b (the same
	// ID: a call sent again), which answers nil and changes nothing. A
	// backfill that [CheckStartBackfill] refuses is an error wrapping
	// ErrInvalid.
	StartBackfill(ctx context.Context, b Backfill, ran []time.Time) error
	// TakeBackfill takes instant fire of task's running backfill id, if
	// fire is after its cursor, in one step: if the backfill forces its
	// instants or fire is not known to have run, it moves the cursor to
	// fire, counts it taken, adds fire to the instants known to have run and
	// the placeholder run [BackfillPlaceholder](fire, node) to task's runs,
	// and answers BackfillTaken; otherwise it moves the cursor, counts it
	// refused and answers BackfillRefused. Any other call answers
	// BackfillStale and changes nothing. Of the callers that race for one
	// instant, exactly one gets BackfillTaken or BackfillRefused. The
	// instants known to have run are those taken by a backfill, those
	// given to StartBackfill, which are kept while the task's history is,
	// and those of the task's kept runs that ran (not manual, with a Start,
	// or a taken placeholder: [RanAt]), whenever they were recorded: a run
	// still going when the backfill started is refused once recorded.
	TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (BackfillTake, error)
	// EndBackfill sets the state of task's backfill id to state
	// (BackfillDone or BackfillCancelled) if it is running, and reports
	// whether it did.
	EndBackfill(ctx context.Context, task, id, state string) (bool, error)
	// CreateSchedule stores sc, as [EncodeSchedule] encodes it, if no stored
	// schedule has its name; otherwise it returns an error wrapping
	// ErrScheduleExists and changes nothing. A schedule that
	// [CheckSchedule] refuses is an error wrapping ErrInvalid. Once it
	// returns nil, the Schedules of every later Poll differs from that of
	// every Poll before the call.
	CreateSchedule(ctx context.Context, sc Schedule) error
	// UpdateSchedule replaces the stored schedule of sc's name with sc, as
	// CreateSchedule stores it; if none has that name, it returns an error
	// wrapping ErrNoSchedule and changes nothing.
	UpdateSchedule(ctx context.Context, sc Schedule) error
	// DeleteSchedule removes the stored schedule of name and reports whether
	// there was one; the Schedules of later Polls differ as for
	// CreateSchedule. The task's paused flag and runs are kept.
	DeleteSchedule(ctx context.Context, name string) (bool, error)
	// Schedules returns every stored schedule, ordered by name.
	Schedules(ctx context.Context) ([]Schedule, error)
	// Runs returns task's kept runs, newest first, at most limit of them;
	// limit 0 means every kept run. It reads only the runs it returns. A
	// negative limit is an error wrapping ErrInvalid.
	Runs(ctx context.Context, task string, limit int) ([]Run, error)
}

// A TaskRun is a run of a task, for [Store.Record].
type TaskRun struct {
	Task string // the task's name
	// ID, if set, names the record across its caller's calls: a caller
	// that sends a record again after a failed Record (whose reply may
	// have been lost after the store kept it, or whose first part a store
	// that splits a call committed) sends the same ID, and every store
	// keeps the run once: a Record of a run whose ID a kept run of its
	// task has adds no run and removes no placeholder (see
	// [Store.Record]). The scheduler's recorder gives each record an ID
	// unique to its node. It is not part of the kept run.
	ID string
	Run
	// Retry, if set, is the retry of this run's fire that the run leaves
	// pending (it failed, and its task retries): see [Store.Record]. It is
	// not part of the kept run.
	Retry *Retry
	// Keep is how many runs of the task the history needs: the store keeps
	// the newest Keep(r) runs of the task once it records the run, where
	// Keep(r) is [KeepOf] the store's history length and Keep. The
	// scheduler sizes it to the horizon of the task's audit, so that a
	// task firing every second keeps more runs than one firing daily. A
	// placeholder that a take adds never shortens a task's history: it
	// drops the oldest run only beyond the longer of the store's history
	// length and the runs the task had.
	Keep int
}

// KeepOf is how many runs of a task a store whose history length is
// history keeps on recording a run whose [TaskRun.Keep] is keep: the
// larger of the two, at most [MaxHistory].
func KeepOf(history, keep int) int { return max(history, min(keep, MaxHistory)) }

// A Retry is a pending run of a fire, due at Due, that one node of the
// cluster takes ([Store.TakeRetry]) and runs: a retry of a fire whose run
// failed (attempt 2 and more), or a fire that waits for the run before it
// to end (attempt 1: the scheduler's overlap buffer-one and
// cancel-previous).
type Retry struct {
	Fire    time.Time // the fire's instant (a manual run's: its request's)
	Manual  bool      // the failed run was a manual one
	Attempt int       // the attempt that it runs: 2 for the first retry, 1 for a waiting fire
	Due     time.Time // when it is due to run
}

// RetryLater reports whether a is a retry of a later fire than b, or of the
// same fire and a later attempt: the order in which a store takes a
// record's retry in place of the task's last one.
func RetryLater(a, b Retry) bool {
	if !a.Fire.Equal(b.Fire) {
		return a.Fire.After(b.Fire)
	}
	return a.Attempt > b.Attempt
}

// CheckTakeRetry validates the arguments of a TakeRetry call, as CheckTask
// does for the other calls.
func CheckTakeRetry(ctx context.Context, task, node string, r Retry) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	if err := CheckNode(node); err != nil {
		return err
	}
	return CheckRetry(task, r)
}

// CheckLeaveWaiting validates the arguments of a LeaveWaiting call, as
// CheckTask does for the other calls: r must pass CheckRetry and be of
// attempt 1.
func CheckLeaveWaiting(ctx context.Context, task string, r Retry) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	if err := CheckRetry(task, r); err != nil {
		return err
	}
	if r.Attempt != 1 {
		return fmt.Errorf("%w: task %q: a waiting fire's attempt %d must be 1 (a retry is left by the record of the run it retries)", ErrInvalid, task, r.Attempt)
	}
	return nil
}

// CheckRetry validates a retry of TakeRetry or of a Record's run, and
// returns an error wrapping ErrInvalid if its Attempt is below 1 or its
// Fire or Due is zero.
func CheckRetry(task string, r Retry) error {
	switch {
	case r.Attempt < 1:
		return fmt.Errorf("%w: task %q: pending attempt %d must be 1 or more (1: a fire waiting for the run before it, 2 and more: a retry)", ErrInvalid, task, r.Attempt)
	case r.Fire.IsZero() || r.Due.IsZero():
		return fmt.Errorf("%w: task %q: retry of attempt %d must have a fire instant and a due time (fire %v, due %v)",
			ErrInvalid, task, r.Attempt, r.Fire, r.Due)
	}
	return nil
}

// MaxRunTakes is how many of a task's last takes of [Store.TakeRun] (each
// a fire and the number it took) a store keeps, to answer a call for one
// of those fires again with the same number: a call resent after a lost
// reply, or a node that asks again for a fire it took.
const MaxRunTakes = 16

// CheckTakeRun validates the arguments of a TakeRun call, as CheckTask
// does for the other calls: max must be 1 or more and fire set.
func CheckTakeRun(ctx context.Context, task string, fire time.Time, max int) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	switch {
	case max < 1:
		return fmt.Errorf("%w: task %q: max runs %d must be 1 or more (a task that may not run takes none)", ErrInvalid, task, max)
	case fire.IsZero():
		return fmt.Errorf("%w: task %q: fire %v must be a set instant: a run is taken for its fire", ErrInvalid, task, fire)
	}
	return nil
}

// CheckRecord validates the arguments of a Record call, as CheckTask does
// for the other calls.
func CheckRecord(ctx context.Context, runs []TaskRun) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	for _, r := range runs {
		if err := CheckTask(ctx, r.Task); err != nil {
			return err
		}
		if r.Retry != nil {
			if err := CheckRetry(r.Task, *r.Retry); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// A Poll is what [Store.Poll] returns.
type Poll struct {
	// Requests are the pending manual-run requests: the instant each was
	// made, by task name.
	Requests map[string]time.Time
	// Retries are the pending retries, by task name.
	Retries map[string]Retry
	// Backfills are each task's last backfill, running or ended, by task
	// name.
	Backfills map[string]Backfill
	// Pauses is the pause generation: it changes with each SetPaused of
	// any task. A node that keeps the paused flags it read (the scheduler
	// does) reads them again when Pauses changes, so that one read per
	// poll stands for every task's flag.
	Pauses int64
	// Schedules is the stored schedules' generation: it changes with each
	// CreateSchedule, UpdateSchedule and DeleteSchedule that changes them,
	// so that a node reads the schedules again ([Store.Schedules]) only
	// when it changed.
	Schedules int64
	Runs      map[string]int // the runs taken (TakeRun) by task, for the tasks that took any
}

// OutcomeTaken is the Outcome of the placeholder run that
// [Store.TakeRequest] adds: the request was taken by the run's Node, which
// has not recorded the run (yet, or ever, if it stopped or died).
const OutcomeTaken = "taken"

// MaxErrorLen is how many bytes of a run's Error a store keeps, the mark of
// a cut included: a task's history stays a small read whatever its errors
// say.
const MaxErrorLen = 1024

// A Run is one fire of a task on some node of the cluster, as that node
// recorded it: a run, when the task returned, or a fire that did not run
// for a reason the cluster must see (the task was paused, the lock or the
// store failed, the node reached the fire too late), with a zero Start and
// Duration. The scheduler package says which fires are recorded and by
// which node.
type Run struct {
	// Fire is the scheduled instant; for a manual run, the instant the run
	// was requested.
	Fire time.Time `json:"fire"`
	// Manual reports a run requested by an operator rather than scheduled.
	Manual bool `json:"manual,omitempty"`
	// Node names the node that ran it.
	Node string `json:"node"`
	// Attempt is the run's attempt at its fire: 2 or more for a retry; 1
	// for a fire's first run taken from the store's pending runs (it
	// waited for the run before it), 0 for any other first run.
	Attempt int `json:"attempt,omitempty"`
	// Backfill reports a run of a backfill ([Store.TakeBackfill]).
	Backfill bool `json:"backfill,omitempty"`
	// Token is the fencing token of the run's lease; 0 for an unlocked task.
	Token uint64 `json:"token,omitempty"`
	// Start is when the task was called, on the node's clock.
	Start time.Time `json:"start"`
	// Duration is how long the task ran.
	Duration time.Duration `json:"duration"`
	// Outcome is how the fire ended, as the scheduler names it: "ok",
	// "error", "panic", "cancelled" for a run; "skipped: paused",
	// "skipped: missed", "failed: lock" for a fire that did not run;
	// [OutcomeTaken] for a taken request whose run is not recorded.
	Outcome string `json:"outcome"`
	// Error is the task's error or panic; "" if it returned nil. Stores
	// keep at most MaxErrorLen bytes of it (see [CutError]).
	Error string `json:"error,omitempty"`
}

// CheckTask validates the task name and context of a store call and returns
// an error wrapping ErrInvalid, or the context's error, or nil. Stores call
// it first so that every store rejects bad input alike.
func CheckTask(ctx context.Context, task string) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	if task == "" {
		return fmt.Errorf("%w: task name %q must not be empty", ErrInvalid, task)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("taskstate: task %q: %w", task, err)
	}
	return nil
}

// CheckContext validates the context of a store call that names no task,
// as [CheckTask] does.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: ctx must not be nil", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("taskstate: %w", err)
	}
	return nil
}

// CheckHistory validates a store's history length (0 meaning
// [DefaultHistory]) and returns the length to use. field names the option
// in the error.
func CheckHistory(field string, n int) (int, error) {
	switch {
	case n == 0:
		return DefaultHistory, nil
	case n < 0 || n > MaxHistory:
		return 0, fmt.Errorf("%w: %s %d must be in [1, %d] (0 means %d)", ErrInvalid, field, n, MaxHistory, DefaultHistory)
	}
	return n, nil
}

// CheckNode validates the node name of [Store.TakeRequest] and returns an
// error wrapping ErrInvalid if it is empty: a placeholder must name its
// taker.
func CheckNode(node string) error {
	if node == "" {
		return fmt.Errorf("%w: node %q must not be empty: the taken request's placeholder names its taker", ErrInvalid, node)
	}
	return nil
}

// CheckLimit validates the limit of [Store.Runs] and returns an error
// wrapping ErrInvalid if it is negative.
func CheckLimit(limit int) error {
	if limit < 0 {
		return fmt.Errorf("%w: limit %d must not be negative (0 means every kept run)", ErrInvalid, limit)
	}
	return nil
}

// CutError returns s if it has at most [MaxErrorLen] bytes. A longer s is
// cut on a UTF-8 boundary and ends with a mark of the cut, "… (cut from N
// bytes)", N being len(s); the result, mark included, has at most
// MaxErrorLen bytes. Every store calls it on a run's Error before it keeps
// the run.
func CutError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	mark := "… (cut from " + strconv.Itoa(len(s)) + " bytes)"
	n := MaxErrorLen - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
