package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// retrying is a real Handler on a started scheduler (node node-a, its
// locks and task state in the process, on a fake clock at epoch: a
// fakenode.Node) whose task "report" fires every minute and retries a
// failed run once, after a delay below 2m: the first run, at 00:01, fails;
// every other returns nil.
type retrying struct {
	n     *fakenode.Node
	s     *scheduling.Scheduler
	h     *Handler
	first time.Time // the failed fire, 00:01
	due   time.Time // when its retry is due, once step has passed the fire
}

const retryBackoff = 2 * time.Minute

func newRetrying(t *testing.T) *retrying {
	t.Helper()
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	n.Start(t,
		scheduling.NewTask(fakenode.FailFirst(errors.New("ledger locked")), scheduling.Cron("@every 1m"), scheduling.Lock("report"),
			scheduling.Name("report"), scheduling.Retry(1), scheduling.RetryBackoff(retryBackoff)),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@yearly"), scheduling.Name("yearly")),
	)
	return &retrying{n: n, s: n.S, h: quietHandler(t, n.S), first: epoch.Add(time.Minute)}
}

// step advances the clock to epoch+to a second at a time (the poll that
// finds a retry due runs every second), and settles every fire.
func (r *retrying) step(t *testing.T, to time.Duration) {
	t.Helper()
	r.n.StepTo(t, to)
	if !r.due.IsZero() || r.n.Clock.Now().Before(r.first) {
		return
	}
	r.due = r.s.Tasks()[0].LastRan.RetryAt
	// The delay is a hash of the task's name, the fire and the attempt:
	// the same in every run. The stages below need it to pass 00:02, so
	// that a fire is skipped while the retry is pending, and to end before
	// 00:03.
	if !r.due.After(epoch.Add(2*time.Minute)) || !r.due.Before(epoch.Add(2*time.Minute+59*time.Second)) {
		t.Fatalf("the retry of the fire at 00:01 is due at %v, want between 00:02 and 00:02:59: choose another backoff", r.due)
	}
}

// The stages of a retried fire: failed at 00:01 with its retry pending;
// 00:02 skipped while it is; the retry run (00:01's attempt 2) and 00:03.
const (
	failedStage  = time.Minute + 30*time.Second
	skippedStage = 2*time.Minute + 30*time.Second
	retriedStage = 3*time.Minute + 30*time.Second
)

// tasksJSON returns the handler's GET /scheduledtasks, decoded, and its
// "report" task as raw keys.
func (r *retrying) tasksJSON(t *testing.T) (TaskJSON, map[string]any) {
	t.Helper()
	tasks, raw := listTasks(t, r.h, 2)
	return tasks["report"], raw["report"]
}

// attempts lists runs as "outcome@fire#attempt".
func attempts(runs []RunJSON) []string {
	var out []string
	for _, r := range runs {
		out = append(out, fmt.Sprintf("%s@%s#%d", r.Outcome, r.Fire.Format("15:04"), r.Attempt))
	}
	return out
}

// The task list shows a retrying task's spec, the attempt of each fire
// (1 for a first run, as the history keeps 0), and the retry pending until
// it ran; the history has every attempt, and the task's retries.
func TestRetriesInTheAPI(t *testing.T) {
	r := newRetrying(t)
	r.step(t, failedStage)
	task, raw := r.tasksJSON(t)
	if task.Retries != 1 || task.RetryBackoff != "2m0s" || task.RetryMaxBackoff != "3h20m0s" {
		t.Errorf("retry spec %d, %q, %q; want 1, 2m0s and the default cap 3h20m0s", task.Retries, task.RetryBackoff, task.RetryMaxBackoff)
	}
	if task.RetryAt == nil || !task.RetryAt.Equal(r.due) || raw["retryAt"] != r.due.UTC().Format(time.RFC3339Nano) {
		t.Errorf("retryAt %v (%v), want the pending retry's due time %v", task.RetryAt, raw["retryAt"], r.due)
	}
	if l := task.LastRun; l == nil || l.Outcome != "error" || l.Attempt != 1 || !l.Fire.Equal(r.first) {
		t.Errorf("lastRun %+v, want attempt 1 of 00:01, failed", l)
	}
	if c := task.ClusterLastRun; c == nil || c.Outcome != "error" || c.Attempt != 1 {
		t.Errorf("clusterLastRun %+v, want attempt 1, failed", c)
	}

	r.step(t, skippedStage)
	task, _ = r.tasksJSON(t)
	if f := task.LastFire; f == nil || f.Outcome != string(scheduling.OutcomeRetrying) || f.Attempt != 1 || f.Start != nil {
		t.Errorf("lastFire %+v, want 00:02 skipped: retrying", f)
	}
	if task.RetryAt == nil || !task.RetryAt.Equal(r.due) {
		t.Errorf("retryAt %v while the retry is pending, want %v", task.RetryAt, r.due)
	}
	if got, want := attempts(task.RecentFires), []string{"skipped: retrying@00:02#1", "error@00:01#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	r.step(t, retriedStage)
	task, raw = r.tasksJSON(t)
	if task.RetryAt != nil || raw["retryAt"] != nil {
		t.Errorf("retryAt %v once the retry ran, want null", raw["retryAt"])
	}
	if l := task.LastRun; l == nil || l.Attempt != 1 || l.Outcome != "ok" || !l.Fire.Equal(epoch.Add(3*time.Minute)) {
		t.Errorf("lastRun %+v, want 00:03's first attempt", l)
	}
	// By fire: the retry, a run of 00:01, sorts below 00:02's skip.
	if got, want := attempts(task.RecentFires), []string{"ok@00:03#1", "skipped: retrying@00:02#1", "ok@00:01#2", "error@00:01#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	runs := taskRuns(t, r.h, "report")
	// As recorded: the retry after the skip.
	if got, want := attempts(runs.Runs), []string{"ok@00:03#1", "ok@00:01#2", "skipped: retrying@00:02#1", "error@00:01#1"}; runs.Retries != 1 || !slices.Equal(got, want) {
		t.Errorf("runs: retries %d, %q; want 1, %q", runs.Retries, got, want)
	}
	if retry := runs.Runs[1]; retry.Start == nil || retry.Start.Before(r.due) || retry.Token <= runs.Runs[3].Token {
		t.Errorf("the retry %+v, want it started at its due time %v, under a token above the failed run's", retry, r.due)
	}

	// A task that does not retry has the fields, empty.
	if yearly := taskRuns(t, r.h, "yearly"); yearly.Retries != 0 {
		t.Errorf("GET runs of yearly: %+v; want retries 0", yearly)
	}
}
