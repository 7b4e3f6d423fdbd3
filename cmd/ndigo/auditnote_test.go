package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// An audit that cannot judge a task's fires (every second with a
// 30-minute lease: more instants pending than taskstate.MaxHistory runs)
// says so where an operator looks: the API's note, and a warning of ndigo
// audit on stderr, its range not reversed.
func TestAuditNoteInTheCLI(t *testing.T) {
	n := fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a"})
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"), scheduling.Lock("tick"),
		scheduling.LockTTL(30*time.Minute), scheduling.Name("tick")))
	env := map[string]string{"NDIGO_ADMIN": serveAdmin(t, n.S)}
	n.StepTo(t, time.Duration(taskstate.MaxHistory+10)*time.Second)

	res := ndigo(t, env, "--json", "audit", "tick")
	var a audit
	if err := json.Unmarshal([]byte(res.stdout), &a); err != nil {
		t.Fatalf("ndigo --json audit: %v: %s", err, res.stdout)
	}
	if !strings.Contains(a.Note, "it needs 1001 runs") || a.From == nil || a.To.Before(*a.From) {
		t.Errorf("the audit's JSON: note %q, from %v to %v; want a note naming the 1001 runs it needs, the range not reversed", a.Note, a.From, a.To)
	}
	res = ndigo(t, env, "audit", "tick")
	if want := `ndigo: warning: the audit of "tick" covers less than it should: ` + a.Note; res.code != 0 || !strings.Contains(res.stderr, want) {
		t.Errorf("ndigo audit: exit %d, stderr %q; want exit 0 and %q", res.code, res.stderr, want)
	}
}
