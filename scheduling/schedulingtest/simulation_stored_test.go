package schedulingtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// storedHandler is the handler of every stored schedule of a history.
const storedHandler = "sim"

// storedSpec is one spec of a stored schedule in a history: "@every
// period", on lock, with its lock TTL and wait, renewal and overlap policy
// (skip, buffer-one or cancel-previous).
type storedSpec struct {
	period, ttl, wait time.Duration
	lock              string
	renew             bool
	overlap           string
	// retries is its Retry (0: none), with a backoff of a quarter period;
	// a spec that retries fails 40% of its runs.
	retries int
	// calendar is its option calendar ("" for none): the names of the
	// history's calendars whose excluded instants it skips (check r).
	calendar string
	// maxRuns is its option maxRuns (0 for none), the same in every spec
	// of the schedule (check s).
	maxRuns int
}

// storedArgs are a stored schedule's arguments: its period, which bounds
// its runs' length (0 to 1.5 periods).
type storedArgs struct {
	Period  time.Duration `json:"period"`
	Retries int           `json:"retries,omitempty"`
}

func (sp storedSpec) schedule(name string) taskstate.Schedule {
	opts := map[string]string{"lockTtl": sp.ttl.String()}
	if sp.wait > 0 {
		opts["lockWait"] = sp.wait.String()
	}
	if sp.renew {
		opts["renew"] = "true"
	}
	if sp.overlap != "" {
		opts["overlap"] = sp.overlap
	}
	if sp.retries > 0 {
		opts["retry"] = fmt.Sprint(sp.retries)
		opts["retryBackoff"] = (sp.period / 4).String()
	}
	if sp.calendar != "" {
		opts["calendar"] = sp.calendar
	}
	if sp.maxRuns > 0 {
		opts["maxRuns"] = fmt.Sprint(sp.maxRuns)
	}
	args, _ := json.Marshal(storedArgs{sp.period, sp.retries})
	return taskstate.Schedule{Name: name, Handler: storedHandler, Cron: "@every " + sp.period.String(), Lock: sp.lock,
		Options: opts, Args: args}
}

// specOf returns the spec that sc stores, or that p stores.
func specOf(cron, lock string, opts map[string]string) storedSpec {
	sp := storedSpec{lock: lock, overlap: opts["overlap"], renew: opts["renew"] == "true", calendar: opts["calendar"]}
	fmt.Sscan(opts["retry"], &sp.retries)
	fmt.Sscan(opts["maxRuns"], &sp.maxRuns)
	sp.period, _ = time.ParseDuration(strings.TrimPrefix(cron, "@every "))
	sp.ttl, _ = time.ParseDuration(opts["lockTtl"])
	sp.wait, _ = time.ParseDuration(opts["lockWait"])
	return sp
}

// task returns sp as a simTask named name: what touched reads.
func (sp storedSpec) task(name string) simTask {
	return simTask{name: name, lock: sp.lock, period: sp.period, ttl: sp.ttl, wait: sp.wait, overlap: sp.overlap}
}

// A storedOp is an operator's change of a stored schedule: its create,
// update or delete.
type storedOp struct {
	at   time.Time
	kind string // "create", "update", "delete"
	name string
	spec storedSpec
}

