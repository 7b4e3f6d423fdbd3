package metrics

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/scheduling"
)

// Two tasks fire every minute, and their first runs, of 00:01, block at
// the node's gate: "sync" (overlap buffer-one) until the test opens it at
// 00:03:30, so that its fire at 00:02 waits (a skip of reason buffered)
// and the one at 00:03 is skipped while it does (one_waiting); "latest"
// (cancel-previous) until its context ends, which its fire at 00:02 does
// (buffered), superseding it: a run of outcome cancelled. Each waiting
// fire's run is a run, of attempt 1, not a retry; every series of both
// reasons exists at zero from Init on.
func TestOverlapMetrics(t *testing.T) {
	reg, m, n := instrumented(t)
	var latestRuns atomic.Int32
	var cause atomic.Value
	m.Init("sync", "latest")
	for _, r := range []string{ReasonBuffered, ReasonOneWaiting} {
		if got := sample(t, reg, TaskSkips, "task", "sync", "reason", r); got != 0 {
			t.Fatalf("skips[%s] = %v before any fire", r, got)
		}
	}
	n.Start(t,
		scheduling.NewTask(n.BlockFirst(), scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour),
			scheduling.Name("sync"), scheduling.Overlap(scheduling.OverlapBufferOne)),
		scheduling.NewTask(func(ctx context.Context) error {
			if latestRuns.Add(1) == 1 {
				err := n.Gate.Wait(ctx) // its context ends before the gate opens
				cause.Store(context.Cause(ctx))
				return err
			}
			return nil
		}, scheduling.Cron("@every 1m"), scheduling.Lock("latest"), scheduling.LockTTL(time.Hour), scheduling.Name("latest"),
			scheduling.Overlap(scheduling.OverlapCancelPrevious)),
	)
	// A second at a time, settled with the runs that block, to 00:03:30.
	n.StepTo(t, 3*time.Minute+30*time.Second)
	if c, _ := cause.Load().(error); !errors.Is(c, scheduling.ErrSuperseded) {
		t.Fatalf("latest's first run ended with cause %v, want scheduling.ErrSuperseded", c)
	}
	n.Gate.Open()
	// To 00:04:30: sync's first run ends, its waiting fire runs at the next
	// poll, then 00:04.
	n.StepTo(t, 4*time.Minute+30*time.Second)
	if err := n.S.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{TaskSkips, []string{"task", "sync", "reason", ReasonBuffered}, 1},
		{TaskSkips, []string{"task", "sync", "reason", ReasonOneWaiting}, 1},
		{TaskSkips, []string{"task", "sync", "reason", ReasonStillRunning}, 0},
		{TaskSkips, []string{"task", "sync", "reason", ReasonLockError}, 0},
		{TaskRuns, []string{"task", "sync", "outcome", "ok"}, 3}, // 00:01, the waiting 00:02, 00:04
		{TaskRetries, []string{"task", "sync"}, 0},               // the waiting fire's run is attempt 1
		{TaskFires, []string{"task", "sync"}, 5},                 // 00:02 counts as it waits and as it runs
		{TaskSkips, []string{"task", "latest", "reason", ReasonBuffered}, 1},
		{TaskSkips, []string{"task", "latest", "reason", ReasonOneWaiting}, 0},
		{TaskRuns, []string{"task", "latest", "outcome", "cancelled"}, 1}, // 00:01, superseded
		{TaskRuns, []string{"task", "latest", "outcome", "error"}, 0},
		{TaskRuns, []string{"task", "latest", "outcome", "ok"}, 3}, // the waiting 00:02, 00:03, 00:04
		{TaskRetries, []string{"task", "latest"}, 0},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg, TaskSkips, TaskRuns)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint of %s, %s: %v %+v", TaskSkips, TaskRuns, err, problems)
	}
}
