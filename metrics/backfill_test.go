package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/ndigo/ndigo/scheduling"
)

// A backfill's runs count in ndigo_task_backfill_runs_total and in
// ndigo_task_runs_total, and stay out of the lateness histogram: their
// instants are past on purpose.
func TestBackfillMetrics(t *testing.T) {
	reg, m, n := instrumented(t)
	m.Init("report")
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("0 0 1 1 *"),
		scheduling.Lock("report"), scheduling.Name("report")))
	if _, err := n.S.Backfill(context.Background(), "report", time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), epoch.Add(-time.Hour), // 2023, 2024, 2025
		scheduling.BackfillOptions{}); err != nil {
		t.Fatal(err)
	}
	n.StepTo(t, 2*time.Second)
	if err := n.S.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{TaskBackfillRuns, []string{"task", "report"}, 3},
		{TaskRuns, []string{"task", "report", "outcome", "ok"}, 3},
		{TaskLateness, []string{"task", "report"}, 0},
		{TaskRetries, []string{"task", "report"}, 0},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