// storedPlan draws the stored schedules of a history and their changes,
// in two histories of three: one or two schedules, each created within
// the first seconds, then updated (its cron, lock, options: some of them)
// or deleted every 4 to 10 s (one time in five 1 to 3 s, before the update
// before is in force, or while its gate is closed), and created again
// after a delete (on the lock of its life). The draws are rolls, as
// retrySpecs' are.
func (w *simWorld) storedPlan() {
	if w.sroll("stored") < 1.0/3 {
		return
	}
	for i := range 1 + int(w.sroll("stored n")*2) {
		name := fmt.Sprint("s", i)
		at := w.start.Add(time.Second + time.Duration(w.sroll("stored create", i)*float64(5*time.Second)))
		spec := w.storedSpecOf(name, 0, nil)
		w.storedOps = append(w.storedOps, storedOp{at, "create", name, spec})
		live, oneLock := true, true // oneLock: every spec of its life had the same lock
		for k := 1; ; k++ {
			gap := 4*time.Second + time.Duration(w.sroll("stored gap", i, k)*float64(6*time.Second))
			if w.sroll("stored soon", i, k) < 0.2 {
				// Before the update before comes in force, or while its
				// gate is closed.
				gap = time.Second + time.Duration(w.sroll("stored gap", i, k)*float64(2*time.Second))
			}
			at = at.Add(gap)
			if at.After(w.start.Add(simSpan - cooldown)) {
				break
			}
			switch r := w.sroll("stored op", i, k); {
			case live && r < 0.75:
				lock := spec.lock
				spec = w.storedSpecOf(name, k, &spec)
				oneLock = oneLock && spec.lock == lock
				w.storedOps = append(w.storedOps, storedOp{at, "update", name, spec})
			case live:
				live = false
				w.storedOps = append(w.storedOps, storedOp{at: at, kind: "delete", name: name})
			case oneLock:
				// Created again on the lock it had (every spec of its life
				// had): on another, its fires would not wait for a run of
				// the deleted one going (no gate: a defect not fixed, seed
				// 5156929674013269363 history 88 ran fire 12s of the
				// deleted schedule beside the new one's fires at 15.5s and
				// 16s).
				live = true
				lock := spec.lock
				spec = w.storedSpecOf(name, k, nil)
				spec.lock = lock
				w.storedOps = append(w.storedOps, storedOp{at, "create", name, spec})
			}
		}
	}
}

// storedSpecOf draws the k-th spec of stored schedule name; an update of
// prev keeps some of its cron, lock and options, and changes one at least.
func (w *simWorld) storedSpecOf(name string, k int, prev *storedSpec) storedSpec {
	r := func(what string) float64 { return w.sroll("stored spec", what, name, k) }
	periods := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	sp := storedSpec{period: periods[int(r("period")*3)], lock: []string{"L0", "L1", "S" + name}[int(r("lock")*3)]}
	sp.ttl = max(sp.period/2+time.Duration(r("ttl")*float64(2*sp.period)), scheduling.MinRenewTTL)
	if r("wait") < 0.5 {
		sp.wait = time.Duration(r("wait length") * float64(2*sp.period))
	}
	sp.renew = r("renew") < 0.5
	switch o := r("overlap"); {
	case o < 0.25:
		sp.overlap = scheduling.OverlapBufferOne
	case o < 0.5:
		sp.overlap = scheduling.OverlapCancelPrevious
	}
	if r("retry") < 0.3 {
		sp.retries = 1 + int(r("retries")*2)
	}
	sp.calendar = w.calendarOption(name, k)
	sp.maxRuns = w.maxRunsOf(name)
	if prev == nil {
		return sp
	}
	keep := int(r("keep") * 3) // the one that surely changes: 0 cron, 1 lock, 2 options
	if keep != 0 && r("keep cron") < 0.5 {
		sp.period = prev.period
	}
	if keep != 1 && r("keep lock") < 0.5 {
		sp.lock = prev.lock
	}
	if keep != 2 && r("keep options") < 0.5 {
		sp.ttl, sp.wait, sp.renew, sp.overlap, sp.retries, sp.calendar = prev.ttl, prev.wait, prev.renew, prev.overlap, prev.retries, prev.calendar
	}
	if sp == *prev {
		sp.ttl += 100 * time.Millisecond
	}
	return sp
}

// actStored does op through s, as an operator would through any node's
// API; its store calls fail or lose their reply as any other's.
func (w *simWorld) actStored(s *scheduling.Scheduler, op storedOp) {
	if s == nil {
		return
	}
	ctx := context.Background()
	switch op.kind {
	case "create":
		_ = s.CreateSchedule(ctx, op.spec.schedule(op.name))
	case "update":
		_ = s.UpdateSchedule(ctx, op.spec.schedule(op.name))
	case "delete":
		_ = s.DeleteSchedule(ctx, op.name)
	}
}

