package scheduling

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// A Health is the state of a task's health, as [Scheduler.Health] derives
// it from the history the nodes share and the runs in flight.
type Health string

// The health states. When several apply, the first of down, overrun,
// failing, late is the task's; completed and paused come before them all,
// as a task that is not meant to fire is neither late nor down.
const (
	// HealthOK: none of the states below applies.
	HealthOK Health = "ok"
	// HealthLate: the task's newest fire due by its grace ([LateAfter])
	// did not start within it: no node recorded it run or skipped for a
	// reason (paused, a retry pending, its lock held by a run going), or
	// its run started more than the grace after it.
	HealthLate Health = "late"
	// HealthFailing: the newest fires that ran failed, [FailingAfter] of
	// them in a row (an error or a panic; a fire's retries are one fire,
	// manual runs aside).
	HealthFailing Health = "failing"
	// HealthOverrun: a run took longer than the task's [RunBudget]: the run
	// in flight on this node, or else the newest run recorded.
	HealthOverrun Health = "overrun"
	// HealthDown: no run started for longer than [DownAfter] after a fire
	// was due.
	HealthDown Health = "down"
	// HealthPaused: the task is paused in the cluster ([Scheduler.Pause]).
	HealthPaused Health = "paused"
	// HealthCompleted: the task fires no more ([TaskInfo].Completed).
	HealthCompleted Health = "completed"
	// HealthUnknown: the shared task state could not be read, or the
	// scheduler has none ([TaskInfo].Health without it).
	HealthUnknown Health = "unknown"
)

// HealthStates lists the states, in the order of their precedence:
// completed, paused, down, overrun, failing, late, ok; unknown last.
var HealthStates = []Health{HealthCompleted, HealthPaused, HealthDown, HealthOverrun, HealthFailing, HealthLate, HealthOK, HealthUnknown}

// A TaskHealth is a task's health, when it began and why.
type TaskHealth struct {
	State Health
	// Since is when the state began, as the history shows it: for late,
	// when the oldest fire that has not started since the last run passed
	// its grace; for down, when the span ran out; for failing, when the
	// failure that made the count ended; for overrun, when the run passed
	// its budget; for paused, when it was paused. Zero for ok, completed
	// and unknown.
	Since time.Time
	// Reason says why, naming the fire, the run or the setting; "" for ok.
	Reason string
}

// DefaultFailingAfter is how many failed fires in a row make a task
// failing when [FailingAfter] is not set: the newest fire that ran failed.
const DefaultFailingAfter = 1

// DefaultDownFires is how many fires in a row that did not start make a
// task down when [DownAfter] is not set: the third is late.
const DefaultDownFires = 3

// MaxHealthSpan bounds the durations of the health options.
const MaxHealthSpan = 366 * 24 * time.Hour

// maxHealthWalk bounds the instants a health judgement walks over.
const maxHealthWalk = 10_000

// Health returns the health of the task named name: its state, since when
// and why, derived from the task's history that every node shares (read
// once), its pause flag, and the run of it in flight on this node. Every
// node derives the same state from the same history but for that run,
// which a node sees only once its record lands: a run is recorded when it
// ends.
//
// # The states
//
// Completed, paused, then in this order: down, overrun, failing, late;
// ok if none applies.
//
//   - late: the newest instant of the schedule whose grace ([LateAfter])
//     has passed, and that no calendar excludes, did not start within it:
//     no record of it explains it (a run; a skip for a reason: paused, a
//     retry pending, the lock held by a run that was going then; a
//     backfill's run of it), or its run started later than the grace. The grace counts from the fire's
//     start: its instant, plus its offset with [Jitter].
//   - down: a fire due after the last run started is older than
//     [DownAfter]; without it, the third such fire (calendars' exclusions
//     aside) is late. The fires counted are those that no record explains,
//     as for late, or a backfill ran later. A task with no run in its
//     history counts from this node's start, or its oldest record if
//     older; a stored schedule, from its From.
//   - failing: the newest [FailingAfter] fires that ran all failed.
//   - overrun: with a [RunBudget], the run in flight on this node started
//     longer ago than the budget, or, with none in flight here, the newest
//     recorded run took longer.
//
// A fire a calendar excludes is never late, nor counts toward down; a
// paused or completed task is never late nor down. A run in flight on this
// node explains the fires due while it runs (they are skipped as still
// running); one on another node is seen when its record lands, which the
// default grace waits for. The judgement walks at most about 10,000
// instants back from now: a task down for longer on a short period is
// down since the oldest of them.
//
// It reads the task's history and pause flag. Without a task state store
// it fails with [ErrNoState]; if the store fails, with its error:
// [TaskInfo].Health is then unknown.
func (s *Scheduler) Health(ctx context.Context, name string) (TaskHealth, error) {
	e, err := s.lookup(name)
	if err != nil {
		return TaskHealth{}, err
	}
	pause, err := s.state.Paused(ctx, e.name)
	if err != nil {
		return TaskHealth{}, fmt.Errorf("scheduling: health of %s: %w", e.name, err)
	}
	runs, err := s.state.Runs(ctx, e.name, 0)
	if err != nil {
		return TaskHealth{}, fmt.Errorf("scheduling: health of %s: %w", e.name, err)
	}
	return s.health(e, runs, pause), nil
}

