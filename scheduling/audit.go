package scheduling

import (
	"context"
	"fmt"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// A FireStatus is what became of one scheduled instant of a task in the
// cluster, as [Scheduler.Audit] finds it.
type FireStatus string

// The statuses of an audited instant.
const (
	// FireRan: a node ran it (whatever the task returned: Outcome says).
	FireRan FireStatus = "ran"
	// FireSkipped: it did not run, for a reason that is part of the
	// design: the task was paused, or a run held its lock (another task's
	// on the same key, a manual run, or the task's previous run, still
	// going).
	FireSkipped FireStatus = "skipped"
	// FireFailed: the nodes that reached it failed to take its lock or
	// read the store, or reached it too late to claim it.
	FireFailed FireStatus = "failed"
	// FireMissed: no node recorded anything for it, and no recorded run
	// held its lock then. The nodes were down, stuck, or could not record
	// it (a node that dies with records kept for the store loses them),
	// or a lease of a dead node held the lock until its TTL ran out.
	FireMissed FireStatus = "missed"
	// FireExcluded: a calendar of the task excludes the instant
	// ([Calendar]); no node runs it, and it is never missed. Detail names
	// the calendar.
	FireExcluded FireStatus = "excluded"
	// FirePending: no record yet, but a run of it may still be going, or
	// its record on the way: it is younger than the audit's horizon.
	FirePending FireStatus = "pending"
)

// An AuditedFire is one scheduled instant of an audit.
type AuditedFire struct {
	Fire   time.Time
	Status FireStatus
	// Outcome is the outcome of the record that decided the status, such
	// as "ok" or "skipped: paused", or the one the audit derived:
	// OutcomeLockHeld, OutcomeRunning. "" for a missed or pending instant.
	Outcome Outcome
	Node    string // the node of that record; "" if derived or missed
	// Attempt is that record's attempt at the fire: 1 for its first run,
	// k+1 for its k-th retry (the newest record of a fire decides a run's
	// status: its last attempt); 0 if derived or missed.
	Attempt int
	// Detail is the record's error, or what held the lock: "run of
	// TASK at FIRE on NODE".
	Detail string
}

// An Audit compares the instants a task's schedule produced with the fires
// the cluster recorded (see [Scheduler.Audit]).
type Audit struct {
	Task string
	// From and To bound the instants audited, both included; To is the
	// horizon: later instants are pending. From is zero, and Fires empty,
	// when no instant could be audited yet.
	From, To time.Time
	// Fires are the audited instants, newest first, pending ones included,
	// at most MaxAuditFires of them (the newest).
	Fires []AuditedFire
	// The number of instants of each status, over every instant from
	// From, listed or not: those in [From, To], and the later ones that a
	// record already explains (pending ones are not counted).
	Ran, Skipped, Failed, Missed int
	// Excluded is the number of instants that the task's calendars
	// excluded, counted apart from Skipped.
	Excluded int
	// LastMissed is the newest missed instant; zero if none.
	LastMissed time.Time
	// Note says why the audit covers less than it should, and the setting
	// that would cover it: the shared history keeps too few runs of the
	// task to reach back past the horizon (To is then From: nothing is
	// judged). "" otherwise.
	Note string
}

// AuditWindow is the longest span an audit looks back over.
const AuditWindow = 24 * time.Hour

// MaxAuditFires bounds the instants an Audit lists.
const MaxAuditFires = 1000

// auditGrace is how long after a run's end its record may take to land:
// the recorder's linger, a store call, a retry.
const auditGrace = time.Minute

// heldSlack is how far apart in time a fire and a run that held its lock
// may be for the audit to take the run to have kept the fire from running
// (the fire's lateness, the lock step, the nodes' clock skew): a second, or
// a tenth of the schedule's interval if that is less, so that a run that
// ended just before the next instant does not cover it.
const heldSlack = time.Second

// Audit compares the instants the schedule of the task named name produced
// with the fires that every node recorded in the shared history, and says
// what became of each (a [FireStatus]).
//
// The instants audited are those of the history's span: from the fire of
// its oldest kept record (when a backfill's run ran, its instant being
// past; with no record, this scheduler's start), at
// most AuditWindow back, to the horizon: now, less the task's jitter and
// lock wait and the longest a run of the task can take unrecorded (its MaxRunTime; its lock TTL for a locked
// task that does not renew, as the run is cancelled when its lease ends;
// else the longest run in its history), less a minute for the record to
// land. Manual runs are not instants of the schedule: they are left out,
// but may hold the lock over one.
//
// Each instant is one of the spec in force at it: a stored schedule's
// instants from its From are those of its spec, and before, those of each
// spec it replaced ([taskstate.Schedule].Replaced) in the span that spec
// was in force; none before the oldest known spec came in force (for a
// schedule created after the node started, its creation). An audit never
// reports an instant of a spec that was not in force then.
//
// An instant is, in this order: ran, if some node recorded a run of it;
// skipped, if a node recorded it paused or skipped while a retry of an
// earlier fire was pending, or a recorded run of a task on the
// same lock key (this one's previous run included; for an unlocked task,
// only that) covered it; failed, if a node recorded a lock or store failure
// or reached it too late; missed otherwise. Only what a node records is
// known: a fire whose record a node could not write and lost (it died with
// the store down) is missed, as the cluster cannot tell it from one that
// nobody reached. A record that a node wrote late (its backlog after an
// outage) can push out of a full history the record of a later fire, which
// the audit then finds missed: keep the history (the store's length) longer
// than the fires of an outage.
//
// It reads the task's history, and that of each task on the same lock key.
// Without a task state store it fails with [ErrNoState].
func (s *Scheduler) Audit(ctx context.Context, name string) (Audit, error) {
	e, err := s.lookup(name)
	if err != nil {
		return Audit{}, err
	}
	runs, err := s.state.Runs(ctx, e.name, 0)
	if err != nil {
		return Audit{}, fmt.Errorf("scheduling: audit of %s: %w", e.name, err)
	}
	holders := make([]holder, len(runs)) // the runs that may have held the task's lock
	for i, r := range runs {
		holders[i] = holder{e.name, r}
	}
	if e.spec.Lock != "" {
		for _, o := range s.sharing(e) {
			more, err := s.state.Runs(ctx, o, 0)
			if err != nil {
				return Audit{}, fmt.Errorf("scheduling: audit of %s: the runs of %s, on the same lock: %w", e.name, o, err)
			}
			for _, r := range more {
				holders = append(holders, holder{o, r})
			}
		}
	}
	s.mu.Lock()
	start := s.startedAt
	spans := s.spans(e)
	s.mu.Unlock()
	now := s.clock.Now()
	a := auditSpans(spans, runs, holders, now, start, s.excludedBy)
	if !a.From.After(a.To) {
		return a, nil
	}
	// The oldest instant audited is younger than the horizon: every one is
	// pending. With the history full, the older ones are gone.
	if keep := s.historyKept(); keep > 0 && len(runs) >= taskstate.KeepOf(keep, e.historyKeep(now)) {
		a.Note = fmt.Sprintf("the shared history keeps the newest %d runs of the task, back to %s, and an instant is judged only once "+
			"older than %s (its run's time to end and be recorded): the audit judges none, and finds no miss; "+
			"it needs %d runs (the task state store's history, redis.history, postgres.history or etcd.history, "+
			"up to %d; beyond, fewer fires per lock TTL: a longer period, a shorter lockTtl or maxRunTime)",
			len(runs), a.From.UTC().Format(time.RFC3339), a.To.UTC().Format(time.RFC3339), historyNeed(e.sched, now.Sub(a.To), now),
			taskstate.MaxHistory)
	}
	a.To = a.From // never a reversed range
	return a, nil
}

// historyKept returns how many runs per task the task state store keeps,
// 0 if it does not say (taskstate.HistoryKeeper).
func (s *Scheduler) historyKept() int {
	if k, ok := s.state.(taskstate.HistoryKeeper); ok {
		return k.History()
	}
	return 0
}

// historyNeed is how many runs of a task on sched the shared history must
// keep for an audit whose horizon is lag behind now to judge as many
// instants as it leaves pending: the instants of twice lag, at least
// taskstate.DefaultHistory, at most taskstate.MaxHistory + 1 (beyond what
// any store keeps).
func historyNeed(sched schedule, lag time.Duration, now time.Time) int {
	n := 0
	for t := sched.Next(now.Add(-2 * lag)); !t.IsZero() && !t.After(now) && n <= taskstate.MaxHistory; t = sched.Next(t) {
		n++
	}
	return max(n, taskstate.DefaultHistory)
}

// historyKeep is how many runs of e the shared history keeps for e's audit
// to judge its fires (taskstate.TaskRun.Keep): historyNeed, computed at e's
// first record; 0 (the store's history length) when the audit's lag
// depends on the runs.
func (e *entry) historyKeep(now time.Time) int {
	if k := e.keep.Load(); k != 0 {
		return max(int(k), 0)
	}
	k := -1
	if lag, known := auditLag(e, 0); known {
		k = historyNeed(e.sched, lag, now)
	}
	e.keep.Store(int32(k))
	return max(k, 0)
}

// warnShortHistories logs, for each of entries whose audit could judge none
// of its fires with the history the store keeps for it (its length, or the
// task's historyKeep, at most taskstate.MaxHistory), the history it needs.
// s.mu is held.
func (s *Scheduler) warnShortHistories(entries []*entry, now time.Time) {
	keep := s.historyKept()
	if keep == 0 {
		return
	}
	for _, e := range entries {
		if need := e.historyKeep(now); need > taskstate.KeepOf(keep, need) {
			s.log.Warn("the shared history keeps too few runs for the task's audit to judge its fires: it would find no miss",
				"task", e.name, "history", taskstate.KeepOf(keep, need), "needs", need,
				"setting", "fewer fires per lock TTL (or maxRunTime) and minute: a longer period, a shorter lockTtl or maxRunTime")
		}
	}
}

// auditLag is how far behind now an audit of e judges instants: e's jitter
// and lock wait, the longest a run of it can take unrecorded, and a minute
// for the record to land. The longest run is e's MaxRunTime, else its lock
// TTL for a locked task that does not renew, else longest (the longest in
// its history); known is false when that came from longest.
func auditLag(e *entry, longest time.Duration) (lag time.Duration, known bool) {
	switch {
	case e.spec.MaxRunTime > 0:
		longest, known = e.spec.MaxRunTime, true
	case e.spec.Lock != "" && !e.spec.Renew:
		longest, known = e.spec.LockTTL, true
	}
	return e.spec.Jitter + e.spec.LockWait + longest + auditGrace, known
}

// A span is a spec of a task and the instants it was in force for: those
// from from (zero: as far back as the history goes) and before to (zero:
// up to now).
type span struct {
	e        *entry
	from, to time.Time
}

// spans returns the specs of e's task that the audit judges its instants
// by, newest first: e's own; for a stored schedule, in force from its From,
// then each spec it replaced, in force from its own From until the next
// one's. A replaced spec this node cannot parse any more ends the list,
// and the audit starts where the spec after it came in force: it reports
// no instant of a spec that was not in force. s.mu is held.
func (s *Scheduler) spans(e *entry) []span {
	if e.stored == nil || e.stored.From.IsZero() {
		return []span{{e: e}}
	}
	out := []span{{e: e, from: e.stored.From}}
	to := e.stored.From
	for _, p := range e.stored.Replaced {
		pe := s.pastEntry(e, p)
		if pe == nil || p.From.IsZero() {
			break
		}
		out = append(out, span{e: pe, from: p.From, to: to})
		to = p.From
	}
	return out
}

// pastEntry returns an entry of e's task with spec p, for the audit: its
// schedule and options, nil if they are not valid here. s.mu is held.
func (s *Scheduler) pastEntry(e *entry, p taskstate.PastSpec) *entry {
	t := NewTask(func(context.Context) error { return nil }, scheduleOptions(e.name, p.Cron, p.Lock, p.Options)...)
	rules := s.lockRules()
	rules.locked = nil // the lock was its own then
	cache := newParseCache(s.loc, 1)
	if validateTasks([]Task{t}, func(string) bool { return false }, rules, cache) != nil {
		return nil
	}
	sched, _ := cache.taskSchedule(t) // validated above
	spec := t.Spec()
	return &entry{flight: new(flight), name: e.name, cron: p.Cron, spec: &spec, sched: sched, index: -1, zone: exprZone(p.Cron, s.loc)}
}

// A holder is a recorded run that may have held an audited task's lock.
type holder struct {
	task string
	taskstate.Run
}

// sharing names the other tasks of the scheduler on e's lock key.
func (s *Scheduler) sharing(e *entry) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, o := range s.entries {
		if o != e && o.spec.Lock == e.spec.Lock {
			out = append(out, o.name)
		}
	}
	return out
}