// storedActor returns a live node that no pause holds for the next few
// seconds, through which an operator changes a stored schedule, or nil.
// (A change held by a pause would be stored after the instant it set for
// its spec to come in force: the nodes could not have read it by then.)
func (w *simWorld) storedActor(running map[string]*scheduling.Scheduler) *scheduling.Scheduler {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.nodes {
		if s := running[n.name]; s != nil && !w.dead[n.name] &&
			!slices.ContainsFunc(n.pauses, func(p window) bool { return p.overlaps(now.Add(-time.Second), now.Add(4*time.Second)) }) {
			return s
		}
	}
	return nil
}

// storedWork is the handler of the stored schedules: a run lasts 0 to 1.5
// periods of its spec, or until its context ends, and records its hold,
// as work does.
func (w *simWorld) storedWork(ctx context.Context, args json.RawMessage) error {
	var a storedArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return err
	}
	run, _ := scheduling.RunFromContext(ctx)
	slot := ""
	if l, ok := locks.FromContext(ctx); ok {
		slot = l.Key()
	}
	from := time.Now()
	d := time.Duration(w.sroll("stored run", run.Task, run.Fire.UnixNano(), run.Node) * float64(3*a.Period/2))
	cut := false
	select {
	case <-time.After(d):
	case <-ctx.Done():
		cut = true
	}
	h := interval{task: run.Task, node: run.Node, fire: run.Fire, manual: run.Manual, attempt: run.Attempt, from: from,
		slot: slot, superseded: cut && errors.Is(context.Cause(ctx), scheduling.ErrSuperseded), to: time.Now(), backfill: run.Backfill, cut: cut}
	switch {
	case cut:
		h.failed = "cut"
	case a.Retries > 0 && w.sroll("stored fail", run.Task, run.Fire.UnixNano(), run.Attempt) < 0.4:
		h.failed = "error"
	}
	w.mu.Lock()
	w.held = append(w.held, h)
	w.mu.Unlock()
	switch h.failed {
	case "cut":
		return fmt.Errorf("simulated run cut: %w", context.Cause(ctx))
	case "error":
		return fmt.Errorf("simulated failure: %s fire %v attempt %d", run.Task, run.Fire, run.Attempt)
	}
	return nil
}

// isStored reports whether task is a stored schedule of the history.
func (w *simWorld) isStored(task string) bool {
	return slices.ContainsFunc(w.storedOps, func(op storedOp) bool { return op.name == task })
}

// schedWrite is a change of a stored schedule that took effect in the
// store: its order, true time, node, and the schedule as stored (for a
// delete, its name alone).
type schedWrite struct {
	seq     int
	at      time.Time
	node    string
	sc      taskstate.Schedule
	deleted bool
}

// A version is one spec of a stored schedule in the store's log: in force
// for the instants from from (its Schedule.From) to to (the next update's
// From; zero for none), and until deleted (the true time of the delete
// that ended it; zero for none), after which the nodes stop firing it
// within a poll.
type version struct {
	spec     storedSpec
	written  time.Time
	from, to time.Time
	deleted  time.Time
	life     int // the create it follows: 0 for the first
}

// versions returns the versions of stored schedule name, in the store's
// order.
func (w *simWorld) versions(name string) []version {
	w.store.mu.Lock()
	writes := slices.Clone(w.store.schedWrites)
	w.store.mu.Unlock()
	var out []version
	life := -1
	for _, wr := range writes {
		if wr.sc.Name != name {
			continue
		}
		last := len(out) - 1
		switch {
		case wr.deleted:
			// It ends the versions of its life, that in force and the
			// update to come in force, if any.
			for i := range out {
				if out[i].life == life && out[i].deleted.IsZero() {
					out[i].deleted = wr.at
				}
			}
			continue
		case len(wr.sc.Replaced) == 0:
			life++
		case last >= 0:
			out[last].to = wr.sc.From
		}
		out = append(out, version{spec: specOf(wr.sc.Cron, wr.sc.Lock, wr.sc.Options), written: wr.at, from: wr.sc.From, life: life})
	}
	return out
}

// deleteGrace is how long after a delete a node may still fire the
// schedule: it reads the delete at its next poll.
const deleteGrace = scheduling.DefaultRequestPoll + 2*maxSkew + 500*time.Millisecond

