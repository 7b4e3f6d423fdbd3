package admin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// overlapping is a real Handler on a started scheduler (node node-a, its
// locks and task state in the process, on a fake clock at epoch: a
// fakenode.Node) whose task "sync" fires every minute with overlap
// buffer-one, and retries a failed run twice (none fails): its first run,
// of 00:01, blocks at the node's gate until the test opens it, so that the
// fire at 00:02 waits for it (buffered) and the one at 00:03 is skipped
// (skipped: one waiting); every other run returns at once. "export"
// (overlap allow, 3 at once), "latest" (cancel-previous) and "plain" (the
// default) never fire in the test. n.StepTo settles the scheduler every
// second, also while the first run blocks.
type overlapping struct {
	n *fakenode.Node
	s *scheduling.Scheduler
	h *Handler
}

func newOverlapping(t *testing.T) *overlapping {
	t.Helper()
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	noop := func(context.Context) error { return nil }
	n.Start(t,
		scheduling.NewTask(n.BlockFirst(), scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour), scheduling.Name("sync"),
			scheduling.Overlap(scheduling.OverlapBufferOne), scheduling.Retry(2)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Lock("export"), scheduling.Name("export"),
			scheduling.Overlap(scheduling.OverlapAllow), scheduling.MaxConcurrent(3)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Lock("latest"), scheduling.Name("latest"),
			scheduling.Overlap(scheduling.OverlapCancelPrevious)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Name("plain")),
	)
	return &overlapping{n: n, s: n.S, h: quietHandler(t, n.S)}
}

// release lets the first run return.
func (o *overlapping) release() { o.n.Gate.Open() }

// The stages of the scenario: 00:01's run blocked; 00:02 waiting for it;
// 00:03 skipped as one waits; the first run released at 00:03:30, the
// waiting fire's run, and 00:04's.
const (
	blockedStage  = time.Minute + 30*time.Second
	bufferedStage = 2*time.Minute + 30*time.Second
	fullStage     = 3*time.Minute + 30*time.Second
	ranStage      = 4*time.Minute + 30*time.Second
)

