package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/scheduling"
)

// serveAdminToken serves a real admin handler on s with the token, its
// logs discarded, until the test ends, and returns its address.
func serveAdminToken(t *testing.T, s *scheduling.Scheduler, token admin.Token) string {
	t.Helper()
	h, err := admin.New(admin.Options{Scheduler: s, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// fireLog is what the nodes' handlers ran: the nodes that ran each fire,
// and each run's arguments.
type fireLog struct {
	mu    sync.Mutex
	fires map[time.Time][]string
	args  []string
}

func (l *fireLog) handler(t *testing.T, node string) scheduling.HandlerFunc {
	return func(ctx context.Context, args json.RawMessage) error {
		r, ok := scheduling.RunFromContext(ctx)
		if !ok {
			t.Errorf("node %s: a run without its Run", node)
			return nil
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.fires[r.Fire] = append(l.fires[r.Fire], node)
		l.args = append(l.args, string(args))
		return nil
	}
}

// snapshot returns the fires run so far, in order, and the nodes that ran
// each.
func (l *fireLog) snapshot() ([]time.Time, map[time.Time][]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nodes := make(map[time.Time][]string, len(l.fires))
	for at, ns := range l.fires {
		nodes[at] = slices.Clone(ns)
	}
	return slices.SortedFunc(maps.Keys(nodes), time.Time.Compare), nodes
}

// lists reports whether s has the task name, run by a stored schedule.
func lists(s *scheduling.Scheduler, name string) bool {
	for _, ti := range s.Tasks() {
		if ti.Name == name && ti.Schedule != nil {
			return true
		}
	}
	return false
}

// The acceptance test: a runtime schedule created through the CLI
// on one node runs on the cluster from its next fire. Three nodes share one
// real Redis (locks and task state) and a fake clock, which the test moves
// a second at a time, each second settled on every node; each registers the
// handler (after its start). The CLI creates a locked schedule firing every
// second through node A: each of its fires from the next one on runs
// exactly once across the nodes, B and C list the task from their next
// poll, and every run gets the schedule's arguments. The CLI deletes it
// through node B: from A's and C's next poll no node lists it or runs it.
func TestScheduleCreatedThroughTheCLIRunsOnTheCluster(t *testing.T) {
	const name = "report-acme"
	c := backendnode.Redis(t, "cli-schedules", epoch, 3)
	log := &fireLog{fires: map[time.Time][]string{}}
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		if err := n.S.Handle("tenant-report", log.handler(t, n.Name)); err != nil {
			t.Fatal(err)
		}
		urls[i] = serveAdminToken(t, n.S, testToken)
	}
	a, b, cc := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	c.Step(t)

	created := c.Clock.Now()
	res := ndigo(t, map[string]string{"NDIGO_ADMIN": urls[0], "NDIGO_ADMIN_TOKEN": testToken}, "schedule", "create", name,
		"--handler", "tenant-report", "--cron", "* * * * * *", "--lock", "report:acme", "--args", `{"tenant": "acme"}`)
	if res.code != 0 {
		t.Fatalf("schedule create on node A: exit %d: %s", res.code, res.stderr)
	}
	if !lists(a.S, name) {
		t.Fatalf("node A does not list %s at once after creating it", name)
	}
	// B and C read it at their next poll, a second on.
	for step := 1; !lists(b.S, name) || !lists(cc.S, name); step++ {
		if step > 2 {
			t.Fatalf("%d seconds after the create, node B lists it %v, node C %v; want both within about a poll", step-1, lists(b.S, name), lists(cc.S, name))
		}
		c.Step(t)
	}
	for range 6 {
		c.Step(t)
	}
	fires, nodes := log.snapshot()
	last := c.Clock.Now()
	if len(fires) == 0 || !fires[0].After(created) {
		t.Fatalf("fires %v; want the first after the create at %v", fires, created)
	}
	// Every instant from the create's next fire to now ran once.
	for at := created.Add(time.Second); !at.After(last); at = at.Add(time.Second) {
		if got := nodes[at]; len(got) != 1 {
			t.Errorf("fire %v ran on %q; want exactly one node", at.UTC(), got)
		}
	}
	if len(fires) != int(last.Sub(created)/time.Second) {
		t.Errorf("fires %v; want each second from %v to %v, once", fires, created.Add(time.Second).UTC(), last.UTC())
	}
	log.mu.Lock()
	for _, got := range log.args {
		if got != `{"tenant":"acme"}` {
			t.Errorf("a run got the arguments %q, want the schedule's", got)
		}
	}
	log.mu.Unlock()

	deleted := c.Clock.Now()
	res = ndigo(t, map[string]string{"NDIGO_ADMIN": urls[1], "NDIGO_ADMIN_TOKEN": testToken}, "schedule", "delete", name)
	if res.code != 0 {
		t.Fatalf("schedule delete on node B: exit %d: %s", res.code, res.stderr)
	}
	if lists(b.S, name) {
		t.Errorf("node B lists %s after deleting it", name)
	}
	c.Step(t) // A's and C's poll
	if lists(a.S, name) || lists(cc.S, name) {
		t.Errorf("a poll after the delete, node A lists it %v, node C %v; want neither", lists(a.S, name), lists(cc.S, name))
	}
	for range 3 {
		c.Step(t)
	}
	// The fire of the poll's instant may have gone before the poll read
	// the delete; none after it.
	after, afterNodes := log.snapshot()
	for _, at := range after[len(fires):] {
		if at.After(deleted.Add(time.Second)) || len(afterNodes[at]) != 1 {
			t.Errorf("fire %v ran on %q after the delete at %v; want none after the nodes' next poll", at.UTC(), afterNodes[at], deleted.UTC())
		}
	}
	t.Logf("%d fires from %s to %s, by node %v; %d after the delete", len(fires), stamp(&fires[0]), stamp(&fires[len(fires)-1]), byNode(nodes), len(after)-len(fires))
}

// byNode counts the fires each node ran.
func byNode(nodes map[time.Time][]string) map[string]int {
	out := map[string]int{}
	for _, ns := range nodes {
		for _, n := range ns {
			out[n]++
		}
	}
	return out
}