// inForce returns the version of vs in force at instant t, and whether a
// node may fire it at t (a fire within deleteGrace of its delete may run,
// or not).
func inForce(vs []version, t time.Time) (v version, ok, sure bool) {
	for _, v := range slices.Backward(vs) {
		if t.Before(v.from) || !v.to.IsZero() && !t.Before(v.to) {
			continue
		}
		switch {
		case v.deleted.IsZero() || t.Before(v.deleted.Add(-2*maxSkew)):
			return v, true, true
		case t.Before(v.deleted.Add(deleteGrace)):
			return v, true, false
		}
	}
	return version{}, false, false
}

// runVersion returns the version of vs that h, a run of the schedule, ran
// by: the one in force at its fire (a backfill's, backfillSpec's), or, if
// h is not of it (its instant, its lock), a version that a delete ended
// in the grace before it (a node reads the delete at its poll: its fire
// may come after the schedule's create again, whose first version is in
// force then: seed 6468528934990374960 history 136), and whether there is
// one.
func runVersion(vs []version, h interval) (version, bool) {
	v, ok, _ := inForce(vs, h.fire)
	if h.backfill {
		v, ok = backfillSpec(vs, h.fire, h.from)
	}
	if ok && onSchedule(h.fire, v.spec.period) && h.slot == v.spec.lock || h.backfill {
		return v, ok
	}
	for _, u := range vs {
		if !u.deleted.IsZero() && !h.fire.Before(u.from) && (u.to.IsZero() || h.fire.Before(u.to)) &&
			h.fire.Before(u.deleted.Add(deleteGrace)) && onSchedule(h.fire, u.spec.period) && h.slot == u.spec.lock {
			return u, true
		}
	}
	return v, ok
}

// onSchedule reports whether t is an instant of "@every period".
func onSchedule(t time.Time, period time.Duration) bool {
	return period > 0 && t.Truncate(period).Equal(t)
}

// stale reports whether node may have missed a change of the stored
// schedules before at: it was down, away, or failed a poll or a read of
// the schedules in the seconds before.
func (w *simWorld) stale(node string, at time.Time) bool {
	span := window{at.Add(-4*scheduling.DefaultRequestPoll - 2*maxSkew), at.Add(time.Millisecond)}
	n := w.nodeOf(node)
	return w.down(n, span) || w.away(n, span) || w.faulted(node, "poll", span)
}