// health is Health on what it read: the task's history, newest recorded
// first, and its pause.
func (s *Scheduler) health(e *entry, runs []taskstate.Run, pause taskstate.Pause) TaskHealth {
	now := s.clock.Now()
	s.mu.Lock()
	completed, started := e.completed(), s.startedAt
	s.mu.Unlock()
	switch {
	case completed:
		return TaskHealth{State: HealthCompleted, Reason: "the task fires no more (its endAt, its one-off instant or its maxRuns)"}
	case pause.Paused:
		why := "paused in the cluster"
		if pause.By != "" {
			why += " by " + pause.By
		}
		if pause.Note != "" {
			why += ": " + pause.Note
		}
		return TaskHealth{State: HealthPaused, Since: pause.At, Reason: why}
	}
	var inFlight time.Time // the start of the run in flight here
	if ns := e.runStart.Load(); ns != 0 {
		inFlight = time.Unix(0, ns)
	}
	j := healthJudge{e: e, runs: runs, now: now, started: started, inFlight: inFlight, excluded: s.excludedBy}
	for _, h := range []func() (TaskHealth, bool){j.down, j.overrun, j.failing, j.late} {
		if th, ok := h(); ok {
			return th
		}
	}
	return TaskHealth{State: HealthOK}
}

// A healthJudge derives a task's health from what Health read.
type healthJudge struct {
	e        *entry
	runs     []taskstate.Run // newest recorded first
	now      time.Time
	started  time.Time // this scheduler's start; zero before it
	inFlight time.Time // the start of the run in flight on this node; zero if none
	excluded func(*entry, time.Time) string

	walked bool
	// unstated are the first fires since the last start that no record
	// explains, oldest first, at most DefaultDownFires of them.
	unstated []time.Time
	newest   time.Time // the newest fire past its grace that no calendar excludes
	// newestUnexplained reports that no record explains newest.
	newestUnexplained bool
}

// grace is how long after its start a fire of e may take to start, and to
// be recorded, before it is late: LateAfter, or by default what the audit
// waits for before it judges a fire (auditLag): the jitter, the lock wait,
// the longest a run can take unrecorded (MaxRunTime; the lock TTL of a
// locked task that does not renew; else the longest run in the history)
// and a minute for the record to land.
func (j *healthJudge) grace() time.Duration {
	if d := j.e.spec.LateAfter; d > 0 {
		return d
	}
	var longest time.Duration
	for _, r := range j.runs {
		longest = max(longest, r.Duration)
	}
	lag, _ := auditLag(j.e, longest)
	return lag - j.e.spec.Jitter // counted from the jittered start
}

// offset is fire t's jitter: its start is t plus it.
func (j *healthJudge) offset(t time.Time) time.Duration {
	if d := j.e.spec.Jitter; d > 0 {
		return jitterOffset(j.e.name, t, d)
	}
	return 0
}

