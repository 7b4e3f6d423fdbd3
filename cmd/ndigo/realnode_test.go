package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// realNode is a real admin handler on a real scheduler (in-process locks
// and task state), mounted under /admin, and every request that reached
// the server, with its path as sent.
type realNode struct {
	s   *scheduling.Scheduler
	url string // the admin address, with the /admin prefix

	mu   sync.Mutex // protects seen
	seen []string   // "METHOD escaped-path?query"
}

func startRealNode(t *testing.T, token admin.Token, names ...string) *realNode {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Logger: slog.New(slog.DiscardHandler), State: store, Driver: locks.NewInProcessDriver()})
	for _, n := range names {
		if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@yearly"),
			scheduling.Lock("cli"), scheduling.Name(n))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := admin.New(admin.Options{Scheduler: s, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	n := &realNode{s: s}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.Method+" "+r.URL.RequestURI())
		n.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	n.url = srv.URL + "/admin"
	return n
}

// serveAdmin serves a real admin handler on s, its logs discarded, until
// the test ends, and returns its address.
func serveAdmin(t *testing.T, s *scheduling.Scheduler) string {
	t.Helper()
	h, err := admin.New(admin.Options{Scheduler: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// paused returns the names of the paused tasks.
func (n *realNode) paused(t *testing.T) []string {
	t.Helper()
	tasks, err := n.s.ClusterTasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ti := range tasks {
		if ti.Paused {
			out = append(out, ti.Name)
		}
	}
	return out
}

// The task names "." and ".." reach their own tasks on a real node, and
// no request (with the token or without) goes anywhere but the task
// endpoints under the admin prefix.
func TestDotNamesOnARealNode(t *testing.T) {
	n := startRealNode(t, testToken, ".", "..", "Payroll.Close")
	env := map[string]string{"NDIGO_ADMIN": n.url, "NDIGO_ADMIN_TOKEN": testToken}
	for _, name := range []string{".", ".."} {
		if res := ndigo(t, env, "pause", name); res.code != 0 {
			t.Fatalf("pause %q: exit %d: %s", name, res.code, res.stderr)
		}
		if got := n.paused(t); len(got) != 1 || got[0] != name {
			t.Errorf("after pause %q the paused tasks are %q", name, got)
		}
		res := ndigo(t, env, "--json", "runs", name)
		if res.code != 0 || !strings.Contains(res.stdout, `"task": "`+name+`"`) {
			t.Errorf("runs %q: exit %d, stdout %q, stderr %q", name, res.code, res.stdout, res.stderr)
		}
		if res := ndigo(t, env, "resume", name); res.code != 0 || len(n.paused(t)) != 0 {
			t.Errorf("resume %q: exit %d: %s; paused %q", name, res.code, res.stderr, n.paused(t))
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.seen {
		if !strings.HasPrefix(r, "GET /admin/scheduledtasks/runs?name=") && !strings.HasPrefix(r, "POST /admin/scheduledtasks/pause?name=") &&
			!strings.HasPrefix(r, "POST /admin/scheduledtasks/resume?name=") {
			t.Errorf("a request went to %s", r)
		}
	}
}

// A token with whitespace at its ends works for the CLI as for the node:
// both drop it, the node in its configuration (a secret file's newline),
// the CLI in NDIGO_ADMIN_TOKEN, which says so on stderr without the token.
func TestTokenWhitespaceOnARealNode(t *testing.T) {
	n := startRealNode(t, testToken+"\n", "Payroll.Close")
	for _, token := range []string{testToken, testToken + "\n", " " + testToken + "\r\n", "\t" + testToken + " "} {
		res := ndigo(t, map[string]string{"NDIGO_ADMIN": n.url, "NDIGO_ADMIN_TOKEN": token}, "pause", "Payroll.Close")
		if res.code != 0 {
			t.Errorf("pause with NDIGO_ADMIN_TOKEN %q: exit %d: %s", token, res.code, res.stderr)
		}
		noted := strings.Contains(res.stderr, "NDIGO_ADMIN_TOKEN has leading or trailing whitespace")
		if noted != (token != testToken) || strings.Contains(res.stderr, testToken) {
			t.Errorf("NDIGO_ADMIN_TOKEN %q: stderr %q; want a note only for whitespace, never the token", token, res.stderr)
		}
	}
	res := ndigo(t, map[string]string{"NDIGO_ADMIN": n.url, "NDIGO_ADMIN_TOKEN": " \n"}, "pause", "Payroll.Close")
	if res.code != exitFailure || !strings.Contains(res.stderr, "ndigo: NDIGO_ADMIN_TOKEN is only whitespace: sending no token") ||
		!strings.Contains(res.stderr, "401 Unauthorized") {
		t.Errorf("NDIGO_ADMIN_TOKEN of whitespace only: exit %d, stderr %q; want 401, said so", res.code, res.stderr)
	}
	// Reading sends no token, and says nothing of it.
	res = ndigo(t, map[string]string{"NDIGO_ADMIN": n.url, "NDIGO_ADMIN_TOKEN": testToken + "\n"}, "tasks")
	if res.code != 0 || res.stderr != "" {
		t.Errorf("tasks: exit %d, stderr %q", res.code, res.stderr)
	}
}

// With the node's Redis (locks and task state) killed, ndigo tasks warns on
// stderr that the cluster's state cannot be read, and the task's row shows
// the fire that failed on this node and counts it. Once Redis is back,
// ndigo runs lists the failed fire and ndigo audit finds it failed, none
// missed, and exits 0; with the node stopped for two minutes, the audit
// finds the fires that ran nowhere and exits 3.
func TestTasksShowsAFailingBackend(t *testing.T) {
	c := backendnode.Redis(t, "cli", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	n := c.Nodes[0]
	url := serveAdmin(t, n.S)
	c.Step(t)
	res := ndigo(t, nil, "--admin", url, "tasks")
	if got := row(t, rows(t, res.stdout), backendnode.Task); res.code != 0 || res.stderr != "" || got[11] != "ok" || got[13] != "0" {
		t.Fatalf("with Redis up: exit %d, stderr %q, row %q; want the run, no failure, no warning", res.code, res.stderr, got)
	}

	c.Server.Kill()
	c.Step(t)
	res = ndigo(t, nil, "--admin", url, "tasks")
	if !strings.Contains(res.stderr, "ndigo: warning: the node cannot read the cluster's task state") || res.code != 0 {
		t.Errorf("with Redis down: exit %d, stderr %q; want the warning", res.code, res.stderr)
	}
	if got := row(t, rows(t, res.stdout), backendnode.Task); got[11] != "failed: lock" || got[13] != "1" {
		t.Errorf("with Redis down: row %q; want the failed fire and one failure", got)
	}

	c.Server.Restart() // empty: persistence is off
	c.Step(t)
	res = ndigo(t, nil, "--admin", url, "runs", backendnode.Task)
	failed := row(t, rows(t, res.stdout), "2026-01-01T00:00:02Z")
	if res.code != 0 || failed[7] != "failed: lock" || failed[5] != "-" || failed[8] == "-" {
		t.Errorf("runs after the outage: exit %d, %q; want the fire at 00:00:02 failed, no start, the error", res.code, res.stdout)
	}
	res = ndigo(t, nil, "--admin", url, "audit", backendnode.Task)
	if res.code != 0 || !strings.Contains(res.stdout, "1 ran, 0 skipped, 1 failed, 0 missed") ||
		row(t, rows(t, res.stdout)[1:], "2026-01-01T00:00:02Z")[1] != "failed" {
		t.Errorf("audit after the outage: exit %d, stdout %q, stderr %q; want the fire failed, none missed", res.code, res.stdout, res.stderr)
	}

	if err := n.S.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Clock.Advance(2 * time.Minute) // the horizon: 65s back (the lock TTL and a minute)
	res = ndigo(t, nil, "--admin", url, "audit", backendnode.Task)
	if res.code != exitMissed || !strings.Contains(res.stderr, "fires of \"Payroll.Close\" ran nowhere, the last at 2026-01-01T00:00:58Z") {
		t.Errorf("audit with the node stopped: exit %d, stderr %q; want %d and the missed fires", res.code, res.stderr, exitMissed)
	}
	res = ndigo(t, nil, "--admin", url, "--json", "audit", backendnode.Task)
	if res.code != exitMissed || !strings.Contains(res.stdout, `"missed": 55,`) {
		t.Errorf("audit --json with the node stopped: exit %d, stdout of %d bytes; want %d and the JSON with 55 missed (00:00:04 to 00:00:58)", res.code, len(res.stdout), exitMissed)
	}
}