// audit is Audit on what it read, of a task with one spec.
func audit(e *entry, runs []taskstate.Run, holders []holder, now, start time.Time) Audit {
	return auditSpans([]span{{e: e}}, runs, holders, now, start, nil)
}

// auditSpans is Audit on what it read, of a task whose spec in force at
// each instant spans say (newest first); excluded, if not nil, names the
// calendar that excludes an instant of an entry ("" for none).
func auditSpans(spans []span, runs []taskstate.Run, holders []holder, now, start time.Time, excluded func(*entry, time.Time) string) Audit {
	e := spans[0].e
	a := Audit{Task: e.name}
	var longest time.Duration
	for _, r := range runs {
		longest = max(longest, r.Duration)
	}
	// A jittered fire starts up to Jitter late, and may wait LockWait for
	// its lock.
	lag, _ := auditLag(e, longest)
	a.To = now.Add(-lag)
	from := start.Add(time.Nanosecond) // a scheduler's first fire follows its start
	if start.IsZero() {
		from = start
	}
	// From the oldest kept record, the history holds every record since
	// it was written: about its fire, but for a backfill's run, whose fire
	// is a past instant, when it ran (a backfill's taken placeholder, with
	// no start, tells neither).
	for i := len(runs) - 1; i >= 0; i-- {
		switch r := runs[i]; {
		case !r.Backfill:
			from = r.Fire
		case !r.Start.IsZero():
			from = r.Start
		default:
			continue
		}
		break
	}
	if from.IsZero() {
		return a // not started, nothing recorded
	}
	from = maxTime(from, now.Add(-AuditWindow))
	byFire := recordsByFire(runs)
	from = maxTime(from, spans[len(spans)-1].from)
	from = walkable(e.sched, from, now)
	a.From = from
	for i := len(spans) - 1; i >= 0; i-- {
		sp := spans[i]
		prev := time.Time{}
		for t := sp.e.sched.Next(maxTime(from, sp.from).Add(-time.Nanosecond)); !t.IsZero() && !t.After(now) &&
			(sp.to.IsZero() || t.Before(sp.to)); prev, t = t, sp.e.sched.Next(t) {
			gap := t.Sub(prev)
			if prev.IsZero() {
				gap = sp.e.sched.Next(t).Sub(t)
			}
			f := judge(t, byFire, holders, sp.e, min(heldSlack, gap/10))
			if f.Status == FireMissed && excluded != nil {
				// No record is needed of an instant that a calendar
				// excludes: no node runs it.
				if cal := excluded(sp.e, t); cal != "" {
					f.Status, f.Outcome, f.Detail = FireExcluded, OutcomeExcluded, "calendar "+cal
				}
			}
			if f.Status == FireMissed && t.After(a.To) {
				f.Status = FirePending
			}
			switch f.Status {
			case FireRan:
				a.Ran++
			case FireSkipped:
				a.Skipped++
			case FireExcluded:
				a.Excluded++
			case FireFailed:
				a.Failed++
			case FireMissed:
				a.Missed++
				a.LastMissed = t
			}
			a.Fires = append(a.Fires, f)
			if len(a.Fires) > 2*MaxAuditFires {
				a.Fires = append(a.Fires[:0], a.Fires[len(a.Fires)-MaxAuditFires:]...)
			}
		}
	}
	if len(a.Fires) > MaxAuditFires {
		a.Fires = a.Fires[len(a.Fires)-MaxAuditFires:]
	}
	for i, j := 0, len(a.Fires)-1; i < j; i, j = i+1, j-1 {
		a.Fires[i], a.Fires[j] = a.Fires[j], a.Fires[i]
	}
	return a
}

