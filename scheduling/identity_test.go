package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// A stored schedule changed to another lock just before a fire: the node
// that made the change and a node that has not polled yet both reach the
// fire, each with the spec it knows. A fire is its task's name and instant,
// whatever the lock: it runs once. (Before fires were claimed under the
// name alone, the two nodes claimed it under the two locks' keys, and both
// ran it.)
func TestStoredScheduleLockChangeRunsEachFireOnce(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", h.fn)
	ctx := context.Background()
	if err := c.nodes[0].CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	c.step(59*time.Second, time.Second) // both nodes have it; the fire at 1m is next
	up := acmeReport()
	up.Lock = "report:acme:v2"
	if err := c.nodes[0].UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	c.step(5*time.Minute, time.Second)
	if got := fireSet(t, h.of("report-acme")); len(got) != 5 {
		t.Fatalf("%d fires ran in 5 minutes, want 5, each once: %v", len(got), got)
	}
}

// An update comes in force at the instant stored with it, two polls after
// the change, on every node alike: a fire before it runs the old spec
// (here, its arguments) wherever it runs, one at or after it the new one.
func TestStoredScheduleChangesAtAnAgreedInstant(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(3, func() []Task { return nil })
	c.handle("tenant-report", h.fn)
	ctx := context.Background()
	sc := acmeReport()
	sc.Cron = "@every 1s"
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(10*time.Second, time.Second)
	sc.Args = json.RawMessage(`{"tenant": "acme", "v": 2}`)
	sc.Lock = "report:acme:v2"
	changed := c.fc.Now()
	if err := c.nodes[1].UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	stored, err := c.nodes[2].Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := changed.Add(2 * DefaultRequestPoll)
	if len(stored) != 1 || !stored[0].From.Equal(from) || len(stored[0].Replaced) != 1 ||
		stored[0].Replaced[0].Lock != "report:acme" || stored[0].Replaced[0].Cron != "@every 1s" {
		t.Fatalf("stored %+v; want From %v (two polls after the change) and the replaced spec", stored, from)
	}
	before := len(h.of("report-acme"))
	c.step(10*time.Second, time.Second)
	runs := h.of("report-acme")[before:]
	fires := fireSet(t, runs)
	if len(fires) != 10 {
		t.Fatalf("%d fires ran in the 10 s after the update, want 10: %+v", len(fires), runs)
	}
	for _, r := range runs {
		old := r.args == `{"tenant":"acme"}`
		if old != r.fire.Before(from) {
			t.Errorf("fire %v (the new spec from %v) ran on %s with args %s", r.fire.Sub(changed), from.Sub(changed), r.node, r.args)
		}
	}
}

// A run of the old spec is going under the old lock when an update to
// another lock comes in force: the new spec's fires take the old lock too
// while a run of the old spec may hold it, so none of them runs beside it;
// once it ends they run, one at a time, and the gate opens.
func TestStoredScheduleLockChangeWaitsForTheOldRun(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", func(ctx context.Context, _ json.RawMessage) error { return b.task(ctx) })
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10m"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute, time.Second) // the first fire starts, and blocks
	if n := b.count(); n != 1 {
		t.Fatalf("%d runs started, want 1", n)
	}
	sc.Lock = "report:acme:v2"
	if err := c.nodes[1].UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, 3*time.Minute, time.Second) // the fires at 2, 3 and 4 minutes
	if n := b.count(); n != 1 {
		t.Fatalf("%d runs started while the old spec's run holds its lock, want still 1", n)
	}
	close(b.release)
	c.step(3*time.Minute, time.Second) // the fires at 5, 6 and 7 minutes
	if n, most := b.count(), b.most.Load(); n != 4 || most != 1 {
		t.Fatalf("%d runs in all, at most %d at once; want 4, one at a time", n, most)
	}
	for _, s := range c.nodes {
		if e := s.byName["report-acme"]; e.gate == nil || !e.passed() {
			t.Errorf("%s: gate %+v, want one, open once a fire took the old lock after the change", s.node, e.gate)
		}
	}
	hist, err := c.store.Runs(ctx, "report-acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if r.Fire.Equal(first) && r.Outcome != string(OutcomeOK) {
			t.Errorf("the old spec's run recorded %+v, want ok", r)
		}
	}
}