// lastStart is the start of the newest run: in flight here, or in the
// history (manual and backfill runs too); zero if none.
func (j *healthJudge) lastStart() time.Time {
	last := j.inFlight
	for _, r := range j.runs {
		if r.Start.After(last) {
			last = r.Start
		}
	}
	return last
}

// walk finds the fires since the last start that no record explains, and
// the newest fire past its grace, walking the instants from the older of
// the last start and the newest record's fire (with no start: this
// node's start, or the oldest record's fire if older), none before a
// stored schedule's From.
func (j *healthJudge) walk() {
	if j.walked {
		return
	}
	j.walked = true
	e := j.e
	base := j.lastStart()
	if base.IsZero() {
		base = j.started
		for _, r := range j.runs {
			if !r.Manual && (base.IsZero() || r.Fire.Before(base)) {
				base = r.Fire.Add(-time.Nanosecond)
			}
		}
	}
	if base.IsZero() {
		return // not started, nothing recorded: nothing is due
	}
	from := base
	for _, r := range j.runs {
		if !r.Manual && !r.Backfill && r.Fire.Before(from) && r.Fire.After(base.Add(-AuditWindow)) {
			from = r.Fire.Add(-time.Nanosecond)
			break // the newest recorded
		}
	}
	if e.stored != nil && !e.stored.From.IsZero() {
		base, from = maxTime(base, e.stored.From.Add(-time.Nanosecond)), maxTime(from, e.stored.From.Add(-time.Nanosecond))
	}
	from = walkableWithin(e.sched, from, j.now, maxHealthWalk)
	byFire := recordsByFire(j.runs)
	holders := make([]holder, len(j.runs))
	for i, r := range j.runs {
		holders[i] = holder{e.name, r}
	}
	grace := j.grace()
	gapBefore := func(t, prev time.Time) time.Duration {
		if prev.IsZero() {
			return e.sched.Next(t).Sub(t)
		}
		return t.Sub(prev)
	}
	// unexplained reports whether no record explains t, after the last
	// start and not covered by the run going here, and no calendar
	// excludes it.
	unexplained := func(t, prev time.Time) bool {
		if !t.After(base) || (!j.inFlight.IsZero() && !t.Before(j.inFlight)) {
			return false // before the last start, or explained by the run going here
		}
		switch judge(t, byFire, holders, e, min(heldSlack, gapBefore(t, prev)/10)).Status {
		case FireMissed, FireFailed:
			return j.excluded == nil || j.excluded(e, t) == ""
		}
		return false
	}
	var due, before []time.Time // the instants past their grace, oldest first, and the instant before each
	prev := time.Time{}
	for t, n := e.sched.Next(from), 0; !t.IsZero() && !t.After(j.now) && n <= 2*maxHealthWalk; prev, t, n = t, e.sched.Next(t), n+1 {
		if !t.Add(j.offset(t)).Add(grace).After(j.now) {
			due, before = append(due, t), append(before, prev)
		}
		// Down needs the first few; late, the newest due (below).
		if len(j.unstated) < DefaultDownFires && unexplained(t, prev) {
			j.unstated = append(j.unstated, t)
		}
	}
	for i := len(due) - 1; i >= 0; i-- {
		if j.excluded == nil || j.excluded(e, due[i]) == "" {
			j.newest = due[i]
			j.newestUnexplained = unexplained(due[i], before[i])
			break
		}
	}
}

// recordsByFire returns the record that explains each instant of runs (the
// best ranked of its records), manual runs aside, by the instant's Unix
// nanoseconds.
func recordsByFire(runs []taskstate.Run) map[int64]taskstate.Run {
	byFire := map[int64]taskstate.Run{}
	for _, r := range runs {
		if r.Manual {
			continue
		}
		k := r.Fire.UnixNano()
		if prev, ok := byFire[k]; !ok || rank(r.Outcome) < rank(prev.Outcome) {
			byFire[k] = r
		}
	}
	return byFire
}