// checkStored is check (p), on the stored schedules' runs held and the
// listeners' records, by the versions the store's log gives:
//
//	(p) every run of a stored schedule is of an instant of the spec in
//	    force at it (not before its create, not after its delete and a
//	    poll), under that spec's lock; no two runs of a schedule overlap in
//	    time, across its updates (a cron, lock or options change); and
//	    each instant of a version, a poll after its create and before its
//	    delete, that no fault touched and no run contended, runs exactly
//	    once.
func (w *simWorld) checkStored(t *testing.T, held []interval, recs []*schedulingtest.Recorder, st *stats) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	names := map[string]bool{}
	for _, op := range w.storedOps {
		names[op.name] = true
	}
	w.store.mu.Lock()
	for _, wr := range w.store.schedWrites {
		if !strings.HasPrefix(wr.sc.Name, "@calendar:") { // a calendar's: check (r)
			st.storedWrites++
		}
	}
	w.store.mu.Unlock()
	for name := range names {
		vs := w.versions(name)
		var hs []interval
		for _, h := range held {
			if h.task == name {
				hs = append(hs, h)
			}
		}
		st.storedRuns += len(hs)
		// A fire whose first attempt ran on a node that may have missed
		// the change (stale, below) has its retries run by the spec in
		// force at its instant, on any node: the same fire, excused with it.
		staleFires := map[time.Time]bool{}
		for _, h := range hs {
			if h.attempt <= 1 && !h.manual && !h.backfill && w.stale(h.node, h.from) {
				staleFires[h.fire] = true
			}
		}
		for _, h := range hs {
			v, ok := runVersion(vs, h)
			switch {
			case ok && onSchedule(h.fire, v.spec.period) && h.slot == v.spec.lock:
			case w.stale(h.node, h.from):
			case h.attempt > 1 && !h.manual && staleFires[h.fire]:
			case !ok:
				t.Errorf("%s: (p) %s fire %v ran on %s at %v, when no spec of the schedule was in force (versions %s)",
					pre, name, h.fire.Sub(w.start), h.node, h.from.Sub(w.start), w.versionsOf(vs))
			default:
				t.Errorf("%s: (p) %s fire %v ran on %s at %v under lock %q, not an instant of the spec in force (every %v, lock %q; versions %s)",
					pre, name, h.fire.Sub(w.start), h.node, h.from.Sub(w.start), h.slot, v.spec.period, v.spec.lock, w.versionsOf(vs))
			}
		}
		slices.SortFunc(hs, func(a, b interval) int { return a.from.Compare(b.from) })
		for i := 1; i < len(hs); i++ {
			for j := i - 1; j >= 0 && j >= i-8; j-- {
				if hs[j].to.After(hs[i].from) {
					t.Errorf("%s: (p) two runs of %s at once: %s (versions %s)", pre, name, w.runsOf([]interval{hs[j], hs[i]}), w.versionsOf(vs))
				}
			}
		}
		// Liveness.
		reports := map[int64][]string{}
		for _, r := range recs {
			for _, e := range r.Started() {
				if e.Task == name && e.Attempt <= 1 && !e.Manual && !e.Backfill {
					reports[e.Fire.UnixNano()] = append(reports[e.Fire.UnixNano()], "run")
				}
			}
			for _, e := range r.Skips() {
				if e.Task == name && e.Attempt <= 1 && !e.Manual && !e.Backfill {
					reports[e.Fire.UnixNano()] = append(reports[e.Fire.UnixNano()], string(e.Outcome))
				}
			}
		}
		for i, v := range vs {
			from := maxTime(v.from, v.written.Add(scheduling.DefaultRequestPoll+2*maxSkew+500*time.Millisecond), w.start.Add(warmup))
			to := w.start.Add(simSpan - cooldown)
			if !v.to.IsZero() && v.to.Before(to) {
				to = v.to
			}
			if !v.deleted.IsZero() && v.deleted.Add(-2*maxSkew).Before(to) {
				to = v.deleted.Add(-2 * maxSkew)
			}
			task := v.spec.task(name)
			for f := from.Truncate(v.spec.period); f.Before(to); f = f.Add(v.spec.period) {
				if f.Before(from) {
					continue
				}
				st.storedFires++
				rs := reports[f.UnixNano()]
				ran, contended := 0, false
				for _, o := range rs {
					switch scheduling.Outcome(o) {
					case "run":
						ran++
					case scheduling.OutcomeLockHeld, scheduling.OutcomeRunning, scheduling.OutcomeLockPending, scheduling.OutcomeBuffered, scheduling.OutcomeBufferFull,
						scheduling.OutcomePaused, scheduling.OutcomeRetrying:
						contended = true
					case scheduling.OutcomeAlreadyRun:
						// A fire that waited for its turn behind the fires
						// of other tasks on its lock (dispatch), while runs
						// held it, found a later fire claimed.
						contended = contended || w.lockBusy(held, name, v.spec.lock, window{f.Add(-2 * maxSkew), f.Add(v.spec.period + 2*maxSkew)})
					}
				}
				span := window{f.Add(-2*maxSkew - time.Second), f.Add(2*maxSkew + task.wait + task.ttl + 2*task.period + time.Second)}
				touched := w.touched(task, span)
				for j := i - 1; j >= 0 && vs[j].life == v.life && !touched; j-- {
					// While the gate is closed its fires take the old locks
					// too (an update keeps the closed gate of the one
					// before).
					touched = w.touched(vs[j].spec.task(name), span)
				}
				if touched || contended || w.storedExempt(t, name, v, f, st) {
					continue
				}
				st.storedFree++
				if ran != 1 {
					t.Errorf("%s: (p) %s fire %v: untouched and uncontended, ran %d times (reports %v; versions %s)",
						pre, name, f.Sub(w.start), ran, rs, w.versionsOf(vs))
				}
			}
		}
	}
}

