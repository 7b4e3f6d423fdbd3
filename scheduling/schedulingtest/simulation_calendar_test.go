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

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// The calendars and maxRuns of the stored schedules (checks r and s).
//
// In half the histories with stored schedules, operators create one or two
// calendars at the start (retrying the create until the store holds it),
// then update each every 4 to 10 s through a live node, with the faults of
// every store call (an error, or a lost reply after which the update may
// have taken effect: the store, read at the end, says which rules are in
// force at each instant). Their rules are windows of 1 to 4 s over the
// history, dated ("2000-01-01T00:00:07/2000-01-01T00:00:10") or daily
// ("00:00:07-00:00:10"), so that a fifth to a third of the instants of a
// schedule naming them are excluded. Most specs of the stored schedules
// then name one or both (option calendar), and a third of the schedules
// have maxRuns 3 to 30, the same in every spec of their lives.
//
//	(r) no run of a stored schedule (scheduled, catch-up, late, retry,
//	    waiting, backfill: any but manual) is of an instant that the
//	    calendars its spec in force names (the spec check (p) judges it
//	    by) exclude by their rules in force at it (the
//	    calendar's document as the store holds it at the end:
//	    its From and Replaced), unless a node may have missed the update
//	    (it was down or away, or failed a poll or a read of the schedules,
//	    in the seconds before); the excluded instants are left out of
//	    check (p)'s liveness, and those around a calendar update that a
//	    node may have missed too; the store's document of each calendar
//	    keeps every update that took effect, with its From.
//	(s) with maxRuns N, the fires of the schedule that ran (any node, any
//	    attempt but manual runs, across kills, restarts, deletes and
//	    creates) are at most the runs the store counts taken, which are at
//	    most N; every run follows its node's take of its fire, a number in
//	    1..N that no other fire got; check (p)'s liveness expects no run of
//	    an instant from the fire that took the N-th run on; and a schedule
//	    with more than N+5 instants free of faults and contention took all
//	    N.
//
// The exclusion is computed here, independently of the scheduling
// package, for the two window forms the histories use.

// calOp is an operator's create or update of a calendar.
type calOp struct {
	at      time.Time
	cal     string
	create  bool
	windows []string
}

// calendarPlan draws the calendars of a history and their changes. The
// draws are rolls, as storedPlan's are; it runs before storedPlan, whose
// specs name the calendars.
func (w *simWorld) calendarPlan() {
	if w.sroll("stored") < 1.0/3 || w.sroll("calendars") < 0.5 {
		return
	}
	for i := range 1 + int(w.sroll("calendars n")*2) {
		name := fmt.Sprint("c", i)
		w.calNames = append(w.calNames, name)
		at := w.start.Add(200*time.Millisecond + time.Duration(i)*100*time.Millisecond)
		w.calOps = append(w.calOps, calOp{at, name, true, w.calWindows(name, 0)})
		for k := 1; ; k++ {
			// At most 7 specs a calendar: the document keeps
			// taskstate.MaxReplaced of those before.
			at = at.Add(4*time.Second + time.Duration(w.sroll("calendar gap", i, k)*float64(6*time.Second)))
			if at.After(w.start.Add(simSpan - cooldown)) {
				break
			}
			w.calOps = append(w.calOps, calOp{at, name, false, w.calWindows(name, k)})
		}
	}
}

// calWindows draws the k-th rules of calendar name: 2 to 4 windows of 1
// to 4 s, at whole seconds of the history, dated or daily.
func (w *simWorld) calWindows(name string, k int) []string {
	r := func(what string, j int) float64 { return w.sroll("calendar rules", what, name, k, j) }
	var out []string
	for j := range 2 + int(r("n", 0)*3) {
		from := w.start.Add(time.Duration(int(r("start", j)*float64(simSpan/time.Second))) * time.Second).UTC()
		to := from.Add(time.Duration(1+int(r("length", j)*4)) * time.Second)
		if r("form", j) < 0.5 {
			out = append(out, from.Format("2006-01-02T15:04:05")+"/"+to.Format("2006-01-02T15:04:05"))
		} else {
			out = append(out, from.Format("15:04:05")+"-"+to.Format("15:04:05"))
		}
	}
	return out
}