// Every update keeps the specs it replaced, newest first, for the audit,
// dropping those out of force for more than a day, at most
// taskstate.MaxReplaced.
func TestStoredScheduleKeepsTheReplacedSpecs(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(1, func() []Task { return nil })
	s := c.nodes[0]
	if err := s.Handle("tenant-report", h.fn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := acmeReport()
	if err := s.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	crons := []string{sc.Cron}
	for i := range taskstate.MaxReplaced + 3 {
		c.fc.Advance(time.Hour)
		sc.Cron = []string{"@every 2m", "@every 3m"}[i%2]
		if err := s.UpdateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
		crons = append(crons, sc.Cron)
	}
	got, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := got[0].Replaced
	if len(r) != taskstate.MaxReplaced {
		t.Fatalf("%d replaced specs kept, want %d", len(r), taskstate.MaxReplaced)
	}
	for i, p := range r {
		if want := crons[len(crons)-2-i]; p.Cron != want {
			t.Errorf("replaced[%d].Cron = %q, want %q (newest first)", i, p.Cron, want)
		}
	}
	c.fc.Advance(AuditWindow + time.Hour)
	if err := s.UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Schedules(ctx)
	if r := got[0].Replaced; len(r) != 1 || r[0].Cron != sc.Cron {
		t.Fatalf("after a day, replaced = %+v; want the spec in force until now alone", r)
	}
}

// The audit judges each instant by the spec in force at it: a stored
// schedule changed from every minute to every 30 s shows no miss for the
// instants of either (before, it judged the whole history by the new spec,
// and reported the old spec's half-minutes missed), and none before the
// schedule was created, though the node started earlier.
func TestAuditFollowsTheSpecInForce(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(1, func() []Task { return nil })
	s := c.nodes[0]
	if err := s.Handle("tenant-report", h.fn); err != nil {
		t.Fatal(err)
	}
	c.step(10*time.Minute, time.Second) // the node started 10 minutes before the schedule
	ctx := context.Background()
	sc := acmeReport() // every minute
	if err := s.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(5*time.Minute, time.Second)
	sc.Cron = "@every 30s"
	if err := s.UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(5*time.Minute, time.Second) // 15 runs in all: the history (20) keeps them all
	a, err := s.Audit(ctx, sc.Name)
	if err != nil {
		t.Fatal(err)
	}
	ran := len(fireSet(t, h.of(sc.Name)))
	if a.Missed != 0 || a.Failed != 0 || a.Skipped != 0 || a.Ran != ran || ran != 5+10 || !a.From.Equal(epoch.Add(11*time.Minute)) {
		t.Fatalf("audit ran %d missed %d failed %d skipped %d of %d runs: %+v", a.Ran, a.Missed, a.Failed, a.Skipped, ran, a.Fires)
	}
	created := epoch.Add(10 * time.Minute)
	for _, f := range a.Fires {
		if f.Fire.Before(created) || (f.Fire.Before(created.Add(5*time.Minute)) && f.Fire.Second() != 0) {
			t.Errorf("audited %v, an instant of no spec in force", f.Fire.Sub(epoch))
		}
	}
}

// A backfill over the instant of a run still going waits for the task's
// lock; once the run ended (its record written before its lease was
// released) the backfill refuses the instant, as one that ran. Before, a
// backfill refused only the instants in the history when it started, and
// ran this one again. A fire that a node reaches after a backfill took its
// instant finds it claimed.
func TestBackfillRefusesAnInstantStillRunning(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) && !r.Backfill })
	c.start(2, func() []Task {
		return []Task{NewTask(b.task, Cron("@every 1m"), Lock("k"), LockTTL(10*time.Minute), Name("report"))}
	})
	b.step(t, c, time.Minute+30*time.Second, time.Second) // the fire at 1m runs, and blocks
	ctx := context.Background()
	if _, err := c.nodes[1].Backfill(ctx, "report", epoch.Add(30*time.Second), first, BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, 10*time.Second, time.Second)
	close(b.release)
	c.step(5*time.Second, time.Second)
	if got := c.backfillOf("report"); got.State != taskstate.BackfillDone || got.Refused != 1 || got.Taken != 0 {
		t.Fatalf("backfill = %+v, want done, the instant refused as one that ran", got)
	}
	if n := b.count(); n != 1 {
		t.Fatalf("the instant ran %d times, want once", n)
	}
}

// A backfill's instant is claimed as its fire: a node that reaches the
// fire late (its clock lags, it was paused) finds it claimed.
func TestBackfillClaimsItsInstants(t *testing.T) {
	c := newCluster(t)
	var f fires
	c.start(1, func() []Task { return []Task{NewTask(f.task, Cron("@every 1m"), Lock("k"), Name("report"))} })
	c.step(10*time.Second, time.Second) // before the first fire: nothing claimed yet
	missed := epoch.Add(-time.Minute)
	ctx := context.Background()
	if _, err := c.nodes[0].Backfill(ctx, "report", missed, missed, BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	if got := c.backfillOf("report"); got.Taken != 1 || f.count() != 1 {
		t.Fatalf("backfill = %+v, %d runs; want the instant taken and run", got, f.count())
	}
	if ok, err := c.driver.Claim(ctx, fireKey("report"), missed.UnixMilli(), ClaimTTL); ok || err != nil {
		t.Fatalf("a late node's Claim of the backfilled instant = %v, %v; want refused", ok, err)
	}
}

// lostClaim is the in-process driver with the reply of one Claim lost,
// once lose is set: the claim takes effect, and its caller gets an error.
type lostClaim struct {
	*locks.InProcessDriver
	lose atomic.Bool
}

func (d *lostClaim) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	ok, err := d.InProcessDriver.Claim(ctx, key, seq, ttl)
	if err == nil && d.lose.CompareAndSwap(true, false) {
		return false, errors.New("claim's reply lost")
	}
	return ok, err
}