// versionsOf describes vs in simulated time since the history's start.
func (w *simWorld) versionsOf(vs []version) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{every %v lock %s ttl %v wait %v renew %v overlap %q written %v from %v", v.spec.period, v.spec.lock, v.spec.ttl,
			v.spec.wait, v.spec.renew, v.spec.overlap, v.written.Sub(w.start), v.from.Sub(w.start))
		if v.spec.calendar != "" {
			fmt.Fprintf(&b, " calendar %s", v.spec.calendar)
		}
		if v.spec.maxRuns > 0 {
			fmt.Fprintf(&b, " maxRuns %d", v.spec.maxRuns)
		}
		if !v.to.IsZero() {
			fmt.Fprintf(&b, " to %v", v.to.Sub(w.start))
		}
		if !v.deleted.IsZero() {
			fmt.Fprintf(&b, " deleted %v", v.deleted.Sub(w.start))
		}
		b.WriteString("}")
	}
	return "[" + b.String() + "]"
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// audits returns the audit of every task that s, a node up since the
// history's start, runs at the end: its code tasks and the stored
// schedules it read as the store holds them, each read with no fault, a
// horizon after the history so that every instant of it is judged.
func (w *simWorld) audits(t *testing.T, s *scheduling.Scheduler) map[string]scheduling.Audit {
	ctx := context.Background()
	scs, err := w.store.inner.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scheduling.Audit{}
	for _, ti := range s.Tasks() {
		if ti.Schedule != nil {
			i := slices.IndexFunc(scs, func(sc taskstate.Schedule) bool { return sc.Name == ti.Name })
			if i < 0 {
				continue // deleted: no audit
			}
			a, _ := taskstate.EncodeSchedule(scs[i])
			b, _ := taskstate.EncodeSchedule(*ti.Schedule)
			if string(a) != string(b) {
				continue // this node's view is stale: it audits by what it read
			}
		}
		a, err := s.Audit(ctx, ti.Name)
		if err != nil {
			t.Errorf("seed %d history %d: Audit of %s: %v", w.seed, w.hist, ti.Name, err)
			continue
		}
		out[ti.Name] = a
	}
	return out
}

// checkAudits is check (q), on the audits of the tasks at the end and the
// listeners' records:
//
//	(q) the audit of a task lists every instant of the spec in force at it
//	    (a stored schedule's since its last create) in its range, and no
//	    other; an instant it finds ran started a run; an instant whose
//	    run started is found ran, unless a fault may have lost the run's
//	    record (its node died or stopped after it started, or a store call
//	    of its node on the task failed).
func (w *simWorld) checkAudits(t *testing.T, audits map[string]scheduling.Audit, recs []*schedulingtest.Recorder, st *stats) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	started := map[schedulingtest.FireKey][]scheduling.Event{}
	for _, r := range recs {
		for _, e := range r.Started() {
			if !e.Manual { // a backfill's run runs its instant
				k := schedulingtest.Key(e.Task, e.Fire)
				started[k] = append(started[k], e)
			}
		}
	}
	for name, a := range audits {
		if a.Note != "" {
			t.Errorf("%s: (q) the audit of %s says: %s", pre, name, a.Note)
		}
		if a.From.IsZero() || a.From.After(a.To) {
			continue
		}
		var vs []version
		if w.isStored(name) {
			vs = w.versions(name)
			last := vs[len(vs)-1].life
			vs = slices.DeleteFunc(vs, func(v version) bool { return v.life != last })
		}
		want := map[int64]bool{}
		if vs == nil {
			p := w.taskOf(name).period
			for f := a.From.Truncate(p); !f.After(a.To); f = f.Add(p) {
				if !f.Before(a.From) {
					want[f.UnixNano()] = true
				}
			}
		} else {
			for _, v := range vs {
				for f := maxTime(a.From, v.from).Truncate(v.spec.period); !f.After(a.To) && (v.to.IsZero() || f.Before(v.to)); f = f.Add(v.spec.period) {
					if !f.Before(a.From) && !f.Before(v.from) {
						want[f.UnixNano()] = true
					}
				}
			}
		}
		listed := map[int64]bool{}
		for _, f := range a.Fires {
			if f.Fire.After(a.To) {
				continue
			}
			if f.Fire.Before(w.start.Add(simSpan)) { // after it, the nodes are stopped: every instant is missed
				st.audited++
				if f.Status == scheduling.FireMissed {
					st.auditMissed++
				}
			}
			listed[f.Fire.UnixNano()] = true
			if !want[f.Fire.UnixNano()] {
				t.Errorf("%s: (q) the audit of %s lists %v, no instant of the spec in force (versions %s)", pre, name, f.Fire.Sub(w.start), w.versionsOf(vs))
			}
			runs := started[schedulingtest.Key(name, f.Fire)]
			switch {
			case f.Status == scheduling.FireRan && len(runs) == 0:
				t.Errorf("%s: (q) the audit of %s finds %v ran (%+v), and no run of it started", pre, name, f.Fire.Sub(w.start), f)
			case f.Status != scheduling.FireRan && len(runs) > 0 && !w.recordLost(name, runs):
				t.Errorf("%s: (q) the audit of %s finds %v %s (%+v), and it ran on %s at %v", pre, name, f.Fire.Sub(w.start), f.Status, f,
					runs[0].Node, runs[0].Start.Sub(w.start))
			}
		}
		for f := range want {
			if !listed[f] {
				t.Errorf("%s: (q) the audit of %s [%v, %v] leaves out instant %v of the spec in force", pre, name,
					a.From.Sub(w.start), a.To.Sub(w.start), time.Unix(0, f).Sub(w.start))
			}
		}
	}
}