func (j *healthJudge) down() (TaskHealth, bool) {
	j.walk()
	if len(j.unstated) == 0 {
		return TaskHealth{}, false
	}
	first := j.unstated[0]
	if d := j.e.spec.DownAfter; d > 0 {
		// Past its grace too: a fire whose run may still be going on
		// another node, unrecorded, is not down.
		if at := maxTime(first.Add(d), first.Add(j.offset(first)).Add(j.grace())); !at.After(j.now) {
			return TaskHealth{State: HealthDown, Since: at, Reason: fmt.Sprintf("no run started since %s: the fire at %s has not started for over %s (downAfter)",
				stamp(j.lastStart()), stamp(first), d)}, true
		}
		return TaskHealth{}, false
	}
	if len(j.unstated) < DefaultDownFires {
		return TaskHealth{}, false
	}
	third := j.unstated[DefaultDownFires-1]
	at := third.Add(j.offset(third)).Add(j.grace())
	if at.After(j.now) {
		return TaskHealth{}, false
	}
	return TaskHealth{State: HealthDown, Since: at, Reason: fmt.Sprintf("no run started since %s: the fire at %s and at least %d after it have not started",
		stamp(j.lastStart()), stamp(first), DefaultDownFires-1)}, true
}

func (j *healthJudge) overrun() (TaskHealth, bool) {
	b := j.e.spec.RunBudget
	if b <= 0 {
		return TaskHealth{}, false
	}
	if !j.inFlight.IsZero() {
		if d := j.now.Sub(j.inFlight); d > b {
			return TaskHealth{State: HealthOverrun, Since: j.inFlight.Add(b), Reason: fmt.Sprintf("the run started at %s on this node "+
				"has run for %s, over its runBudget (%s)", stamp(j.inFlight), d, b)}, true
		}
		return TaskHealth{}, false
	}
	var last *taskstate.Run
	for i, r := range j.runs {
		if !r.Start.IsZero() && (last == nil || r.Start.After(last.Start)) {
			last = &j.runs[i]
		}
	}
	if last == nil || last.Duration <= b {
		return TaskHealth{}, false
	}
	return TaskHealth{State: HealthOverrun, Since: last.Start.Add(b), Reason: fmt.Sprintf("the last run, started at %s on %s, took %s, "+
		"over its runBudget (%s)", stamp(last.Start), last.Node, last.Duration, b)}, true
}

func (j *healthJudge) failing() (TaskHealth, bool) {
	n := cmp.Or(j.e.spec.FailingAfter, DefaultFailingAfter)
	failed := failedInARow(j.runs, 0)
	if len(failed) < n {
		return TaskHealth{}, false
	}
	made := failed[len(failed)-n] // the failure that made the count
	last := failed[0]
	why := fmt.Sprintf("the last %d fires that ran failed", len(failed))
	if len(failed) == 1 {
		why = "the last fire that ran failed"
	}
	if n > 1 {
		why += " (failingAfter " + strconv.Itoa(n) + ")"
	}
	why += fmt.Sprintf("; the newest, at %s on %s: %s", stamp(last.Fire), last.Node, last.Outcome)
	if last.Error != "" {
		why += ": " + last.Error
	}
	return TaskHealth{State: HealthFailing, Since: made.Start.Add(made.Duration), Reason: why}, true
}

func (j *healthJudge) late() (TaskHealth, bool) {
	j.walk()
	t := j.newest
	if t.IsZero() {
		return TaskHealth{}, false
	}
	grace := j.grace()
	start := t.Add(j.offset(t))
	if r, ok := recordsByFire(j.runs)[t.UnixNano()]; ok && rank(r.Outcome) == 0 {
		// A backfill ran it later, as an operator asked: not a fire
		// that started late.
		if !r.Backfill && r.Start.Sub(start) > grace {
			return TaskHealth{State: HealthLate, Since: start.Add(grace), Reason: fmt.Sprintf("the fire at %s started %s after it, over its grace (%s)",
				stamp(t), r.Start.Sub(t), grace)}, true
		}
		return TaskHealth{}, false
	}
	if !j.newestUnexplained {
		return TaskHealth{}, false // explained: skipped for a reason, or covered by a run
	}
	first := t
	if len(j.unstated) > 0 && j.unstated[0].Before(t) {
		first = j.unstated[0]
	}
	return TaskHealth{State: HealthLate, Since: first.Add(j.offset(first)).Add(grace), Reason: fmt.Sprintf("the fire at %s has not started "+
		"%s after it (its grace); no run started since %s", stamp(t), grace, stamp(j.lastStart()))}, true
}