// A backfill instant whose claim took effect with its reply lost is not
// lost: the node tries the instant again at its next poll, finds its own
// claim (which the take does not depend on), takes it and runs it, once.
func TestBackfillInstantRunsOnceAfterItsClaimsReplyIsLost(t *testing.T) {
	c := newCluster(t)
	drv := &lostClaim{InProcessDriver: c.driver}
	var f fires
	s := New(Config{Driver: drv, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-0", State: c.store})
	mustAdd(t, s, NewTask(f.task, Cron("@every 1m"), Lock("k"), Name("report")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, c.fc, 10*time.Second, time.Second, s)
	missed := epoch.Add(-time.Minute)
	drv.lose.Store(true)
	if _, err := s.Backfill(context.Background(), "report", missed, missed, BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	step(t, c.fc, 5*time.Second, time.Second, s)
	if drv.lose.Load() {
		t.Fatal("the backfill made no claim")
	}
	if got := c.backfillOf("report"); got.Taken != 1 || got.State != taskstate.BackfillDone || f.count() != 1 {
		t.Fatalf("backfill = %+v, %d runs; want its instant taken and run once", got, f.count())
	}
}

// failingRecords is a store whose Record calls fail.
type failingRecords struct{ taskstate.Store }

func (failingRecords) Record(context.Context, ...taskstate.TaskRun) error {
	return errors.New("store down")
}

// A run whose record the store refused (kept in the backlog) releases its
// lease at once: the lock is not held for a failing store.
func TestLeaseReleasedWhenTheRecordFails(t *testing.T) {
	c := newCluster(t)
	var f fires
	s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-0", State: failingRecords{c.store}})
	mustAdd(t, s, NewTask(f.task, Cron("@every 1m"), Lock("k"), LockTTL(time.Hour), Name("report")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, c.fc, time.Minute, time.Minute, s) // would wait for the lease's hour without the release
	ctx := context.Background()
	l, err := c.driver.Acquire(ctx, "k", time.Minute)
	if err != nil || f.count() != 1 {
		t.Fatalf("Acquire after the run, its record refused = %v (%d runs); want the lease: the run released it", err, f.count())
	}
	_ = l.Release(ctx)
}

// slowRecords is a store whose Record calls carrying a run wait until
// release closes.
type slowRecords struct {
	taskstate.Store
	entered chan struct{} // gets a value when a Record call waits
	release chan struct{}
}

func (s *slowRecords) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	if slices.ContainsFunc(runs, func(r taskstate.TaskRun) bool { return !r.Start.IsZero() }) {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.Record(ctx, runs...)
}

// A locked run's lease is released once a Record call carried its run, so
// that the next holder of the lock (a backfill taking the instant) finds
// the run in the history.
func TestLeaseOutlivesTheRecordCall(t *testing.T) {
	c := newCluster(t)
	slow := &slowRecords{Store: c.store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	var f fires
	s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-0", State: slow})
	mustAdd(t, s, NewTask(f.task, Cron("@every 1m"), Lock("k"), Name("report")))
	mustStart(t, s)
	var once sync.Once
	release := func() { once.Do(func() { close(slow.release) }) }
	defer s.Stop(context.Background())
	defer release() // before Stop, which waits for the record
	c.fc.Advance(time.Minute)
	<-slow.entered // the run ended; its record waits
	ctx := context.Background()
	if l, err := c.driver.Acquire(ctx, "k", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		if err == nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("Acquire of the run's lock while its record is on its way = %v; want ErrNotAcquired: the lease is kept until the record is sent", err)
	}
	release()
	waitIdle(t, s)
	l, err := c.driver.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Acquire once the record was sent = %v, want the lease", err)
	}
	_ = l.Release(ctx)
}

// handle registers fn as the handler name on every node of c.
func (c *cluster) handle(name string, fn HandlerFunc) {
	c.t.Helper()
	for _, s := range c.nodes {
		if err := s.Handle(name, fn); err != nil {
			c.t.Fatal(err)
		}
	}
}

// keyedRun is a run of a stored schedule: its fire, arguments and lease
// key.
type keyedRun struct {
	fire      time.Time
	args, key string
	backfill  bool
}

// keyedRuns records the runs of a handler with their lease's key.
type keyedRuns struct {
	mu   sync.Mutex
	runs []keyedRun
}

func (k *keyedRuns) fn(then func(context.Context) error) HandlerFunc {
	return func(ctx context.Context, args json.RawMessage) error {
		r, _ := RunFromContext(ctx)
		key := ""
		if l, ok := locks.FromContext(ctx); ok {
			key = l.Key()
		}
		k.mu.Lock()
		k.runs = append(k.runs, keyedRun{r.Fire, string(args), key, r.Backfill})
		k.mu.Unlock()
		if then != nil {
			return then(ctx)
		}
		return nil
	}
}

func (k *keyedRuns) of(fire time.Time) []keyedRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []keyedRun
	for _, r := range k.runs {
		if r.fire.Equal(fire) {
			out = append(out, r)
		}
	}
	return out
}

// A fire of buffer-one waits for the run going; meanwhile the schedule is
// updated to another lock and other arguments, and comes in force. The
// fire that waited runs once the run ends, long after its instant: as a
// fire of the spec in force at its instant (the old arguments, the old
// lock), and holding the new spec's lock too, beside no run of either. It
// ran the new spec before (the cluster simulation's check p, seed 3
// history 6: fire 14s run under the lock of the spec in force from 16s).
func TestWaitingFireRunsTheSpecOfItsInstant(t *testing.T) {
	c := newCluster(t)
	first, waiting := epoch.Add(time.Minute), epoch.Add(2*time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	var k keyedRuns
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", k.fn(b.task))
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10m", "overlap": OverlapBufferOne}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, 2*time.Minute+30*time.Second, time.Second) // 1m blocks; 2m waits
	if n := b.count(); n != 1 {
		t.Fatalf("%d runs started, want 1", n)
	}
	up := sc
	up.Lock, up.Args = "report:acme:v2", json.RawMessage(`{"tenant": "acme", "v": 2}`)
	if err := c.nodes[1].UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute, time.Second) // in force; the fire at 3m finds the old lock held
	close(b.release)
	c.step(3*time.Minute, time.Second)
	runs := k.of(waiting)
	if len(runs) != 1 || runs[0].args != `{"tenant":"acme"}` || runs[0].key != "report:acme" {
		t.Fatalf("the runs of the fire that waited (%v) = %+v; want one, with the old spec's args and lock", waiting, runs)
	}
	if most := b.most.Load(); most != 1 {
		t.Fatalf("%d runs at once, want one at a time", most)
	}
	if after := k.of(epoch.Add(5 * time.Minute)); len(after) != 1 || after[0].key != "report:acme:v2" {
		t.Fatalf("the runs of the fire at 5m = %+v, want one under the new lock", after)
	}
}

// A node that starts after an update was stored and before it comes in
// force runs the replaced spec until then, as the nodes that read the old
// spec do: every fire before From runs under the old lock, with the old
// arguments, every one after under the new, with the new (it ran the old
// spec's fires with the new arguments before the replaced specs kept
// theirs). It had no entry of the old spec, and its fires before
// From ran nowhere when it owned them (the simulation's check p, seed 2
// history 79).
func TestNodeStartedBeforeAnUpdateComesInForce(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	sc := acmeReport()
	sc.Cron, sc.From = "@every 1s", epoch
	if err := c.store.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	from := epoch.Add(10 * time.Second)
	up := sc
	up.Lock, up.From, up.Args = "report:acme:v2", from, json.RawMessage(`{"tenant":"acme-v2"}`)
	up.Replaced = []taskstate.PastSpec{{Cron: sc.Cron, Lock: sc.Lock, Options: sc.Options, From: sc.From, Handler: sc.Handler, Args: sc.Args}}
	if err := c.store.UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	c.fc.Advance(time.Second)
	var k keyedRuns
	s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-0", State: c.store})
	if err := s.Handle("tenant-report", k.fn(nil)); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	c.nodes = append(c.nodes, s)
	c.step(20*time.Second, 100*time.Millisecond)
	for f := epoch.Add(3 * time.Second); f.Before(epoch.Add(20 * time.Second)); f = f.Add(time.Second) {
		want, args := "report:acme", `{"tenant":"acme"}`
		if !f.Before(from) {
			want, args = "report:acme:v2", `{"tenant":"acme-v2"}`
		}
		if runs := k.of(f); len(runs) != 1 || runs[0].key != want || runs[0].args != args {
			t.Errorf("the runs of fire %v (the update in force from %v) = %+v; want one under lock %s with %s", f.Sub(epoch), from.Sub(epoch), runs, want, args)
		}
	}
}

// An update keeps the replaced spec's handler and arguments with it
// (taskstate.PastSpec), for the nodes that read the update late.
func TestUpdateKeepsTheReplacedArgs(t *testing.T) {
	c := newCluster(t)
	c.start(1, func() []Task { return nil })
	c.handle("tenant-report", func(context.Context, json.RawMessage) error { return nil })
	ctx := context.Background()
	sc := acmeReport()
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	up := sc
	up.Args = json.RawMessage(`{"tenant": "acme-v2"}`)
	if err := c.nodes[0].UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	scs, err := c.store.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) != 1 || len(scs[0].Replaced) != 1 || scs[0].Replaced[0].Handler != "tenant-report" ||
		string(scs[0].Replaced[0].Args) != `{"tenant":"acme"}` || string(scs[0].Args) != `{"tenant":"acme-v2"}` {
		t.Fatalf("the stored schedule after the update: %+v; want the old args kept with the replaced spec", scs)
	}
}

// A node that takes over a task (its owner left the group) runs late the
// fires since the owner's last heartbeat (a view without a time: five
// heartbeats back), each by the spec in force at it: before an update's
// From, the replaced spec's (it took the new spec's instant and entry
// before); and never an instant before the schedule's creation (the
// simulation's check p: seed 2 history 69, seed 3 history 106).
func TestTakeoverBeforeAnUpdateComesInForce(t *testing.T) {
	c := newCluster(t)
	for _, name := range []string{"node-0", "node-1"} {
		s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: name, State: c.store, Spread: true,
			Heartbeat: time.Second})
		if err := s.Handle("tenant-report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
			t.Fatal(err)
		}
		mustStart(t, s)
		t.Cleanup(func() { stopStepping(t, c.fc, s) })
		c.nodes = append(c.nodes, s)
	}
	s := c.nodes[0]
	ctx := context.Background()
	c.fc.Advance(1500 * time.Millisecond)
	sc := acmeReport()
	sc.Cron = "@every 1s"
	if err := s.CreateSchedule(ctx, sc); err != nil { // created at 1.5s
		t.Fatal(err)
	}
	takeover := func() []firing {
		s.mu.Lock()
		defer s.mu.Unlock()
		group := s.spread.group
		prev := &view{group: group, owners: []string{"gone"}, members: []string{"gone"}, owner: &sync.Map{}}
		v := &view{group: group, owners: []string{s.node}, members: []string{s.node}, owner: &sync.Map{}}
		return s.takeovers(prev, v, s.clock.Now())
	}
	c.fc.Advance(100 * time.Millisecond)
	for _, n := range c.nodes {
		settle(t, n, func() int { return 0 })
	}
	if fs := takeover(); len(fs) != 0 {
		t.Fatalf("a takeover 0.1 s after the create catches up %v, an instant before it; want none", fs[0].fire.Sub(epoch))
	}
	c.step(10*time.Second, time.Second) // to 11.6s
	up := sc
	up.Cron, up.Lock = "@every 2s", "report:acme:v2"
	if err := s.UpdateSchedule(ctx, up); err != nil { // in force from 13.6s
		t.Fatal(err)
	}
	c.step(time.Second, time.Second) // 12.6s: the fires from 7.6s are 8s to 12s, the old spec's
	s.mu.Lock()
	for x := s.byName["report-acme"]; x != nil; x = x.prior {
		x.tried.Store(0) // as on a node that another's ownership kept from trying them
	}
	s.mu.Unlock()
	var got []string
	for _, f := range takeover() {
		got = append(got, fmt.Sprintf("%v on %s", f.fire.Sub(epoch), f.e.spec.Lock))
	}
	want := []string{"8s on report:acme", "9s on report:acme", "10s on report:acme", "11s on report:acme", "12s on report:acme"}
	if !slices.Equal(got, want) {
		t.Fatalf("the takeover's fires = %v; want %v, of the spec in force then (lock report:acme)", got, want)
	}
}

// A run of the first spec holds its lock through two updates: the first to
// another lock (its fires take the old lock too: the gate), the second of
// the options alone, on the same new lock, while the gate is still closed.
// The second keeps the gate: no fire of it runs beside the first spec's run
// (it dropped the gate, its spec's lock being the first update's, and its
// fires ran beside the old run).
func TestStoredScheduleSecondUpdateKeepsTheGate(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", func(ctx context.Context, _ json.RawMessage) error { return b.task(ctx) })
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10m"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute, time.Second) // the first fire starts, and blocks
	sc.Lock = "report:acme:v2"
	if err := c.nodes[1].UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute+30*time.Second, time.Second) // in force; the fire at 2m finds the old lock held
	sc.Options = map[string]string{"lockTtl": "9m"}
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, 3*time.Minute, time.Second) // the fires at 3, 4 and 5 minutes
	if n, most := b.count(), b.most.Load(); n != 1 || most != 1 {
		t.Fatalf("%d runs started while the first spec's run holds its lock (at most %d at once), want still 1", n, most)
	}
	close(b.release)
	c.step(2*time.Minute, time.Second)
	if n, most := b.count(), b.most.Load(); n != 3 || most != 1 {
		t.Fatalf("%d runs in all, at most %d at once; want 3, one at a time", n, most)
	}
}

