package schedulingtest_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// StartCluster gives each node its own scheduler, task and recorder; a task
// the second node refuses fails the start naming that node, with the first
// node stopped again.
func TestStartCluster(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	cfg := scheduling.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler)}
	task := func(cron string) func() []scheduling.Task {
		return func() []scheduling.Task {
			return []scheduling.Task{scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Name("t"), scheduling.Cron(cron), scheduling.Lock("t"))}
		}
	}
	c, err := schedulingtest.StartCluster(cfg, []locks.Driver{d, d, d}, task("@every 1s"))
	if err != nil {
		t.Fatal(err)
	}
	if err := schedulingtest.Step(context.Background(), fc, 5*time.Second, time.Second, c.Schedulers...); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, r := range c.Recorders {
		for _, e := range append(r.Started(), r.Skips()...) {
			nodes[e.Node] = true
		}
	}
	if len(c.Runs()) != 5 || c.AtMostOnce() != nil || !nodes["a"] || !nodes["b"] || !nodes["c"] {
		t.Fatalf("3 nodes, 5 fires: runs %v, nodes seen %v, at most once: %v", c.Runs(), nodes, c.AtMostOnce())
	}

	var calls atomic.Int32
	_, err = schedulingtest.StartCluster(cfg, []locks.Driver{d, d}, func() []scheduling.Task {
		if calls.Add(1) == 2 {
			return task("not a cron")()
		}
		return task("@every 1s")()
	})
	if !errors.Is(err, scheduling.ErrInvalidSpec) || !strings.Contains(err.Error(), "node b") {
		t.Fatalf("StartCluster with a bad task on node b: %v", err)
	}
	goleak.VerifyNone(t) // node a, started, was stopped
}
