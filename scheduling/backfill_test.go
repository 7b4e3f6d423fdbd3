package scheduling

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// backfillOf returns the cluster store's last backfill of task.
func (c *cluster) backfillOf(task string) taskstate.Backfill {
	c.t.Helper()
	p, err := c.store.Poll(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return p.Backfills[task]
}

// backfillRuns returns the instants of x's backfill runs, in the order
// they ran, and checks each ran under a lease with Backfill set.
func backfillRuns(t *testing.T, x *exclusive) []time.Time {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []time.Time
	for _, r := range x.runs {
		if r.Backfill {
			if r.Lease == nil || r.Attempt != 1 || r.Manual {
				t.Fatalf("backfill run %+v: want a lease, attempt 1, not manual", r)
			}
			out = append(out, r.Fire)
		}
	}
	return out
}

func sorted(ts []time.Time) []time.Time {
	return slices.SortedFunc(slices.Values(ts), time.Time.Compare)
}

// hourly returns the n instants on the hour before epoch, oldest first.
func hourly(n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = epoch.Add(-time.Duration(n-i) * time.Hour)
	}
	return out
}

// A backfill of 1,000 instants across 3 nodes runs each once, in order,
// under the lock, never two at once; a second backfill of the range
// refuses them all, and a forced one runs them again.
func TestBackfillRunsEachInstantOnceInOrder(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(3, func() []Task {
		return []Task{NewTask(x.task, Cron("0 * * * *"), Lock("k"), Name("report"))}
	})
	want := hourly(1000)
	ctx := context.Background()
	b, err := c.nodes[0].Backfill(ctx, "report", want[0].Add(-time.Minute), want[len(want)-1], BackfillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 1000 || b.State != taskstate.BackfillRunning {
		t.Fatalf("Backfill = %+v, want 1000 instants, running", b)
	}
	c.step(2*time.Second, time.Second)
	if got := backfillRuns(t, &x); !slices.Equal(got, want) {
		t.Fatalf("%d backfill runs, want the 1000 instants once each, in order (first %v, last %v)", len(got), want[0], want[len(want)-1])
	}
	if x.most.Load() != 1 {
		t.Errorf("%d backfill runs at once, want 1", x.most.Load())
	}
	if got := c.backfillOf("report"); got.State != taskstate.BackfillDone || got.Taken != 1000 || got.Refused != 0 {
		t.Fatalf("backfill after its run = %+v, want done, 1000 taken", got)
	}
	hist, err := c.nodes[1].History(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || !hist[0].Backfill || !hist[0].Fire.Equal(want[len(want)-1]) || hist[0].Outcome != string(OutcomeOK) {
		t.Fatalf("newest history entry %+v, want the last instant's backfill run, ok", hist[0])
	}
	if info := c.nodes[2].Tasks()[0]; info.Backfill == nil || info.Backfill.ID != b.ID {
		t.Errorf("node-2's TaskInfo.Backfill = %+v, want backfill %s from its poll", info.Backfill, b.ID)
	}

	if _, err := c.nodes[1].Backfill(ctx, "report", want[0], want[len(want)-1], BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Second, time.Second)
	if got := c.backfillOf("report"); got.State != taskstate.BackfillDone || got.Refused != 1000 || got.Taken != 0 {
		t.Fatalf("second backfill of the range = %+v, want done, 1000 refused as already run", got)
	}
	if n := len(backfillRuns(t, &x)); n != 1000 {
		t.Fatalf("%d backfill runs after the second backfill, want still 1000", n)
	}
	if _, err := c.nodes[2].Backfill(ctx, "report", want[0], want[9], BackfillOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	c.step(2*time.Second, time.Second)
	if got := backfillRuns(t, &x); len(got) != 1010 || !slices.Equal(got[1000:], want[:10]) {
		t.Fatalf("%d backfill runs after a forced one of 10, want 1010, the 10 again", len(got))
	}
}

// A backfill that a node left part-way (it died after taking some
// instants) goes on from its cursor on the other nodes within a poll; the
// instants before it do not run again.
func TestBackfillGoesOnWhereADeadNodeStopped(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(2, func() []Task {
		return []Task{NewTask(x.task, Cron("0 * * * *"), Lock("k"), Name("report"))}
	})
	// The nodes' first polls, made at Start, come before the dead node's
	// backfill: one made after it would take the backfill over at once, and
	// the dead node's cursor below would be stale.
	for _, s := range c.nodes {
		waitIdle(t, s)
	}
	want := hourly(20)
	ctx := context.Background()
	b := taskstate.Backfill{ID: "dead1", Task: "report", From: want[0], To: want[19], Total: 20, Node: "node-dead", Created: epoch}
	if err := c.store.StartBackfill(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	for _, at := range want[:5] {
		if got, err := c.store.TakeBackfill(ctx, "report", "dead1", "node-dead", at); err != nil || got != taskstate.BackfillTaken {
			t.Fatalf("TakeBackfill = %v, %v", got, err)
		}
	}
	c.step(2*time.Second, time.Second)
	if got := backfillRuns(t, &x); !slices.Equal(got, want[5:]) {
		t.Fatalf("backfill runs %v, want the 15 instants after the dead node's cursor, once each", got)
	}
	if got := c.backfillOf("report"); got.State != taskstate.BackfillDone || got.Taken != 20 {
		t.Fatalf("backfill = %+v, want done, 20 taken", got)
	}
}

// A paused task's backfill waits and goes on after the resume; a cancelled
// one takes no further instant, and the run in flight finishes.
func TestBackfillPauseAndCancel(t *testing.T) {
	c := newCluster(t)
	want := hourly(10)
	h := newBlocker(func(r Run) bool { return r.Backfill && r.Fire.Equal(want[3]) })
	t.Cleanup(func() { close(h.release) })
	c.start(2, func() []Task {
		return []Task{NewTask(h.task, Cron("0 * * * *"), Lock("k"), LockTTL(time.Hour), Name("report"))}
	})
	ctx := context.Background()
	if err := c.nodes[0].Pause(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[0].Backfill(ctx, "report", want[0], want[9], BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step(t, c, 3*time.Second, time.Second)
	if got := backfillRuns(t, &h.exclusive); len(got) != 0 {
		t.Fatalf("backfill runs of a paused task %v, want none", got)
	}
	if got := c.backfillOf("report"); got.State != taskstate.BackfillRunning || got.Taken != 0 {
		t.Fatalf("backfill of a paused task = %+v, want running, nothing taken", got)
	}
	if err := c.nodes[1].Resume(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	h.step(t, c, 3*time.Second, time.Second)
	if got := backfillRuns(t, &h.exclusive); !slices.Equal(got, want[:4]) {
		t.Fatalf("backfill runs after the resume %v, want the first 4, the 4th blocked", got)
	}
	if err := c.nodes[1].CancelBackfill(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[1].CancelBackfill(ctx, "report"); !errors.Is(err, ErrNoBackfill) {
		t.Fatalf("CancelBackfill of a cancelled backfill = %v, want ErrNoBackfill", err)
	}
	h.release <- struct{}{}
	h.step(t, c, 3*time.Second, time.Second)
	if got := backfillRuns(t, &h.exclusive); !slices.Equal(got, want[:4]) {
		t.Fatalf("backfill runs after the cancel %v, want still the first 4", got)
	}
	if got := c.backfillOf("report"); got.State != taskstate.BackfillCancelled || got.Taken != 4 {
		t.Fatalf("backfill = %+v, want cancelled, 4 taken", got)
	}
	if _, err := c.nodes[0].Backfill(ctx, "report", want[0], want[9], BackfillOptions{}); err != nil {
		t.Fatalf("a backfill after a cancelled one: %v", err)
	}
	h.step(t, c, 3*time.Second, time.Second)
	if got := backfillRuns(t, &h.exclusive); !slices.Equal(got, want) {
		t.Fatalf("backfill runs after a second backfill %v, want the other 6 added, the first 4 refused", got)
	}
}

// With allow, a backfill runs up to the task's MaxConcurrent instants at
// once, each on its own slot, still each once.
func TestBackfillAllow(t *testing.T) {
	c := newCluster(t)
	want := hourly(12)
	h := newBlocker(func(r Run) bool { return r.Backfill && r.Fire.Before(want[3]) })
	t.Cleanup(func() { close(h.release) })
	c.start(1, func() []Task {
		// A lease of 30 minutes: the backfill of an allow task reaches
		// instants its lease and a minute before now, here the last hour.
		return []Task{NewTask(h.task, Cron("0 * * * *"), Lock("k"), LockTTL(30*time.Minute), Name("export"),
			Overlap(OverlapAllow), MaxConcurrent(3))}
	})
	if _, err := c.nodes[0].Backfill(context.Background(), "export", want[0], want[11], BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step(t, c, 2*time.Second, time.Second)
	// Side by side, they start in any order.
	if got := backfillRuns(t, &h.exclusive); !slices.Equal(sorted(got), want[:3]) || h.most.Load() != 3 {
		t.Fatalf("backfill runs %v, %d at once; want the first 3 side by side", got, h.most.Load())
	}
	for range 3 {
		h.release <- struct{}{}
	}
	h.step(t, c, 2*time.Second, time.Second)
	if got := backfillRuns(t, &h.exclusive); !slices.Equal(sorted(got), want) {
		t.Fatalf("backfill runs %v, want all 12 once", got)
	}
}

// Bad backfills are refused with errors naming the value and the rule.
func TestBackfillValidation(t *testing.T) {
	c := newCluster(t)
	noop := func(context.Context) error { return nil }
	c.start(1, func() []Task {
		return []Task{
			NewTask(noop, Cron("0 * * * *"), Lock("k"), Name("report")),
			NewTask(noop, Cron("0 * * * *"), Name("unlocked")),
			NewTask(noop, Cron("@every 1s"), Lock("s"), Name("often")),
			NewTask(noop, Cron("0 * * * *"), Lock("a"), LockTTL(10*time.Minute), Overlap(OverlapAllow), MaxConcurrent(2), Name("allowed")),
			NewTask(noop, Cron("0 * * * *"), Lock("r"), Renew(), Overlap(OverlapAllow), MaxConcurrent(2), Name("renewed")),
		}
	})
	s := c.nodes[0]
	ctx := context.Background()
	from, past := epoch.Add(-10*time.Hour), epoch.Add(-time.Hour)
	for _, tc := range []struct {
		name, task string
		from, to   time.Time
		opts       BackfillOptions
		want       string
	}{
		{"unknown task", "nope", from, past, BackfillOptions{}, `unknown task: "nope"`},
		{"unlocked", "unlocked", from, past, BackfillOptions{}, "needs lock"},
		{"reversed", "report", epoch, from, BackfillOptions{}, "to must not be before from"},
		{"unset", "report", time.Time{}, past, BackfillOptions{}, "from and to must be set"},
		{"no instant", "report", from.Add(time.Minute), from.Add(2 * time.Minute), BackfillOptions{}, `holds no instant of the schedule "0 * * * *"`},
		{"too many", "often", epoch.Add(-48 * time.Hour), past, BackfillOptions{}, "more than 100000 instants"},
		{"future", "report", from, epoch.Add(time.Hour), BackfillOptions{}, "must be before now"},
		{"now", "report", from, epoch, BackfillOptions{}, "must be before now"},
		{"before 1970", "report", time.Unix(-3600, 0), time.Unix(3600, 0), BackfillOptions{}, "must be after 1970-01-01"},
		{"cancel-previous", "report", from, past, BackfillOptions{Overlap: OverlapCancelPrevious}, `overlap "cancel-previous": refused for a backfill`},
		{"allow without max", "report", from, past, BackfillOptions{Overlap: OverlapAllow}, `overlap "allow": needs the task's maxConcurrent`},
		{"unknown policy", "report", from, past, BackfillOptions{Overlap: "queue"}, `overlap "queue": must be one of`},
		// An allow task's scheduled run of an instant may still be going in
		// another slot: the backfill stops short of them.
		{"allow, a run may be going", "allowed", from, epoch.Add(-5 * time.Minute), BackfillOptions{},
			"to 2025-12-31 23:55:00 +0000 UTC: must be at least 11m0s before now (2026-01-01 00:00:00 +0000 UTC) for a task with overlap allow"},
		{"allow, renewed without maxRunTime", "renewed", from, past, BackfillOptions{}, "overlap allow with renew and no maxRunTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Backfill(ctx, tc.task, tc.from, tc.to, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Backfill = %v, want an error containing %q", err, tc.want)
			}
			if tc.task != "nope" && !errors.Is(err, ErrInvalidBackfill) {
				t.Errorf("Backfill = %v, want ErrInvalidBackfill", err)
			}
		})
	}
	if _, err := s.Backfill(ctx, "report", from, past, BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelBackfill(ctx, "unlocked"); !errors.Is(err, ErrNoBackfill) {
		t.Errorf("CancelBackfill of a task without one = %v, want ErrNoBackfill", err)
	}
}

// A backfill's runs of past instants do not stretch the audit back over
// the fires between them and now: after a backfill that fills the whole
// kept history, the audit starts from its runs, and finds nothing missed.
func TestBackfillLeavesTheAuditQuiet(t *testing.T) {
	c := newCluster(t)
	var x exclusive
	c.start(2, func() []Task { return []Task{NewTask(x.task, Cron("0 * * * *"), Lock("k"), Name("report"))} })
	c.step(2*time.Hour+5*time.Second, time.Second)
	want := hourly(60)[:30] // 60 to 31 hours back: more than the history keeps
	ctx := context.Background()
	if _, err := c.nodes[0].Backfill(ctx, "report", want[0], want[29], BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Second, time.Second)
	if n := len(backfillRuns(t, &x)); n != 30 {
		t.Fatalf("%d backfill runs, want 30", n)
	}
	a, err := c.nodes[1].Audit(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if a.Missed != 0 || a.From.Before(epoch.Add(2*time.Hour)) {
		t.Fatalf("audit after the backfill: %d missed from %v; want none, from the backfill's runs (after %v)", a.Missed, a.From,
			epoch.Add(2*time.Hour))
	}
}
