package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// A task that retries a failed run once (its first run, at 00:01, fails):
// the fire at 00:02, due while the retry is pending, is a skip of reason
// retrying; the retry is a run, counted in ndigo_task_retries_total; a
// task that does not retry has the counter at zero from Init on.
func TestRetryMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: m.InstrumentDriver(locks.NewInProcessDriver(locks.WithClock(fc))),
		State: store, Listeners: []scheduling.Listener{m}, Logger: slog.New(slog.DiscardHandler)})
	var n atomic.Int32
	if err := s.Add(
		scheduling.NewTask(func(context.Context) error {
			if n.Add(1) == 1 {
				return errors.New("ledger locked")
			}
			return nil
		}, scheduling.Cron("@every 1m"), scheduling.Lock("report"), scheduling.Name("report"),
			scheduling.Retry(1), scheduling.RetryBackoff(2*time.Minute)),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"), scheduling.Name("plain")),
	); err != nil {
		t.Fatal(err)
	}
	for _, ti := range s.Tasks() {
		m.Init(ti.Name)
	}
	if got := sample(t, reg, TaskRetries, "task", "plain"); got != 0 {
		t.Fatalf("retries of plain %v before any fire, want 0", got)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	settle(t, fc, s, 90)
	due := s.Tasks()[0].LastRan.RetryAt
	// The delay is a hash of the task's name, the fire and the attempt:
	// the same in every run. The test needs it past the fire at 00:02.
	if !due.After(epoch.Add(2*time.Minute)) || !due.Before(epoch.Add(2*time.Minute+59*time.Second)) {
		t.Fatalf("the retry of 00:01 is due at %v, want between 00:02 and 00:02:59: choose another backoff", due)
	}
	settle(t, fc, s, 120) // to 00:03:30: the skip at 00:02, the retry, 00:03
	if err := s.Stop(context.Background()); err != nil {
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
