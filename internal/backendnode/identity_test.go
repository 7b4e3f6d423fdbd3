package backendnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// On every lock store: a stored schedule whose lock flips between two keys
// at every update, each update made through one node while the other has
// not polled yet, runs every fire exactly once, each with the spec in
// force at its instant (its arguments say which), and the audit finds no
// miss. Before a fire was claimed under its task's name alone and an
// update came in force at an instant stored with it, the node that made
// the change claimed the next fire under the new lock and the other under
// the old, and both ran it.
func TestSpecChangesRunEachFireOnce(t *testing.T) {
	for name, start := range backendnode.Backends {
		t.Run(name, func(t *testing.T) {
			epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			c := start(t, "identity", epoch, 2)
			var mu sync.Mutex
			runs := map[time.Time][]string{} // fire → the args of each run
			for _, n := range c.Nodes {
				if err := n.S.Handle("report", func(ctx context.Context, args json.RawMessage) error {
					r, _ := scheduling.RunFromContext(ctx)
					mu.Lock()
					runs[r.Fire] = append(runs[r.Fire], string(args))
					mu.Unlock()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			sc := taskstate.Schedule{Name: "report-acme", Handler: "report", Cron: "@every 1s", Lock: "report:a",
				Options: map[string]string{"lockTtl": "5s"}, Args: json.RawMessage(`0`)}
			if err := c.Nodes[0].S.CreateSchedule(ctx, sc); err != nil {
				t.Fatal(err)
			}
			created := c.Clock.Now()
			type change struct {
				from time.Time
				args string
			}
			changes := []change{{created, "0"}}
			for i := 1; i <= 6; i++ {
				c.Step(t)
				c.Step(t)
				c.Step(t)
				sc.Lock = map[bool]string{true: "report:a", false: "report:b"}[i%2 == 0]
				sc.Args = json.RawMessage(fmt.Sprint(i))
				if err := c.Nodes[i%2].S.UpdateSchedule(ctx, sc); err != nil {
					t.Fatal(err)
				}
				got, err := c.Nodes[i%2].S.Schedules(ctx)
				if err != nil || len(got) != 1 {
					t.Fatal(got, err)
				}
				changes = append(changes, change{got[0].From, fmt.Sprint(i)})
			}
			for range 5 {
				c.Step(t)
			}
			end := c.Clock.Now()
			mu.Lock()
			defer mu.Unlock()
			for f := created.Truncate(time.Second).Add(time.Second); !f.After(end); f = f.Add(time.Second) {
				want := ""
				for _, ch := range changes {
					if !f.Before(ch.from) {
						want = ch.args
					}
				}
				if got := runs[f]; len(got) != 1 || got[0] != want {
					t.Errorf("fire %v ran with args %q, want once with %q (the spec in force then)", f.Sub(epoch), got, want)
				}
			}
			a, err := c.Nodes[1].S.Audit(ctx, sc.Name)
			if err != nil {
				t.Fatal(err)
			}
			if a.Missed != 0 || a.Failed != 0 || a.Ran == 0 {
				t.Errorf("audit: ran %d, missed %d, failed %d; want no miss, no failure", a.Ran, a.Missed, a.Failed)
			}
		})
	}
}
