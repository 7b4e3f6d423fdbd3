package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// An outage of a seeded audit history: what happened from start to end.
type outage struct {
	kind       string // "down" (every node stopped), "store" (the store fails), "paused" (task a)
	start, end time.Time
}

func (o outage) covers(t time.Time) bool { return t.After(o.start) && t.Before(o.end) }

// The audit, over seeded histories of a 3-node cluster with the whole
// cluster down, the store down and a task paused at random, finds every
// fire that no node ran while the cluster was down missed, and no other;
// every fire that ran ran (task c catches up the last fire of a downtime
// when the nodes come back: that one ran); and says why each other one
// did not: paused, lock held (task b shares a's lock and loses to it), or
// failed.
func TestAuditFindsEveryMissedFireAndNoFalseOne(t *testing.T) {
	for seed := range uint64(50) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { auditSeed(t, seed) })
	}
}

func auditSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fc := clockwork.NewFakeClockAt(epoch)
	inner, _ := taskstate.NewInProcess(taskstate.MaxHistory)
	store := &outageStore{Store: inner}
	driver := locks.NewInProcessDriver(locks.WithClock(fc))
	var a, b, c fires
	tasks := func() []Task {
		return []Task{
			NewTask(a.task, Cron("@every 1m"), Lock("k"), Name("a")),
			NewTask(b.task, Cron("@every 1m"), Lock("k"), Name("b")),
			NewTask(c.task, Cron("@every 1m"), Lock("c"), CatchUp(10*time.Minute), Name("c")),
		}
	}
	var nodes []*Scheduler
	up := func() {
		nodes = nil
		for i := range 3 {
			s := New(Config{Driver: driver, Clock: fc, Node: fmt.Sprintf("node-%d", i), State: store,
				Logger: slog.New(slog.DiscardHandler)})
			mustAdd(t, s, tasks()...)
			mustStart(t, s)
			nodes = append(nodes, s)
		}
	}
	down := func() {
		for _, s := range nodes {
			if err := s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		nodes = nil
	}
	defer func() { down() }()
	ctx := context.Background()
	fc.Advance(30 * time.Second)
	up()
	var outages []outage
	for fc.Since(epoch) < 90*time.Minute {
		step(t, fc, time.Duration(2+rng.IntN(6))*time.Minute, 10*time.Second, nodes...)
		o := outage{kind: []string{"down", "store", "paused"}[rng.IntN(3)], start: fc.Now()}
		switch o.kind {
		case "down":
			down()
		case "store":
			store.down.Store(true)
		case "paused":
			if err := nodes[0].Pause(ctx, "a"); err != nil {
				t.Fatal(err)
			}
		}
		long := time.Duration(2+rng.IntN(4)) * time.Minute
		if o.kind == "down" {
			fc.Advance(long)
		} else {
			step(t, fc, long, 10*time.Second, nodes...)
		}
		o.end = fc.Now()
		switch o.kind {
		case "down":
			up()
		case "store":
			store.down.Store(false)
		case "paused":
			if err := nodes[1].Resume(ctx, "a"); err != nil {
				t.Fatal(err)
			}
		}
		outages = append(outages, o)
	}
	step(t, fc, 5*time.Minute, 10*time.Second, nodes...)

	ran := map[string]map[time.Time]bool{"a": set(a.list()), "b": set(b.list()), "c": set(c.list())}
	caughtUp := 0
	for _, task := range []string{"a", "b", "c"} {
		au, err := nodes[2].Audit(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if au.From.IsZero() || !au.To.Before(fc.Now()) || len(au.Fires) == 0 {
			t.Fatalf("%s: audit %v to %v with %d fires, want a span", task, au.From, au.To, len(au.Fires))
		}
		sum := 0
		for _, f := range au.Fires {
			var in *outage
			for i := range outages {
				if outages[i].covers(f.Fire) {
					in = &outages[i]
				}
			}
			want := map[FireStatus]bool{}
			switch {
			case ran[task][f.Fire]:
				want[FireRan] = true
			case f.Fire.After(au.To):
				want[FirePending], want[FireSkipped] = true, true
			case in != nil && in.kind == "down":
				want[FireMissed] = true
			case task == "c" && in != nil && in.kind == "store":
				want[FireFailed] = true
			case task == "b":
				want[FireSkipped] = true // a ran (or was paused, failed: it held the lock all the same)
				if in != nil && in.kind == "store" {
					want[FireFailed] = true
				}
			case in != nil && in.kind == "paused":
				want[FireSkipped] = true
			case in != nil && in.kind == "store":
				want[FireFailed] = true
			}
			if !want[f.Status] {
				t.Errorf("%s at %v: %s (%s %s), want one of %v; outage %+v", task, f.Fire.Sub(epoch), f.Status, f.Outcome, f.Detail, want, in)
			}
			if f.Status == FireSkipped && task == "a" && f.Outcome != OutcomePaused {
				t.Errorf("a at %v skipped %q, want paused", f.Fire.Sub(epoch), f.Outcome)
			}
			if f.Status != FirePending {
				sum++
			}
		}
		if n := au.Ran + au.Skipped + au.Failed + au.Missed; n != sum {
			t.Errorf("%s: counts add up to %d, want the %d judged fires", task, n, sum)
		}
		// Every fire of the audit's span that the cluster was down for
		// is missed.
		want := 0
		for _, o := range outages {
			if o.kind != "down" {
				continue
			}
			for m := o.start.Truncate(time.Minute).Add(time.Minute); m.Before(o.end); m = m.Add(time.Minute) {
				switch {
				case ran[task][m]:
					caughtUp++ // by a catch-up when the nodes came back
				case !m.Before(au.From):
					want++
				}
			}
		}
		if au.Missed != want {
			t.Errorf("%s: %d missed fires, want %d: the minutes of %+v from %v", task, au.Missed, want, outages, au.From)
		}
	}
	downs := 0
	for _, o := range outages {
		if o.kind == "down" {
			downs++
		}
	}
	if caughtUp != downs {
		t.Errorf("%d fires of a downtime ran, want %d: task c's catch-up of the last fire of each", caughtUp, downs)
	}
}

func set(ts []time.Time) map[time.Time]bool {
	m := map[time.Time]bool{}
	for _, t := range ts {
		m[t] = true
	}
	return m
}

// auditEntry is an entry for audit's unit tests: @every 1m, on lock k
// unless lock is "".
func auditEntry(t *testing.T, lock string, spec Spec) *entry {
	t.Helper()
	sched, err := parseSchedule("@every 1m", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	spec.Lock = lock
	return &entry{flight: new(flight), name: "a", spec: &spec, sched: sched}
}

func at(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }

// What the audit derives: a fire its task's previous run still covered is
// skipped as still running; one that a manual run or another task's run on
// the key covered, as lock held; a fire without a record younger than the
// horizon is pending, older missed; a fire with records of a failure and
// of a run ran.
func TestAuditDerivesWhatHeldTheLock(t *testing.T) {
	e := auditEntry(t, "k", Spec{LockTTL: time.Minute, Renew: true})
	runs := []taskstate.Run{ // newest first, as a store returns them
		{Fire: at(12), Node: "n1", Start: at(12), Duration: time.Second, Outcome: "ok"},
		{Fire: at(9), Node: "n2", Outcome: string(OutcomeLockFailed), Error: "store down"},
		{Fire: at(9), Node: "n1", Start: at(9), Duration: time.Second, Outcome: "error", Error: "boom"},
		{Fire: at(8), Node: "n2", Outcome: string(OutcomeLockFailed), Error: "store down"},
		{Fire: at(5), Manual: true, Node: "n3", Start: at(5), Duration: 90 * time.Second, Outcome: "ok"},
		{Fire: at(1), Node: "n1", Start: at(1), Duration: 150 * time.Second, Outcome: "ok"},
	}
	holders := []holder{{"b", taskstate.Run{Fire: at(7), Node: "n2", Start: at(7), Duration: 10 * time.Second, Outcome: "ok"}}}
	for _, r := range runs {
		holders = append(holders, holder{"a", r})
	}
	// The longest run in the history (150s) and a minute: the horizon is
	// 3.5 minutes back.
	a := audit(e, runs, holders, at(14), at(0))
	want := []struct {
		m       int
		status  FireStatus
		outcome Outcome
	}{
		{14, FirePending, ""}, {13, FirePending, ""}, {12, FireRan, OutcomeOK}, {11, FirePending, ""},
		{10, FireMissed, ""}, {9, FireRan, OutcomeError}, {8, FireFailed, OutcomeLockFailed},
		{7, FireSkipped, OutcomeLockHeld}, {6, FireSkipped, OutcomeLockHeld}, {5, FireSkipped, OutcomeLockHeld},
		{4, FireMissed, ""}, {3, FireSkipped, OutcomeRunning}, {2, FireSkipped, OutcomeRunning}, {1, FireRan, OutcomeOK},
	}
	if len(a.Fires) != len(want) {
		t.Fatalf("audit lists %d fires %+v, want %d", len(a.Fires), a.Fires, len(want))
	}
	for i, w := range want {
		f := a.Fires[i]
		if !f.Fire.Equal(at(w.m)) || f.Status != w.status || f.Outcome != w.outcome {
			t.Errorf("fire %d = %v %s %q (%s), want 00:%02d %s %q", i, f.Fire.Sub(epoch), f.Status, f.Outcome, f.Detail, w.m, w.status, w.outcome)
		}
	}
	if a.Ran != 3 || a.Skipped != 5 || a.Failed != 1 || a.Missed != 2 || !a.LastMissed.Equal(at(10)) {
		t.Errorf("counts ran %d skipped %d failed %d missed %d, last missed %v; want 3 5 1 2, 00:10", a.Ran, a.Skipped, a.Failed, a.Missed, a.LastMissed)
	}
	if d := a.Fires[7].Detail; d != "run of b at 2026-01-01T00:07:00Z on n2" {
		t.Errorf("detail of the fire b's run held: %q", d)
	}
	if d := a.Fires[9].Detail; d != "manual run of a at 2026-01-01T00:05:00Z on n3" {
		t.Errorf("detail of the fire a manual run held: %q", d)
	}
	if !a.From.Equal(at(1)) || !a.To.Equal(at(14).Add(-150*time.Second-auditGrace)) {
		t.Errorf("span %v to %v, want from the oldest record to the horizon", a.From, a.To)
	}
}

// The horizon is the task's MaxRunTime when it has one, its lock TTL when
// it does not renew; with no record, the audit starts at the scheduler's
// start; it never looks back more than AuditWindow, lists at most
// MaxAuditFires and walks a bounded number of instants.
func TestAuditBounds(t *testing.T) {
	now := at(60 * 48)
	a := audit(auditEntry(t, "k", Spec{LockTTL: 5 * time.Minute}), nil, nil, now, at(0))
	if !a.To.Equal(now.Add(-5*time.Minute-auditGrace)) || !a.From.Equal(now.Add(-AuditWindow)) {
		t.Errorf("span %v to %v, want a day back to the lock TTL and a minute before now", a.From, a.To)
	}
	if len(a.Fires) != MaxAuditFires || a.Missed != 24*60+1-6 || !a.Fires[0].Fire.Equal(now) {
		t.Errorf("%d fires listed, %d missed, newest %v; want %d listed, %d missed, newest now", len(a.Fires), a.Missed, a.Fires[0].Fire, MaxAuditFires, 24*60+1-6)
	}
	a = audit(auditEntry(t, "", Spec{MaxRunTime: time.Hour}), nil, nil, at(30), at(0))
	if !a.To.Equal(at(30).Add(-time.Hour-auditGrace)) || a.Missed != 0 || len(a.Fires) != 30 {
		t.Errorf("unlocked task with MaxRunTime 1h: to %v, %d missed of %d; want every fire pending", a.To, a.Missed, len(a.Fires))
	}
	if a := audit(auditEntry(t, "", Spec{}), nil, nil, at(3), time.Time{}); !a.From.IsZero() || len(a.Fires) != 0 {
		t.Errorf("audit before any start or record = %+v, want nothing audited", a)
	}
	sched, _ := parseSchedule("@every 1ms", time.UTC)
	if from := walkable(sched, epoch, epoch.Add(AuditWindow)); !from.Equal(epoch.Add(AuditWindow - maxAuditWalk*time.Millisecond)) {
		t.Errorf("a millisecond schedule walks from %v, want %d instants back", from, maxAuditWalk)
	}
}

// A jittered task's horizon is later by its jitter: a fire whose shifted
// start has not come, or whose run has not ended, is pending, not missed.
func TestAuditWaitsForAJitteredStart(t *testing.T) {
	e := auditEntry(t, "k", Spec{LockTTL: time.Minute, Jitter: 50 * time.Minute})
	runs := []taskstate.Run{{Fire: at(0), Node: "n1", Start: at(0), Outcome: "ok"}}
	a := audit(e, runs, []holder{{"a", runs[0]}}, at(10), time.Time{})
	if a.Missed != 0 || !a.To.Equal(at(10).Add(-50*time.Minute-time.Minute-auditGrace)) {
		t.Errorf("missed %d, horizon %v; want none missed, the horizon back by the jitter too", a.Missed, a.To)
	}
}

// A daily task's audit walks its days (the walk's bound must not overflow
// on long intervals), and a jittered task's fire is judged lock held by a
// run that held the lock at its shifted start.
func TestAuditLongIntervalsAndJitteredHolds(t *testing.T) {
	every3h, err := parseSchedule("0 */3 * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{flight: new(flight), name: "nightly", spec: &Spec{Lock: "k", LockTTL: time.Minute}, sched: every3h}
	runs := []taskstate.Run{{Fire: epoch, Node: "n1", Start: epoch, Outcome: "ok"}}
	a := audit(e, runs, []holder{{"nightly", runs[0]}}, epoch.Add(20*time.Hour), time.Time{})
	if !a.From.Equal(epoch) || a.Missed != 6 || a.Ran != 1 {
		t.Errorf("every 3h: from %v, ran %d, missed %d; want from the run, 1 ran, 6 missed (03:00 to 18:00)", a.From, a.Ran, a.Missed)
	}
	daily, _ := parseSchedule("0 0 * * *", time.UTC)
	e = &entry{flight: new(flight), name: "b", spec: &Spec{Lock: "k", LockTTL: time.Minute, Jitter: 30 * time.Minute}, sched: daily}
	shifted := epoch.Add(24 * time.Hour).Add(jitterOffset("b", epoch.Add(24*time.Hour), 30*time.Minute))
	own := taskstate.Run{Fire: epoch, Node: "n1", Start: epoch, Outcome: "ok"}
	other := taskstate.Run{Fire: shifted.Add(-time.Minute), Node: "n2", Start: shifted.Add(-time.Minute), Duration: 2 * time.Minute, Outcome: "ok"}
	a = audit(e, []taskstate.Run{own}, []holder{{"b", own}, {"a", other}}, epoch.Add(2*24*time.Hour-time.Hour), time.Time{})
	if len(a.Fires) != 1 || a.Fires[0].Outcome != OutcomeLockHeld {
		t.Errorf("jittered fire under a holder at its shifted start: %+v, want lock held", a.Fires)
	}
}

// The shared history keeps, by default, what a task's audit needs to judge
// its fires (every second, a 30 s lease and a minute for the record: 90
// instants pending, twice that kept, beyond the store's 20): no warning,
// and the audit judges the fires. A task that needs more than
// taskstate.MaxHistory (a 30-minute lease, every second) is named at
// startup with the history it needs, and its audit says it judged none and
// what to change, its range not reversed.
func TestAuditSaysWhenTheHistoryIsTooShort(t *testing.T) {
	for _, ttl := range []time.Duration{30 * time.Second, 30 * time.Minute} {
		fc := clockwork.NewFakeClockAt(epoch)
		store, err := taskstate.NewInProcess(0)
		if err != nil {
			t.Fatal(err)
		}
		logs := &logRecorder{}
		s := New(Config{Driver: locks.NewInProcessDriver(locks.WithClock(fc)), Clock: fc, Logger: slog.New(logs), State: store})
		var f fires
		mustAdd(t, s, NewTask(f.task, Cron("@every 1s"), Lock(fmt.Sprint("short-", ttl)), LockTTL(ttl), Name("tick")))
		mustStart(t, s)
		span := 3 * time.Minute
		if ttl > time.Hour/4 {
			span = time.Duration(taskstate.MaxHistory+10) * time.Second // the history full
		}
		step(t, fc, span, time.Second, s)
		a, err := s.Audit(context.Background(), "tick")
		s.Stop(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		runs, err := store.Runs(context.Background(), "tick", 0)
		if err != nil {
			t.Fatal(err)
		}
		warned := logs.find("the shared history keeps too few runs for the task's audit to judge its fires: it would find no miss")
		if ttl < time.Hour/4 {
			if len(warned) != 0 || a.Note != "" || !a.From.Before(a.To) || a.Ran < 80 || a.Missed != 0 || len(runs) != 180 {
				t.Errorf("lease %v: warnings %+v, audit from %v to %v, %d ran, %d missed, note %q, %d runs kept; "+
					"want none, the fires judged, 180 kept", ttl, warned, a.From, a.To, a.Ran, a.Missed, a.Note, len(runs))
			}
			continue
		}
		need := fmt.Sprint(taskstate.MaxHistory + 1)
		if len(warned) != 1 || warned[0].attrs["history"] != fmt.Sprint(taskstate.MaxHistory) || warned[0].attrs["needs"] != need {
			t.Errorf("lease %v: startup warnings %+v; want one naming the task, %d kept, %s needed", ttl, warned, taskstate.MaxHistory, need)
		}
		if !strings.Contains(a.Note, "it needs "+need+" runs") || a.To.Before(a.From) || a.Missed != 0 || len(runs) != taskstate.MaxHistory {
			t.Errorf("lease %v: audit from %v to %v, %d ran, note %q, %d runs kept; want no miss judged, the range not reversed, "+
				"a note naming %s, %d kept", ttl, a.From, a.To, a.Ran, a.Note, len(runs), need, taskstate.MaxHistory)
		}
	}
}