// calendarOption draws the option calendar of the k-th spec of stored
// schedule name: none, one of the history's calendars, or both.
func (w *simWorld) calendarOption(name string, k int) string {
	if len(w.calNames) == 0 {
		return ""
	}
	r := w.sroll("stored calendar", name, k)
	switch {
	case r < 0.25:
		return ""
	case len(w.calNames) == 1:
		return w.calNames[0]
	case r < 0.5:
		return w.calNames[0]
	case r < 0.75:
		return w.calNames[1]
	}
	return strings.Join(w.calNames, ",")
}

// maxRunsOf returns the maxRuns of stored schedule name: 3 to 30 for a
// third of them, else 0.
func (w *simWorld) maxRunsOf(name string) int {
	if w.sroll("maxRuns", name) >= 1.0/3 {
		return 0
	}
	return 3 + int(w.sroll("maxRuns n", name)*28)
}

// calActors returns the live nodes that no pause holds for the next few
// seconds, as storedActor does, from the one a roll of op picks on.
func (w *simWorld) calActors(running map[string]*scheduling.Scheduler, op calOp) []*scheduling.Scheduler {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*scheduling.Scheduler
	for _, n := range w.nodes {
		if s := running[n.name]; s != nil && !w.dead[n.name] &&
			!slices.ContainsFunc(n.pauses, func(p window) bool { return p.overlaps(now.Add(-time.Second), now.Add(4*time.Second)) }) {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		i := int(w.sroll("calendar actor", op.cal, op.at.UnixNano()) * float64(len(out)))
		out = append(out[i:], out[:i]...)
	}
	return out
}

// actCalendar does op through the nodes of actors, as an operator would
// through any node's API: an update once, through the first (its store
// calls fail or lose their reply as any other's: the store says at the
// end whether it took effect), a create until the store holds it (a
// lost reply's create is found there), for at most a second: the stored
// schedules that name the calendar are created after it.
func (w *simWorld) actCalendar(actors []*scheduling.Scheduler, op calOp) {
	ctx := context.Background()
	c := taskstate.Calendar{Name: op.cal, CalendarRules: taskstate.CalendarRules{Windows: op.windows}}
	if !op.create {
		if len(actors) > 0 {
			_ = actors[0].UpdateCalendar(ctx, c)
		}
		return
	}
	for range 10 {
		for _, s := range actors {
			if err := s.CreateCalendar(ctx, c); err == nil || errors.Is(err, scheduling.ErrCalendarExists) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runTake is a TakeRun that took effect: its true time, node, task, fire
// and the number it answered (0: none left).
type runTake struct {
	at         time.Time
	node, task string
	fire       time.Time
	n          int
}

// loadCalendars reads the calendars' documents from the store, without
// faults, for the checks.
func (w *simWorld) loadCalendars(t *testing.T) {
	scs, err := w.store.inner.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.calDocs = map[string]taskstate.Schedule{}
	for _, sc := range scs {
		if name, ok := strings.CutPrefix(sc.Name, "@calendar:"); ok {
			w.calDocs[name] = sc
		}
	}
}

// calRulesAt returns the rules of calendar doc d in force at t: its own
// from its From on, else those of the newest spec it replaced in force by
// t (the oldest it keeps before all of them).
func calRulesAt(d taskstate.Schedule, t time.Time) json.RawMessage {
	if d.From.IsZero() || !t.Before(d.From) || len(d.Replaced) == 0 {
		return d.Args
	}
	for _, p := range d.Replaced {
		if p.From.IsZero() || !t.Before(p.From) {
			return p.Args
		}
	}
	return d.Replaced[len(d.Replaced)-1].Args
}

// calExcludes returns the calendar, of those option names, whose rules in
// force at t exclude it ("" for none), and an error for rules it cannot
// read.
func (w *simWorld) calExcludes(option string, t time.Time) (string, error) {
	for _, name := range strings.Split(option, ",") {
		d, ok := w.calDocs[name]
		if !ok {
			continue // never created: the schedule was refused
		}
		var rules taskstate.CalendarRules
		if err := json.Unmarshal(calRulesAt(d, t), &rules); err != nil {
			return "", err
		}
		for _, win := range rules.Windows {
			ex, err := windowExcludes(win, t)
			if err != nil {
				return "", err
			}
			if ex {
				return name, nil
			}
		}
	}
	return "", nil
}

// windowExcludes reports whether window win, dated or daily to the second
// (end excluded, a daily one may wrap midnight), excludes t in UTC.
func windowExcludes(win string, t time.Time) (bool, error) {
	t = t.UTC()
	if from, to, ok := strings.Cut(win, "/"); ok {
		a, err1 := time.Parse("2006-01-02T15:04:05", from)
		b, err2 := time.Parse("2006-01-02T15:04:05", to)
		if err := errors.Join(err1, err2); err != nil {
			return false, err
		}
		return !t.Before(a) && t.Before(b), nil
	}
	from, to, _ := strings.Cut(win, "-")
	a, err1 := time.Parse("15:04:05", from)
	b, err2 := time.Parse("15:04:05", to)
	if err := errors.Join(err1, err2); err != nil {
		return false, err
	}
	tod := func(x time.Time) time.Duration {
		return time.Duration(x.Hour())*time.Hour + time.Duration(x.Minute())*time.Minute + time.Duration(x.Second())*time.Second +
			time.Duration(x.Nanosecond())
	}
	s, e, now := tod(a), tod(b), tod(t)
	if s < e {
		return now >= s && now < e, nil
	}
	return now >= s || now < e, nil
}

// calStale reports whether a node may have judged h's fire by rules it
// had not read yet: h's node was stale (down, away, a poll or a read of
// the schedules failed) at its fire or start, or any node was at its fire
// (a retry's and a waiting fire's first judgment was on the node that
// first had it).
func (w *simWorld) calStale(h interval) bool {
	if w.stale(h.node, h.from) {
		return true
	}
	return slices.ContainsFunc(w.nodes, func(n *simNode) bool { return w.stale(n.name, h.fire) })
}

// calWrittenNear reports whether a change of a calendar that option names
// took effect in the seconds before instant f (so that a node that was
// stale then may judge f by the rules before it).
func (w *simWorld) calWrittenNear(option string, f time.Time) bool {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	for _, wr := range w.store.schedWrites {
		name, ok := strings.CutPrefix(wr.sc.Name, "@calendar:")
		if ok && slices.Contains(strings.Split(option, ","), name) && wr.at.Before(f) && wr.at.After(f.Add(-8*time.Second)) {
			return true
		}
	}
	return false
}

// storedExempt reports whether check (p)'s liveness expects no run of
// instant f of version v of stored schedule name, free of faults and
// contention: a calendar excludes it (check r), a calendar changed in the
// seconds before while a node may have missed the change, or the
// schedule's runs were all taken by then (check s). It counts the
// instants in st.
func (w *simWorld) storedExempt(t *testing.T, name string, v version, f time.Time, st *stats) bool {
	if v.spec.calendar != "" {
		cal, err := w.calExcludes(v.spec.calendar, f)
		if err != nil {
			t.Errorf("seed %d history %d: (r) calendars %s: %v", w.seed, w.hist, v.spec.calendar, err)
		}
		if cal != "" {
			st.calExcluded++
			return true
		}
		st.calIncluded++
		if w.calWrittenNear(v.spec.calendar, f) && slices.ContainsFunc(w.nodes, func(n *simNode) bool { return w.stale(n.name, f) }) {
			return true
		}
	}
	w.freeOf[name]++ // an instant that takes a run, if any is left
	if fN, done := w.completedAt[name]; done && !f.Before(fN) {
		st.maxRunsAfter++
		return true
	}
	return false
}

// prepareMaxRuns finds, for each stored schedule with maxRuns, the fire
// that took its last run (check s), before checkStored reads it.
func (w *simWorld) prepareMaxRuns() {
	w.freeOf = map[string]int{}
	w.completedAt = map[string]time.Time{}
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	for _, tk := range w.store.runTakes {
		if n := w.maxRunsOf(tk.task); n > 0 && tk.n == n {
			if at, ok := w.completedAt[tk.task]; !ok || tk.fire.Before(at) {
				w.completedAt[tk.task] = tk.fire
			}
		}
	}
}

// checkCalendars is check (r) over the runs held, and the documents'
// account of the updates.
func (w *simWorld) checkCalendars(t *testing.T, held []interval, st *stats) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	// Every update that took effect is in the document, with its From.
	w.store.mu.Lock()
	writes := map[string][]taskstate.Schedule{}
	for _, wr := range w.store.schedWrites {
		if name, ok := strings.CutPrefix(wr.sc.Name, "@calendar:"); ok {
			writes[name] = append(writes[name], wr.sc)
			st.calWrites++
		}
	}
	w.store.mu.Unlock()
	for name, ws := range writes {
		d := w.calDocs[name]
		froms := []time.Time{d.From}
		for _, p := range d.Replaced {
			froms = append(froms, p.From)
		}
		var want []time.Time
		for _, sc := range slices.Backward(ws) {
			want = append(want, sc.From)
		}
		if len(want) > taskstate.MaxReplaced+1 {
			want = want[:taskstate.MaxReplaced+1]
		}
		if !slices.EqualFunc(froms, want, time.Time.Equal) {
			t.Errorf("%s: (r) calendar %s: its document keeps specs from %v, the updates that took effect were from %v", pre, name, froms, want)
		}
	}
	for _, h := range held {
		if h.manual || !w.isStored(h.task) {
			continue
		}
		v, ok := runVersion(w.versions(h.task), h) // as check (p)
		if !ok || v.spec.calendar == "" {
			continue
		}
		st.calRuns++
		cal, err := w.calExcludes(v.spec.calendar, h.fire)
		switch {
		case err != nil:
			t.Errorf("%s: (r) calendars %s: %v", pre, v.spec.calendar, err)
		case cal == "":
		case w.calStale(h):
			st.calStaleRuns++
		default:
			var rules taskstate.CalendarRules
			_ = json.Unmarshal(calRulesAt(w.calDocs[cal], h.fire), &rules)
			t.Errorf("%s: (r) %s fire %v attempt %d (backfill %v) ran on %s at %v, an instant that calendar %s excludes (windows in force %v, from %v)",
				pre, h.task, h.fire.Sub(w.start), h.attempt, h.backfill, h.node, h.from.Sub(w.start), cal, rules.Windows,
				w.calDocs[cal].From.Sub(w.start))
		}
	}
}

// checkMaxRuns is check (s).
func (w *simWorld) checkMaxRuns(t *testing.T, held []interval, st *stats) {
	pre := fmt.Sprintf("seed %d history %d", w.seed, w.hist)
	p, err := w.store.inner.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.store.mu.Lock()
	takes := slices.Clone(w.store.runTakes)
	w.store.mu.Unlock()
	names := map[string]bool{}
	for _, op := range w.storedOps {
		names[op.name] = true
	}
	for name := range names {
		n := w.maxRunsOf(name)
		if n == 0 {
			continue
		}
		taken := p.Runs[name]
		fires := map[int64]bool{}
		for _, h := range held {
			if h.task != name || h.manual {
				continue
			}
			fires[h.fire.UnixNano()] = true
			if !slices.ContainsFunc(takes, func(tk runTake) bool {
				return tk.task == name && tk.node == h.node && tk.fire.Equal(h.fire) && tk.n >= 1 && tk.n <= n && !tk.at.After(h.from)
			}) {
				t.Errorf("%s: (s) %s fire %v attempt %d ran on %s at %v without its node's take of one of its %d runs",
					pre, name, h.fire.Sub(w.start), h.attempt, h.node, h.from.Sub(w.start), n)
			}
		}
		byNumber := map[int]time.Time{}
		for _, tk := range takes {
			if tk.task != name || tk.n == 0 {
				continue
			}
			if f, ok := byNumber[tk.n]; ok && !f.Equal(tk.fire) {
				t.Errorf("%s: (s) %s: run %d of %d taken for fires %v and %v", pre, name, tk.n, n, f.Sub(w.start), tk.fire.Sub(w.start))
			}
			byNumber[tk.n] = tk.fire
		}
		if len(fires) > 0 {
			st.maxRunsTasks++
		}
		if taken == n {
			st.maxRunsDone++
		}
		switch {
		case len(fires) > taken || taken > n:
			t.Errorf("%s: (s) %s (maxRuns %d): %d fires ran, %d runs taken: want ran <= taken <= %d", pre, name, n, len(fires), taken, n)
		case taken < n && w.freeOf[name] > n+5:
			t.Errorf("%s: (s) %s (maxRuns %d): %d instants free of faults and contention, and only %d runs taken", pre, name, n,
				w.freeOf[name], taken)
		}
	}
}