// backfills returns the backfill runs of k, in the order they ran.
func (k *keyedRuns) backfills() []keyedRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []keyedRun
	for _, r := range k.runs {
		if r.backfill {
			out = append(out, r)
		}
	}
	return out
}

// A backfill of a stored schedule over an update runs the instants of the
// spec in force at each: every minute under the old lock before the
// update's From, every two minutes under the new lock from it. It ran the
// new spec's instants over the whole range before.
func TestBackfillFollowsTheStoredSchedule(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", k.fn(nil))
	ctx := context.Background()
	sc := acmeReport()
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(10*time.Minute, time.Second)
	up := sc
	up.Cron, up.Lock = "0 */2 * * * *", "report:acme:v2"
	if err := c.nodes[1].UpdateSchedule(ctx, up); err != nil { // in force from 10m02s
		t.Fatal(err)
	}
	c.step(10*time.Minute, time.Second)
	b, err := c.nodes[0].Backfill(ctx, "report-acme", epoch.Add(30*time.Second), epoch.Add(19*time.Minute), BackfillOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []keyedRun
	for m := 1; m <= 19; m++ {
		switch f := epoch.Add(time.Duration(m) * time.Minute); {
		case m <= 10:
			want = append(want, keyedRun{f, `{"tenant":"acme"}`, "report:acme", true})
		case m%2 == 0:
			want = append(want, keyedRun{f, `{"tenant":"acme"}`, "report:acme:v2", true})
		}
	}
	if b.Total != len(want) {
		t.Fatalf("Backfill = %+v, want %d instants: every minute to 10m, every two from 10m02s", b, len(want))
	}
	c.step(2*time.Second, time.Second)
	got := k.backfills()
	if len(got) != len(want) {
		t.Fatalf("backfill runs = %+v, want %+v", got, want)
	}
	for i := range got {
		if !got[i].fire.Equal(want[i].fire) || got[i].key != want[i].key {
			t.Fatalf("backfill run %d = %+v, want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
}

// A stored schedule deleted while its backfill runs: the backfill takes no
// instant after the run going, and ends cancelled, so that a schedule
// created again under the name does not take it up. It went on before.
func TestBackfillStopsAtTheDelete(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	third := epoch.Add(-97 * time.Minute)
	b := newBlocker(func(r Run) bool { return r.Backfill && r.Fire.Equal(third) })
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", k.fn(b.task))
	ctx := context.Background()
	if err := c.nodes[0].CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	if _, err := c.nodes[0].Backfill(ctx, "report-acme", epoch.Add(-100*time.Minute), epoch.Add(-time.Minute), BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Second, time.Second) // the third instant runs, and blocks
	if err := c.nodes[1].DeleteSchedule(ctx, "report-acme"); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, 2*time.Second, time.Second) // every node read the delete
	close(b.release)
	c.step(5*time.Second, time.Second)
	if got := k.backfills(); len(got) != 4 {
		t.Fatalf("%d backfill runs, want the 4 to the one going at the delete: %+v", len(got), got)
	}
	if got := c.backfillOf("report-acme"); got.State != taskstate.BackfillCancelled {
		t.Fatalf("the backfill after the delete = %+v, want cancelled", got)
	}
}

// A stored schedule deleted while its backfill waits for a node to drive
// it (started, and no node took an instant yet): the nodes that read the
// delete cancel the backfill, so that the schedule created again under the
// name does not take it up. It did, running the new spec's instants over
// the old range (the cluster simulation's seed 14376964605074284134
// history 97, where the backfill's owner had not polled yet).
func TestBackfillNotDrivenAtTheDeleteIsCancelled(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", k.fn(func(context.Context) error { return nil }))
	ctx := context.Background()
	if err := c.nodes[0].CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	// Started as a node whose backfill no node drives yet leaves it.
	b := taskstate.Backfill{ID: "b1", Task: "report-acme", From: epoch.Add(-10 * time.Minute), To: epoch.Add(-time.Minute), Total: 10,
		State: taskstate.BackfillRunning, Node: "node-9", Created: c.fc.Now()}
	if err := c.store.StartBackfill(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[1].DeleteSchedule(ctx, "report-acme"); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Second, time.Second) // every node read the delete
	if got := c.backfillOf("report-acme"); got.State != taskstate.BackfillCancelled {
		t.Fatalf("the backfill after the delete = %+v, want cancelled", got)
	}
	sc := acmeReport()
	sc.Cron = "@every 30s"
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(5*time.Second, time.Second)
	if got := k.backfills(); len(got) != 0 {
		t.Fatalf("the schedule created again ran %d instants of the deleted one's backfill: %+v", len(got), got)
	}
}

// A fire of a stored schedule updated to another lock, taking the old
// lock (the gate) and then waiting for its own longer than the lock TTL
// (its LockWait), runs once it gets its own: the old lock's lease lasts
// through the wait. It was taken for the lock TTL alone and ended during
// the wait, and the fire failed as a lock step that outlasted its lease
// (the cluster simulation's check p, seed 14591975816012221649 history
// 191: a TTL of 399ms, a wait of 773ms, not renewed).
func TestGateLeaseOutlastsTheLockWait(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	second := epoch.Add(2 * time.Minute)
	var gateHeld, gateFree atomic.Int32 // the runs of the fire at 2m that held the old lock, and not
	c.start(1, func() []Task { return nil })
	c.handle("tenant-report", k.fn(func(ctx context.Context) error {
		if r, _ := RunFromContext(ctx); r.Fire.Equal(second) {
			l, err := c.driver.Acquire(context.Background(), "report:acme", time.Second)
			switch {
			case err == nil:
				gateFree.Add(1)
				_ = l.Release(context.Background())
			case errors.Is(err, locks.ErrNotAcquired):
				gateHeld.Add(1)
			}
		}
		return nil
	}))
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10s"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(65*time.Second, time.Second) // the fire at 1m runs
	sc.Lock = "report:acme:v2"
	sc.Options = map[string]string{"lockTtl": "10s", "lockWait": "40s"}
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(54*time.Second, time.Second) // 1m59s
	other, err := c.driver.Acquire(ctx, "report:acme:v2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The fire at 2m takes the old lock, and waits for its own: the node
	// is not idle until it gets it, so the clock is advanced by hand.
	c.fc.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second) // a guard against a hang, not a wait for a race
	for len(c.logs.find("waiting for lock")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fire at 2m never waited for its lock")
		}
		time.Sleep(time.Millisecond)
	}
	c.fc.Advance(15 * time.Second) // past the lock TTL
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.step(10*time.Second, time.Second)
	if got := k.of(second); len(got) != 1 || got[0].key != "report:acme:v2" || gateHeld.Load() != 1 || gateFree.Load() != 0 {
		t.Fatalf("runs of the fire at 2m = %+v, %d holding the old lock, %d not; want one under report:acme:v2, holding it (lock failures: %+v)",
			got, gateHeld.Load(), gateFree.Load(), c.logs.find("lock failed"))
	}
}

// A stored schedule updated while a node drives its backfill: the drive
// reads the specs' spans under the scheduler's lock, which the update
// holds to write them. It read them without it, a data race that -race
// reports here (the cluster simulation's seed 16414993436747368796
// history 225).
func TestBackfillDriveAndUpdateDoNotRace(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	c.start(1, func() []Task { return nil })
	c.handle("tenant-report", k.fn(func(context.Context) error { return nil }))
	ctx := context.Background()
	sc := acmeReport()
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	if _, err := c.nodes[0].Backfill(ctx, "report-acme", epoch.Add(-500*time.Minute), epoch.Add(-time.Minute), BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; len(k.backfills()) < 400 && i < 5000; i++ { // updates while the backfill runs its instants
		sc.Options = map[string]string{"lockTtl": fmt.Sprintf("%ds", 31+i%100)}
		if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	c.step(5*time.Second, time.Second)
}

// schedulesFailing is a task state whose reads of the stored schedules
// fail while failing is set: a node that misses the updates meanwhile.
type schedulesFailing struct {
	taskstate.Store
	failing atomic.Bool
}

func (s *schedulesFailing) Schedules(ctx context.Context) ([]taskstate.Schedule, error) {
	if s.failing.Load() {
		return nil, errors.New("simulated: schedules unreadable")
	}
	return s.Store.Schedules(ctx)
}

// A node that missed an update to another lock (its reads of the schedules
// failed) and reads the update after it, on the same new lock, while a run
// of the spec before still holds the old lock: its fires take the old lock
// too, as the gate of the update it missed says (the document's replaced
// specs), and do not run beside that run. They did (the cluster
// simulation's check p, seed 3879256634320182191 history 95).
func TestNodeThatMissedAnUpdateKeepsItsGate(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	task := func(ctx context.Context, _ json.RawMessage) error { return b.task(ctx) }
	c.start(1, func() []Task { return nil })
	st := &schedulesFailing{Store: c.store}
	late := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-late", State: st})
	mustStart(t, late)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = late.Stop(ctx)
	})
	c.nodes = append(c.nodes, late)
	c.handle("tenant-report", task)
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10m"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute, time.Second) // the first fire starts, and blocks
	b.step(t, c, 30*time.Second, time.Second)
	st.failing.Store(true)
	sc.Lock = "report:acme:v2"
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil { // in force from 1m32s
		t.Fatal(err)
	}
	b.step(t, c, 5*time.Second, time.Second)
	sc.Options = map[string]string{"lockTtl": "9m"}
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil { // in force from 1m38s, on the same lock
		t.Fatal(err)
	}
	st.failing.Store(false)
	b.step(t, c, 30*time.Second, time.Second) // the fire at 2m
	if n, most := b.count(), b.most.Load(); n != 1 || most != 1 {
		t.Fatalf("%d runs started while the first spec's run holds its lock (at most %d at once), want still 1", n, most)
	}
	close(b.release)
}

// A node starts after two updates, the first to another lock, the second
// stored before the first's fire came: it runs the first update's fire
// (the spec in force at it) with that spec's gate, as the other nodes do,
// and so not beside the run of the original spec still holding its lock.
// Its entry of the first update had no gate, and ran the fire beside it
// (the simulation's check p, seed 9 history 74).
func TestNodeStartedDuringAnUpdateKeepsItsGate(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	task := func(ctx context.Context, _ json.RawMessage) error { return b.task(ctx) }
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", task)
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "10m"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b.step(t, c, time.Minute, time.Second) // the first fire starts, and blocks
	b.step(t, c, 30*time.Second, time.Second)
	sc.Lock = "report:acme:v2"
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil { // in force from 1m32s
		t.Fatal(err)
	}
	b.step(t, c, 28*time.Second, time.Second)
	c.fc.Advance(500 * time.Millisecond) // 1m58.5s
	sc.Options = map[string]string{"lockTtl": "9m"}
	if err := c.nodes[0].UpdateSchedule(ctx, sc); err != nil { // in force from 2m00.5s: the fire at 2m is the first update's
		t.Fatal(err)
	}
	s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: "node-2", State: c.store})
	if err := s.Handle("tenant-report", task); err != nil {
		t.Fatal(err)
	}
	mustStart(t, s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	c.nodes = append(c.nodes, s)
	b.step(t, c, 3*time.Second, 500*time.Millisecond) // the fire at 2m
	if n, most := b.count(), b.most.Load(); n != 1 || most != 1 {
		t.Fatalf("%d runs started while the first spec's run holds its lock (at most %d at once), want still 1", n, most)
	}
	close(b.release)
}

// A stored schedule that retries fails a fire, and is deleted before the
// retry is due, then created again under its name: the retry of the
// deleted schedule's fire never runs (the first node to poll it takes it
// from the store and drops it), and the new schedule's fires run. The new
// schedule ran the deleted one's retry before, long after its delete (the
// simulation's check p, seed 5 history 96).
func TestRetryOfADeletedScheduleIsDropped(t *testing.T) {
	c := newCluster(t)
	var k keyedRuns
	failed := epoch.Add(time.Minute)
	c.start(2, func() []Task { return nil })
	c.handle("tenant-report", k.fn(func(ctx context.Context) error {
		if r, _ := RunFromContext(ctx); r.Fire.Equal(failed) {
			return errors.New("the report failed")
		}
		return nil
	}))
	ctx := context.Background()
	sc := acmeReport()
	sc.Options = map[string]string{"lockTtl": "30s", "retry": "1", "retryBackoff": "1h"}
	if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(time.Minute+2*time.Second, time.Second) // the fire at 1m fails: its retry is pending
	p, err := c.store.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := p.Retries["report-acme"]; !ok || !r.Fire.Equal(failed) {
		t.Fatalf("pending retries %+v, want the fire at 1m's", p.Retries)
	}
	if err := c.nodes[1].DeleteSchedule(ctx, "report-acme"); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Second, time.Second)
	if err := c.nodes[1].CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Hour, time.Minute)
	if runs := k.of(failed); len(runs) != 1 {
		t.Fatalf("the runs of the deleted schedule's fire at 1m = %+v, want its first alone (its retry dropped)", runs)
	}
	if p, _ = c.store.Poll(ctx); len(p.Retries) != 0 {
		t.Fatalf("pending retries after the new schedule's runs = %+v, want none", p.Retries)
	}
	if runs := k.of(epoch.Add(time.Hour)); len(runs) != 1 {
		t.Fatalf("the runs of the new schedule's fire at 1h = %+v, want one", runs)
	}
}

