package etcdlocks_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// Three schedulers on a real 3-member etcd cluster, each on its own client
// of every member, run two locked tasks every 200ms (runs of up to 150ms,
// task state on etcd too); the leader is killed mid-way, and restarted.
// No fire runs twice, through the failover, and the fires keep running
// after it.
func TestNoFireTwiceThroughALeaderKill(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	var drivers []locks.Driver
	var stores []*etcdlocks.Store
	for range 3 {
		cl := c.Client()
		drivers = append(drivers, newDriver(t, cl, "fires"))
		st, err := etcdlocks.NewStore(etcdlocks.StoreOptions{Client: cl, Namespace: "fires"})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	run := func(ctx context.Context) error {
		select {
		case <-time.After(150 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	tasks := func() []scheduling.Task {
		return []scheduling.Task{
			scheduling.NewTask(run, scheduling.Name("payroll"), scheduling.Cron("@every 200ms"), scheduling.Lock("payroll"), scheduling.LockTTL(5*time.Second)),
			scheduling.NewTask(run, scheduling.Name("reconcile"), scheduling.Cron("@every 200ms"), scheduling.Lock("reconcile"), scheduling.LockTTL(5*time.Second)),
		}
	}
	var nodes []*scheduling.Scheduler
	var recs []*schedulingtest.Recorder
	for i, d := range drivers {
		r := &schedulingtest.Recorder{}
		s := scheduling.New(scheduling.Config{Driver: d, State: stores[i], Node: string(rune('a' + i)), Location: time.UTC,
			Logger: slog.New(slog.DiscardHandler), Listeners: []scheduling.Listener{r}})
		if err := s.Add(tasks()...); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		nodes, recs = append(nodes, s), append(recs, r)
	}
	waitRuns := func(want int, within time.Duration) int {
		deadline := time.Now().Add(within)
		for len(schedulingtest.Runs(recs...)) < want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // polling for progress on the real clock, not a fix for a race
		}
		return len(schedulingtest.Runs(recs...))
	}
	before := waitRuns(10, 20*time.Second)
	leader := c.Leader()
	leader.Kill()
	t.Logf("killed leader %s after %d fires", leader.Name(), before)
	after := waitRuns(before+20, 30*time.Second)
	leader.Restart()
	for _, s := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
		cancel()
	}
	if err := schedulingtest.AtMostOnce(recs...); err != nil {
		t.Fatal(err)
	}
	if after < before+20 {
		t.Fatalf("%d fires ran after the leader's kill, want 20 in 30 s", after-before)
	}
}