// failedInARow returns the newest fires that ran and failed (an error or
// a panic) in a row in runs (newest recorded first), newest first, at most
// limit of them (0: all): a fire's retries are attempts of one fire, the
// newest deciding; manual runs and fires that did not run do not count.
func failedInARow(runs []taskstate.Run, limit int) []taskstate.Run {
	var out []taskstate.Run
	seen := map[time.Time]bool{}
	for _, r := range runs {
		if r.Manual || r.Start.IsZero() || seen[r.Fire] {
			continue // not a run of a fire, or an earlier attempt of one counted
		}
		seen[r.Fire] = true
		if o := Outcome(r.Outcome); o != OutcomeError && o != OutcomePanic {
			break
		}
		if out = append(out, r); len(out) == limit {
			break
		}
	}
	return out
}

// stamp formats t for a reason; "never" for zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// healthProblems returns the problems of d's health options: lateAfter,
// downAfter, failingAfter and runBudget.
func healthProblems(d declared, unread map[string]bool, r lockRules) []Problem {
	var ps []Problem
	span := func(option string, p *time.Duration) bool {
		switch {
		case p == nil || unread[option]:
			return false
		case *p <= 0:
			ps = append(ps, Problem{Option: option, Value: p.String(), Rule: "must be positive"})
		case *p > MaxHealthSpan:
			ps = append(ps, Problem{Option: option, Value: p.String(), Rule: fmt.Sprintf("must not exceed %v (scheduling.MaxHealthSpan)", MaxHealthSpan)})
		default:
			return true
		}
		return false
	}
	set := false
	if span("lateAfter", d.LateAfter) {
		set = true
	}
	if span("downAfter", d.DownAfter) {
		set = true
		if d.LateAfter != nil && !unread["lateAfter"] && *d.LateAfter > 0 && *d.DownAfter < *d.LateAfter {
			ps = append(ps, Problem{Option: "downAfter", Value: d.DownAfter.String(), Rule: fmt.Sprintf("must not be below lateAfter (%v): "+
				"a fire is late before its task is down", *d.LateAfter)})
		}
	}
	if n := d.FailingAfter; n != nil && !unread["failingAfter"] {
		v := strconv.Itoa(*n)
		switch {
		case *n <= 0:
			ps = append(ps, Problem{Option: "failingAfter", Value: v, Rule: "must be positive"})
		case *n > taskstate.MaxHistory:
			ps = append(ps, Problem{Option: "failingAfter", Value: v, Rule: fmt.Sprintf("must not exceed %d (taskstate.MaxHistory): "+
				"the failures in a row are read from the task's history", taskstate.MaxHistory)})
		default:
			set = true
		}
	}
	if span("runBudget", d.RunBudget) {
		set = true
		if m := d.MaxRunTime; m != nil && !unread["maxRunTime"] && *m > 0 && *d.RunBudget >= *m {
			ps = append(ps, Problem{Option: "runBudget", Value: d.RunBudget.String(), Rule: fmt.Sprintf("must be below maxRunTime (%v): "+
				"a run is cancelled at it, and would never be over the budget", *m)})
		}
	}
	if set && !r.state {
		o, v := firstHealthOption(d)
		ps = append(ps, Problem{Option: o, Value: v, Rule: "needs a task state store (Config.State; scheduling.Module " +
			"takes it from the graph): the health is read from the history the nodes share"})
	}
	return ps
}

// firstHealthOption names the first health option d sets, and its value.
func firstHealthOption(d declared) (string, string) {
	switch {
	case d.LateAfter != nil:
		return "lateAfter", d.LateAfter.String()
	case d.DownAfter != nil:
		return "downAfter", d.DownAfter.String()
	case d.FailingAfter != nil:
		return "failingAfter", strconv.Itoa(*d.FailingAfter)
	}
	return "runBudget", d.RunBudget.String()
}