// A fire of a spec that a later update replaced, run after its instant (a
// retry, a fire that waited), takes the later specs' locks and its own
// spec's gate: with the first spec's lock held (its run going), it is
// skipped, lock held. It took the later locks alone, and ran beside that
// run (the simulation's check p, seed 210325381770624209 history 174).
func TestFireOfAReplacedSpecKeepsItsGate(t *testing.T) {
	c := newCluster(t)
	c.start(1, func() []Task { return nil })
	c.handle("tenant-report", func(context.Context, json.RawMessage) error { return nil })
	s := c.nodes[0]
	ctx := context.Background()
	sc := acmeReport()
	sc.Cron, sc.Options = "@every 1s", map[string]string{"lockTtl": "10m"}
	if err := s.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Second, time.Second)
	sc.Lock = "report:acme:v2"
	if err := s.UpdateSchedule(ctx, sc); err != nil { // in force from 5s, its gate on report:acme closed
		t.Fatal(err)
	}
	c.step(3*time.Second, time.Second)
	sc.Lock = "report:acme:v3"
	if err := s.UpdateSchedule(ctx, sc); err != nil { // in force from 8s
		t.Fatal(err)
	}
	held, err := c.driver.Acquire(ctx, "report:acme", time.Minute) // a run of the first spec, going
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Release(ctx) }()
	s.mu.Lock()
	f := alsoLock(s.byName["report-acme"], epoch.Add(7*time.Second), kindRetry) // the second spec's
	s.mu.Unlock()
	f.retry = taskstate.Retry{Fire: f.fire, Attempt: 2}
	if f.e.spec.Lock != "report:acme:v2" || !slices.Equal(f.also, []string{"report:acme:v3"}) {
		t.Fatalf("the fire at 7s runs the spec on %s, also taking %v; want the second spec's, also taking the third's lock", f.e.spec.Lock, f.also)
	}
	lease, o, err := s.lock(&f, nil)
	if lease != nil {
		_ = lease.Release(ctx)
	}
	if o != OutcomeLockHeld || err != nil {
		t.Fatalf("lock of the fire at 7s = %q, %v; want %q: its spec's gate holds the first spec's lock, held", o, err, OutcomeLockHeld)
	}
}