// The task list shows each task's overlap policy ("skip" for the
// default) and maxConcurrent; while a fire waits for the run going, its
// instant in waitingFire, not as a retry (retryAt stays null); the fire
// buffered and the one skipped as one waits, as they are; and the waiting
// fire's run as attempt 1 of its fire, once it ran.
func TestOverlapInTheAPI(t *testing.T) {
	o := newOverlapping(t)
	o.n.StepTo(t, blockedStage)
	tasks, raw := listTasks(t, o.h, 4)
	for name, want := range map[string]struct {
		overlap string
		max     int
	}{"sync": {"buffer-one", 0}, "export": {"allow", 3}, "latest": {"cancel-previous", 0}, "plain": {"skip", 0}} {
		if got := tasks[name]; got.Overlap != want.overlap || got.MaxConcurrent != want.max || raw[name]["overlap"] != want.overlap ||
			raw[name]["maxConcurrent"] != float64(want.max) {
			t.Errorf("%s: overlap %q, maxConcurrent %d (raw %v, %v); want %q, %d", name, got.Overlap, got.MaxConcurrent,
				raw[name]["overlap"], raw[name]["maxConcurrent"], want.overlap, want.max)
		}
		if _, ok := raw[name]["waitingFire"]; !ok || raw[name]["waitingFire"] != nil {
			t.Errorf("%s: waitingFire %v (present %v) with no fire waiting, want null", name, raw[name]["waitingFire"], ok)
		}
	}
	if sync := tasks["sync"]; !sync.Running || sync.LastFire != nil {
		t.Errorf("sync while its first run blocks: running %v, lastFire %+v; want running, no fire ended", sync.Running, sync.LastFire)
	}

	o.n.StepTo(t, bufferedStage)
	tasks, raw = listTasks(t, o.h, 4)
	sync := tasks["sync"]
	if sync.WaitingFire == nil || !sync.WaitingFire.Equal(epoch.Add(2*time.Minute)) || raw["sync"]["waitingFire"] != "2026-01-01T00:02:00Z" {
		t.Errorf("waitingFire %v, want the fire at 00:02", raw["sync"]["waitingFire"])
	}
	if sync.RetryAt != nil {
		t.Errorf("retryAt %v while a fire waits, want null: it is no retry", sync.RetryAt)
	}
	if f := sync.LastFire; f == nil || f.Outcome != "buffered" || !f.Fire.Equal(epoch.Add(2*time.Minute)) || f.Start != nil || f.Attempt != 1 {
		t.Errorf("lastFire %+v, want 00:02 buffered, not started", f)
	}
	if sync.LastRun != nil || !sync.Running || sync.Skips != 1 {
		t.Errorf("lastRun %+v, running %v, skips %d; want no run ended, the first running, one skip", sync.LastRun, sync.Running, sync.Skips)
	}
	if got, want := attempts(sync.RecentFires), []string{"buffered@00:02#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	o.n.StepTo(t, fullStage)
	tasks, raw = listTasks(t, o.h, 4)
	sync = tasks["sync"]
	if f := sync.LastFire; f == nil || f.Outcome != string(scheduling.OutcomeBufferFull) || !f.Fire.Equal(epoch.Add(3*time.Minute)) {
		t.Errorf("lastFire %+v, want 00:03 skipped: one waiting", f)
	}
	if raw["sync"]["waitingFire"] != "2026-01-01T00:02:00Z" || sync.RetryAt != nil || sync.Skips != 2 {
		t.Errorf("waitingFire %v, retryAt %v, skips %d; want 00:02 still waiting, no retry, two skips", raw["sync"]["waitingFire"], sync.RetryAt, sync.Skips)
	}
	if c := sync.ClusterLastRun; c == nil || c.Outcome != "skipped: one waiting" || c.Start != nil {
		t.Errorf("clusterLastRun %+v, want 00:03 skipped: one waiting", c)
	}

	o.release()
	o.n.StepTo(t, ranStage)
	tasks, raw = listTasks(t, o.h, 4)
	sync = tasks["sync"]
	if sync.WaitingFire != nil || raw["sync"]["waitingFire"] != nil || sync.RetryAt != nil {
		t.Errorf("waitingFire %v, retryAt %v once the waiting fire ran, want both null", raw["sync"]["waitingFire"], sync.RetryAt)
	}
	if l := sync.LastRun; l == nil || l.Outcome != "ok" || !l.Fire.Equal(epoch.Add(4*time.Minute)) || l.Attempt != 1 || sync.Runs != 3 {
		t.Errorf("lastRun %+v, runs %d; want 00:04's, ok, after 3 runs", l, sync.Runs)
	}
	// By fire: the waiting fire's run beside its buffered record.
	if got, want := attempts(sync.RecentFires), []string{"ok@00:04#1", "skipped: one waiting@00:03#1", "ok@00:02#1", "buffered@00:02#1", "ok@00:01#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	runs := taskRuns(t, o.h, "sync")
	// As recorded: the first run when it ended, then the waiting fire's
	// run, as attempt 1 (it is no retry).
	if got, want := attempts(runs.Runs), []string{"ok@00:04#1", "ok@00:02#1", "ok@00:01#1", "skipped: one waiting@00:03#1", "buffered@00:02#1"}; !slices.Equal(got, want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
	waited, first := runs.Runs[1], runs.Runs[2]
	if waited.Start == nil || waited.Start.Before(epoch.Add(fullStage)) || !waited.Start.Before(epoch.Add(4*time.Minute)) || waited.Token <= first.Token {
		t.Errorf("the waiting fire's run %+v, want it started once the first (%+v) ended at 00:03:30, before 00:04, under a greater token", waited, first)
	}
	if first.Start == nil || !first.Start.Equal(epoch.Add(time.Minute)) || first.Duration != "2m30s" {
		t.Errorf("the first run %+v, want 00:01's, 2m30s long", first)
	}
	for _, r := range runs.Runs[3:] {
		if r.Start != nil || r.Token != 0 || r.Node != "node-a" {
			t.Errorf("skip %+v, want no start nor token, on node-a", r)
		}
	}
}
