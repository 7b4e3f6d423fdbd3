package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// startRetryNode starts a real scheduler (node node-a, in-process locks
// and task state, a fake clock at epoch: a fakenode.Node) and serves a
// real admin handler on it, whose address it returns; its task
// "Payroll.Close" fires every minute and retries a failed run 3 times,
// after a delay below 5m for the first retry; its first run, at 00:01,
// fails, and every other returns nil.
func startRetryNode(t *testing.T) (*fakenode.Node, string) {
	t.Helper()
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	n.Start(t,
		scheduling.NewTask(fakenode.FailFirst(errors.New("books do not balance")), scheduling.Cron("@every 1m"),
			scheduling.Lock("payroll-window"), scheduling.Name("Payroll.Close"), scheduling.Retry(3), scheduling.RetryBackoff(5*time.Minute)),
		scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"), scheduling.Name("reports")),
	)
	return n, serveAdmin(t, n.S)
}

// ndigo tasks shows the attempt of the cluster's last fire and the retry
// due; ndigo runs has an ATTEMPT column: k/n (n = retries+1) for each run
// of a task that retries, none for a skip and for a task that does not.
func TestRetriesInTheTables(t *testing.T) {
	n, url := startRetryNode(t)
	env := map[string]string{"NDIGO_ADMIN": url}
	n.StepTo(t, time.Minute+30*time.Second)
	due := n.S.Tasks()[0].LastRan.RetryAt
	// The delay is a hash of the task's name, the fire and the attempt:
	// the same in every run. The stages below need it past 00:02.
	if !due.After(epoch.Add(2*time.Minute)) || !due.Before(epoch.Add(2*time.Minute+59*time.Second)) {
		t.Fatalf("the retry of 00:01 is due at %v, want between 00:02 and 00:02:59: choose another backoff", due)
	}
	dueCell := due.UTC().Format(stampFormat)

	res := ndigo(t, env, "tasks")
	rs := rows(t, res.stdout)
	if want := []string{"Payroll.Close", "@every 1m", "payroll-window", "2026-01-01T00:02:00Z", "no", "failing", "2026-01-01T00:01:00Z", "error", "1/4",
		"node-a", "1", "error", dueCell, "1", "-", "-"}; res.code != 0 || !slices.Equal(row(t, rs, "Payroll.Close"), want) {
		t.Errorf("tasks with the retry pending: exit %d, row %q, want %q (%s)", res.code, row(t, rs, "Payroll.Close"), want, res.stderr)
	}
	if got := row(t, rs, "reports"); got[8] != "-" || got[12] != "-" {
		t.Errorf("a task that does not retry: %q, want no attempt and no retry due", got)
	}

	n.StepTo(t, 2*time.Minute+30*time.Second)
	res = ndigo(t, env, "tasks")
	if got := row(t, rows(t, res.stdout), "Payroll.Close"); got[7] != "skipped: retrying" || got[8] != "-" || got[11] != "skipped: retrying" || got[12] != dueCell {
		t.Errorf("tasks after 00:02: %q, want it skipped, the retry still due", got)
	}

	n.StepTo(t, 3*time.Minute+30*time.Second)
	res = ndigo(t, env, "tasks")
	if got := row(t, rows(t, res.stdout), "Payroll.Close"); got[6] != "2026-01-01T00:03:00Z" || got[8] != "1/4" || got[12] != "-" {
		t.Errorf("tasks after the retry: %q, want 00:03's first attempt and no retry due", got)
	}
	res = ndigo(t, env, "runs", "Payroll.Close")
	got := rows(t, res.stdout)
	want := [][]string{
		{"FIRE", "KIND", "ATTEMPT", "NODE", "TOKEN", "START", "DURATION", "OUTCOME", "ERROR"},
		{"2026-01-01T00:03:00Z", "scheduled", "1/4", "node-a", "3", "2026-01-01T00:03:00Z", "0s", "ok", "-"},
		{"2026-01-01T00:01:00Z", "scheduled", "2/4", "node-a", "2", due.Truncate(time.Second).Add(time.Second).UTC().Format(stampFormat), "0s", "ok", "-"},
		{"2026-01-01T00:02:00Z", "scheduled", "-", "node-a", "-", "-", "0s", "skipped: retrying", "-"},
		{"2026-01-01T00:01:00Z", "scheduled", "1/4", "node-a", "1", "2026-01-01T00:01:00Z", "0s", "error", "books do not balance"},
	}
	if res.code != 0 || len(got) != len(want) {
		t.Fatalf("runs: exit %d:\n%s\nwant %d lines (%s)", res.code, res.stdout, len(want), res.stderr)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("runs line %d: %q, want %q", i, got[i], want[i])
		}
	}
	res = ndigo(t, env, "runs", "reports")
	if got := row(t, rows(t, res.stdout), "2026-01-01T00:03:00Z"); got[2] != "-" {
		t.Errorf("runs of a task that does not retry: %q, want no attempt", got)
	}
	res = ndigo(t, env, "--json", "runs", "Payroll.Close")
	if !strings.Contains(res.stdout, `"retries": 3,`) || !strings.Contains(res.stdout, `"attempt": 2,`) {
		t.Errorf("runs --json: %s; want the retries and the attempts", res.stdout)
	}
}

// The ATTEMPT cell, for each attempt k of a task with retries, run or not.
func TestAttemptCell(t *testing.T) {
	for _, c := range []struct {
		k, retries int
		ran        bool
		want       string
	}{
		{0, 0, true, "-"}, // a node that predates retries
		{1, 0, true, "-"},
		{1, 3, true, "1/4"},
		{1, 3, false, "-"}, // a skip: no attempt ran
		{2, 3, false, "2/4"},
		{4, 3, true, "4/4"},
		{3, 1, true, "3"}, // a retry beyond what the node's task allows now
		{2, 0, true, "2"},
	} {
		if got := attempt(c.k, c.retries, c.ran); got != c.want {
			t.Errorf("attempt(%d, %d, %v) = %q, want %q", c.k, c.retries, c.ran, got, c.want)
		}
	}
}
