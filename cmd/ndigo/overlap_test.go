package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
)

// startOverlapNode starts a real scheduler (node node-a, in-process locks
// and task state, a fake clock at epoch: a fakenode.Node) and serves a
// real admin handler on it, whose address it returns; its task "sync"
// fires every minute with overlap buffer-one and retries a failed run
// twice (none fails): its first run, of 00:01, blocks at the node's gate
// until the test opens it, so that the fire at 00:02 waits for it
// (buffered) and the one at 00:03 is skipped (skipped: one waiting).
func startOverlapNode(t *testing.T) (*fakenode.Node, string) {
	t.Helper()
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	n.Start(t, scheduling.NewTask(n.BlockFirst(), scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour),
		scheduling.Name("sync"), scheduling.Overlap(scheduling.OverlapBufferOne), scheduling.Retry(2)))
	return n, serveAdmin(t, n.S)
}

// ndigo tasks shows a buffered fire and the one skipped while it waits as
// their outcomes, with no retry due (a waiting fire is no retry); ndigo
// runs lists both skips as they are, and the waiting fire's run, once the
// first ended, as attempt 1 of its fire (1/3), not as a retry.
func TestOverlapInTheTables(t *testing.T) {
	n, url := startOverlapNode(t)
	env := map[string]string{"NDIGO_ADMIN": url}
	n.StepTo(t, 2*time.Minute+30*time.Second)
	res := ndigo(t, env, "tasks")
	if want := []string{"sync", "@every 1m", "sync", "2026-01-01T00:03:00Z", "no", "ok", "2026-01-01T00:02:00Z", "buffered", "-",
		"node-a", "-", "buffered", "-", "0", "-", "-"}; res.code != 0 || !slices.Equal(row(t, rows(t, res.stdout), "sync"), want) {
		t.Errorf("tasks with 00:02 waiting: exit %d, row %q, want %q (%s)", res.code, row(t, rows(t, res.stdout), "sync"), want, res.stderr)
	}

	n.StepTo(t, 3*time.Minute+30*time.Second)
	res = ndigo(t, env, "tasks")
	if want := []string{"sync", "@every 1m", "sync", "2026-01-01T00:04:00Z", "no", "ok", "2026-01-01T00:03:00Z", "skipped: one waiting", "-",
		"node-a", "-", "skipped: one waiting", "-", "0", "-", "-"}; res.code != 0 || !slices.Equal(row(t, rows(t, res.stdout), "sync"), want) {
		t.Errorf("tasks with 00:03 skipped: exit %d, row %q, want %q (%s)", res.code, row(t, rows(t, res.stdout), "sync"), want, res.stderr)
	}

	n.Gate.Open() // the first run returns
	n.StepTo(t, 4*time.Minute+30*time.Second)
	res = ndigo(t, env, "runs", "sync")
	got := rows(t, res.stdout)
	want := [][]string{
		{"FIRE", "KIND", "ATTEMPT", "NODE", "TOKEN", "START", "DURATION", "OUTCOME", "ERROR"},
		{"2026-01-01T00:04:00Z", "scheduled", "1/3", "node-a", "3", "2026-01-01T00:04:00Z", "0s", "ok", "-"},
		{"2026-01-01T00:02:00Z", "scheduled", "1/3", "node-a", "2", "2026-01-01T00:03:31Z", "0s", "ok", "-"},
		{"2026-01-01T00:01:00Z", "scheduled", "1/3", "node-a", "1", "2026-01-01T00:01:00Z", "2m30s", "ok", "-"},
		{"2026-01-01T00:03:00Z", "scheduled", "-", "node-a", "-", "-", "0s", "skipped: one waiting", "-"},
		{"2026-01-01T00:02:00Z", "scheduled", "-", "node-a", "-", "-", "0s", "buffered", "-"},
	}
	if res.code != 0 || len(got) != len(want) {
		t.Fatalf("runs: exit %d:\n%s\nwant %d lines (%s)", res.code, res.stdout, len(want), res.stderr)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("runs line %d: %q, want %q", i, got[i], want[i])
		}
	}
	res = ndigo(t, env, "tasks")
	if got := row(t, rows(t, res.stdout), "sync"); got[6] != "2026-01-01T00:04:00Z" || got[7] != "ok" || got[8] != "1/3" || got[12] != "-" {
		t.Errorf("tasks once the waiting fire ran: %q, want 00:04's first attempt and no retry due", got)
	}
	res = ndigo(t, env, "--json", "tasks")
	if !strings.Contains(res.stdout, `"overlap": "buffer-one",`) || !strings.Contains(res.stdout, `"waitingFire": null,`) {
		t.Errorf("tasks --json: %s; want the overlap policy and no fire waiting", res.stdout)
	}
}
