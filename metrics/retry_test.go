package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// A task that retries a failed run once (its first run, at 00:01, fails):
// the fire at 00:02, due while the retry is pending, is a skip of reason
// retrying; the retry is a run, counted in ndigo_task_retries_total; a
// task that does not retry has the counter at zero from Init on.
func TestRetryMetrics(t *testing.T) {
	reg, m, n := instrumented(t)
	m.Init("report", "plain")
	if got := sample(t, reg, TaskRetries, "task", "plain"); got != 0 {
		t.Fatalf("retries of plain %v before any fire, want 0", got)
	}
	n.Start(t,
		scheduling.NewTask(fakenode.FailFirst(errors.New("ledger locked")), scheduling.Cron("@every 1m"), scheduling.Lock("report"),
			scheduling.Name("report"), scheduling.Retry(1), scheduling.RetryBackoff(2*time.Minute)),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"), scheduling.Name("plain")),
	)
	n.StepTo(t, 90*time.Second)
	due := n.S.Tasks()[0].LastRan.RetryAt
	// The delay is a hash of the task's name, the fire and the attempt:
	// the same in every run. The test needs it past the fire at 00:02.
	if !due.After(epoch.Add(2*time.Minute)) || !due.Before(epoch.Add(2*time.Minute+59*time.Second)) {
		t.Fatalf("the retry of 00:01 is due at %v, want between 00:02 and 00:02:59: choose another backoff", due)
	}
	n.StepTo(t, 3*time.Minute+30*time.Second) // the skip at 00:02, the retry, 00:03
	if err := n.S.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{TaskRetries, []string{"task", "report"}, 1},
		{TaskRuns, []string{"task", "report", "outcome", "error"}, 1},
		{TaskRuns, []string{"task", "report", "outcome", "ok"}, 2}, // the retry and 00:03
		{TaskSkips, []string{"task", "report", "reason", ReasonRetrying}, 1},
		{TaskFires, []string{"task", "report"}, 4}, // 00:01, 00:02 skipped, the retry, 00:03
		{TaskRetries, []string{"task", "plain"}, 0},
		{TaskRuns, []string{"task", "plain", "outcome", "ok"}, 3},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg, TaskRetries)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint of %s: %v %+v", TaskRetries, err, problems)
	}
}