// maxAuditWalk bounds the instants an audit walks: a millisecond schedule
// without a record since a start a day ago would have 86 million.
const maxAuditWalk = 1_000_000

// walkable returns from, or a later instant from which sched has at most
// about maxAuditWalk instants up to now, judged by its first interval.
func walkable(sched schedule, from, now time.Time) time.Time {
	return walkableWithin(sched, from, now, maxAuditWalk)
}

// walkableWithin is walkable with at most about limit instants.
func walkableWithin(sched schedule, from, now time.Time, limit int64) time.Time {
	a := sched.Next(from.Add(-time.Nanosecond))
	b := sched.Next(a)
	if a.IsZero() || b.IsZero() || !b.After(a) {
		return from
	}
	if gap := b.Sub(a); int64(now.Sub(from)/gap) > limit { // a product could overflow
		return now.Add(-gap * time.Duration(limit))
	}
	return from
}

// rank orders the records of one instant: the best explains it.
func rank(o string) int {
	switch Outcome(o) {
	case OutcomeOK, OutcomeError, OutcomePanic, OutcomeCancelled:
		return 0
	case OutcomePaused, OutcomeRetrying, OutcomeBuffered, OutcomeBufferFull, OutcomeExcluded:
		return 1
	case OutcomeLockFailed, OutcomeMissed:
		return 2
	}
	return 3 // a placeholder of a taken request, or an outcome unknown here
}