// recordLost reports whether a fault may have lost the record of one of
// runs: its node died or stopped after it started, or a store call of its
// node on the task failed or lost its reply after it started.
func (w *simWorld) recordLost(task string, runs []scheduling.Event) bool {
	for _, e := range runs {
		n := w.nodeOf(e.Node)
		after := window{e.Start.Add(-maxSkew - time.Second), w.start.Add(simSpan + time.Minute)}
		if slices.ContainsFunc(n.kills, func(k window) bool { return after.overlaps(k.from, k.to) }) ||
			slices.ContainsFunc(n.leaves, func(l window) bool { return after.overlaps(l.from, l.to) }) ||
			w.faulted(e.Node, "@"+task, after) {
			return true
		}
	}
	return false
}

// allTasks returns the tasks declared in code, then the stored schedules
// (by name alone): every task whose history the checks read.
func (w *simWorld) allTasks() []simTask {
	out := slices.Clone(w.tasks)
	for _, op := range w.storedOps {
		if !slices.ContainsFunc(out, func(st simTask) bool { return st.name == op.name }) {
			out = append(out, simTask{name: op.name})
		}
	}
	return out
}

// sroll is roll with the bits mixed (splitmix64's finalizer): FNV-1a
// spreads a difference in its input's last bytes poorly, so that rolls of
// parts that differ only at their end (the k-th spec of a schedule) are
// close.
func (w *simWorld) sroll(parts ...any) float64 {
	x := uint64(w.roll(parts...) * (1 << 53))
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// lockBusy reports whether a run of a task other than task held lock in
// span.
func (w *simWorld) lockBusy(held []interval, task, lock string, span window) bool {
	return slices.ContainsFunc(held, func(h interval) bool { return h.task != task && h.slot == lock && span.overlaps(h.from, h.to) })
}

// recentBackfill draws the backfill over recent instants of a history,
// in half of them: of a locked task declared in code (not cancel-previous)
// or of a stored schedule, through any live node, over the eight seconds
// before it (a second before it at the latest). The draws are rolls.
func (w *simWorld) recentBackfill() (task string, at time.Time) {
	if w.sroll("recent backfill") < 0.5 {
		return "", time.Time{}
	}
	// Not allow: Backfill refuses an allow task's recent instants, whose
	// scheduled runs may still be going in another slot (before it did
	// not, and seed 8 history 82 ran t1's fire 18s twice).
	names := slices.DeleteFunc(w.locked(), func(n string) bool { return w.taskOf(n).overlap == scheduling.OverlapAllow })
	for _, op := range w.storedOps {
		if !slices.Contains(names, op.name) {
			names = append(names, op.name, op.name) // as often as two code tasks
		}
	}
	if len(names) == 0 {
		return "", time.Time{}
	}
	task = names[int(w.sroll("recent backfill task")*float64(len(names)))]
	return task, w.start.Add(10*time.Second + time.Duration(w.sroll("recent backfill at")*float64(simSpan-cooldown-10*time.Second)))
}

// checkRecentBackfills is check (o) over recent instants: a backfill runs
// no instant that ran already (a scheduled, catch-up, takeover's or
// waiting fire's run), unless that run's record may have been lost (the
// limit Backfill states: the backfill does not know it ran); its instant
// is one of the spec in force at it; and it does not run while its task
// was paused on every node (it waits for the resume).
func (w *simWorld) checkRecentBackfills(t *testing.T, recs []*schedulingtest.Recorder, held []interval) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	runs := map[schedulingtest.FireKey][]scheduling.Event{}
	var backfills []scheduling.Event
	for _, r := range recs {
		for _, e := range r.Started() {
			switch {
			case e.Backfill:
				backfills = append(backfills, e)
			case !e.Manual && e.Attempt <= 1:
				k := schedulingtest.Key(e.Task, e.Fire)
				runs[k] = append(runs[k], e)
			}
		}
	}
	// A run whose lease ended under it (cut: its lock TTL ran out, it was
	// not renewed in time) sends its record after the lease ended: a
	// backfill may take its instant before the record is in, the limit
	// that Backfill states.
	cut := map[schedulingtest.FireKey]bool{}
	for _, h := range held {
		if !h.backfill && h.attempt <= 1 && !h.manual && h.cut {
			cut[schedulingtest.Key(h.task, h.fire)] = true
		}
	}
	for _, b := range backfills {
		k := schedulingtest.Key(b.Task, b.Fire)
		if others := runs[k]; len(others) > 0 && !w.recordLost(b.Task, others) && !cut[k] {
			t.Errorf("%s: (o) backfill of %s ran instant %v on %s at %v, which ran on %s at %v", pre, b.Task, b.Fire.Sub(w.start),
				b.Node, b.Start.Sub(w.start), others[0].Node, others[0].Start.Sub(w.start))
		}
		if w.isStored(b.Task) {
			vs := w.versions(b.Task)
			if v, ok := backfillSpec(vs, b.Fire, b.Start); !ok || !onSchedule(b.Fire, v.spec.period) {
				t.Errorf("%s: (o) backfill of %s ran instant %v on %s, no instant of the spec in force (versions %s)", pre, b.Task,
					b.Fire.Sub(w.start), b.Node, w.versionsOf(vs))
			}
		} else if p := w.taskOf(b.Task).period; !onSchedule(b.Fire, p) {
			t.Errorf("%s: (o) backfill of %s ran instant %v on %s, no instant of its schedule", pre, b.Task, b.Fire.Sub(w.start), b.Node)
		}
		if w.store.pausedAround(b.Task, b.Start.Add(-2*maxSkew-scheduling.DefaultRequestPoll), b.Start.Add(maxSkew)) &&
			!w.touched(simTask{name: b.Task, lock: w.taskOf(b.Task).lock}, window{b.Start.Add(-2*maxSkew - 2*time.Second), b.Start.Add(time.Second)}) {
			t.Errorf("%s: (o) backfill of %s ran instant %v on %s at %v while the task was paused on every node", pre, b.Task,
				b.Fire.Sub(w.start), b.Node, b.Start.Sub(w.start))
		}
	}
}

// backfillSpec returns the version by which a backfill run at at runs
// instant fire: the one in force at it, or, before the schedule was
// created (a backfill may reach back past it), the first of the life the
// schedule had at at.
func backfillSpec(vs []version, fire, at time.Time) (version, bool) {
	first := -1
	for i, v := range vs {
		if v.written.After(at.Add(maxSkew)) { // at is on a node's clock
			break
		}
		if i == 0 || v.life != vs[i-1].life {
			first = i
		}
	}
	if first >= 0 && fire.Before(vs[first].from) {
		return vs[first], true
	}
	v, ok, _ := inForce(vs, fire)
	return v, ok
}

// retriesOf returns the most retries a spec of task has: the task's Retry,
// or for a stored schedule its specs' most.
func (w *simWorld) retriesOf(task string) int {
	n := w.taskOf(task).retries
	for _, op := range w.storedOps {
		if op.name == task {
			n = max(n, op.spec.retries)
		}
	}
	return n
}
