package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// On two spreading nodes, the console of the node that does not own a
// task shows its last fire as "owned by" the owner, in the neutral
// colour, not as a warning; and a task whose audit cannot judge its fires
// (every second with a 30-minute lease: more pending than
// taskstate.MaxHistory runs) shows the audit's note on its page.
func TestConsoleShowsTheOwnerAndTheAuditNote(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	drv := locks.NewInProcessDriver(locks.WithClock(fc))
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*scheduling.Scheduler{}
	var all []*scheduling.Scheduler
	for _, name := range []string{"node-a", "node-b"} {
		s := scheduling.New(scheduling.Config{Clock: fc, Node: name, State: store, Driver: drv, Spread: true,
			Logger: slog.New(slog.DiscardHandler)})
		if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1m"),
			scheduling.Lock("k"), scheduling.Name("report")),
			scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
				scheduling.Lock("tick"), scheduling.LockTTL(30*time.Minute), scheduling.Name("tick"))); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		nodes[name] = s
		all = append(all, s)
	}
	t.Cleanup(func() {
		if err := schedulingtest.Stop(context.Background(), fc, all...); err != nil {
			t.Error(err)
		}
	})
	if err := schedulingtest.Step(context.Background(), fc, time.Duration(taskstate.MaxHistory+10)*time.Second, time.Second, all...); err != nil {
		t.Fatal(err)
	}
	var other, owner string
	for name, s := range nodes {
		for _, ti := range s.Tasks() {
			if ti.Name == "report" && ti.Last.Outcome == scheduling.OutcomeNotOwner {
				other, owner = name, ti.Owner
			}
		}
	}
	if other == "" || owner == "" || owner == other {
		t.Fatalf("no node left report to its owner (other %q, owner %q)", other, owner)
	}

	h, err := New(Options{Scheduler: nodes[other]})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/#task=tick")
	cell := fmt.Sprintf(`document.querySelector('#tasks tbody tr[data-task="report"]').cells[%d].querySelector("span")`, browsertest.ColLastFire)
	if got := browsertest.Eval[string](page, cell+`.textContent + "|" + `+cell+`.className`); got != "owned by "+owner+"|outcome-owned" {
		t.Errorf("%s's last fire of report: %q, want %q", other, got, "owned by "+owner+"|outcome-owned")
	}
	page.WaitFor("the audit's note", `document.querySelector("#audit-summary .audit-note") !== null`)
	note := browsertest.Eval[string](page, `document.querySelector("#audit-summary .audit-note").textContent`)
	if want := fmt.Sprintf("it needs %d runs", taskstate.MaxHistory+1); !strings.HasPrefix(note, "The audit covers less than it should: ") ||
		!strings.Contains(note, want) {
		t.Errorf("the audit's note %q, want it to say it covers less, and %q", note, want)
	}
}