// judge finds what became of instant t.
func judge(t time.Time, byFire map[int64]taskstate.Run, holders []holder, e *entry, slack time.Duration) AuditedFire {
	f := AuditedFire{Fire: t}
	if r, ok := byFire[t.UnixNano()]; ok {
		f.Outcome, f.Node, f.Detail, f.Attempt = Outcome(r.Outcome), r.Node, r.Error, max(r.Attempt, 1)
		switch rank(r.Outcome) {
		case 0:
			f.Status = FireRan
			return f
		case 1:
			f.Status = FireSkipped
			if f.Outcome == OutcomeExcluded {
				f.Status = FireExcluded
			}
			return f
		case 2:
			f.Status = FireFailed
		}
	}
	// A jittered fire tried its lock at its shifted start.
	tried := t
	if e.spec.Jitter > 0 {
		tried = t.Add(jitterOffset(e.name, t, e.spec.Jitter))
	}
	for _, h := range holders {
		if h.Start.IsZero() || h.Outcome == taskstate.OutcomeTaken {
			continue
		}
		node, task := h.Node, h.task
		if task == e.name && !h.Manual && !h.Fire.Before(t) {
			continue // this instant's own run, or a later one
		}
		if h.Start.After(tried.Add(slack)) || h.Start.Add(h.Duration).Before(tried.Add(-slack)) {
			continue
		}
		f.Status, f.Node = FireSkipped, ""
		f.Outcome = OutcomeLockHeld
		if task == e.name && !h.Manual {
			f.Outcome = OutcomeRunning
		}
		kind := "run"
		if h.Manual {
			kind = "manual run"
		}
		f.Detail = fmt.Sprintf("%s of %s at %s on %s", kind, task, h.Fire.UTC().Format(time.RFC3339Nano), node)
		return f
	}
	if f.Status == "" {
		f.Status = FireMissed
	}
	return f
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
