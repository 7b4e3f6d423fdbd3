package redislocks_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// startNodes starts one scheduler per node, each on its own client and
// driver of srv's namespace ns, with a Recorder, running task.
func startNodes(t *testing.T, srv *redistest.Server, ns string, nodes int, task func() scheduling.Task) ([]*schedulingtest.Recorder, func()) {
	t.Helper()
	var drivers []locks.Driver
	for range nodes {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis defaults, retries included
		t.Cleanup(func() { _ = c.Close() })
		drivers = append(drivers, newDriver(t, c, ns))
	}
	cl, err := schedulingtest.StartCluster(scheduling.Config{Logger: slog.New(slog.DiscardHandler), Location: time.UTC},
		drivers, func() []scheduling.Task { return []scheduling.Task{task()} })
	if err != nil {
		t.Fatal(err)
	}
	return cl.Recorders, func() {
		if err := cl.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// Two nodes on Redis, every 400ms, runs of 700ms, a 3s lock wait: the node
// that waits gets the lock after the winner's run, and finds the fire
// claimed instead of running it again.
func TestWaitersDoNotRerunAFireOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	recs, stop := startNodes(t, srv, "rerun", 2, func() scheduling.Task {
		return scheduling.NewTask(func(ctx context.Context) error {
			select {
			case <-time.After(700 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}, scheduling.Name("job"), scheduling.Cron("@every 400ms"), scheduling.Lock("job"),
			scheduling.LockWait(3*time.Second), scheduling.LockTTL(10*time.Second))
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(schedulingtest.Runs(recs...)) < 6 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling for progress on the real clock, not a fix for a race
	}
	stop()
	if err := schedulingtest.AtMostOnce(recs...); err != nil {
		t.Fatal(err)
	}
	if n := len(schedulingtest.Runs(recs...)); n < 6 {
		t.Fatalf("%d fires ran in 20s, want 6", n)
	}
}

// A lock TTL at or below the Redis driver's drift margin would give leases
// that are over before their task starts: the scheduler refuses it.
func TestSchedulerRefusesTTLAtDriftMargin(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	d := newDriver(t, c, "ttl")
	s := scheduling.New(scheduling.Config{Driver: d, Logger: slog.New(slog.DiscardHandler)})
	err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
		scheduling.Lock("k"), scheduling.LockTTL(2*time.Millisecond)))
	if !errors.Is(err, scheduling.ErrInvalidSpec) || !strings.Contains(err.Error(), "minimum lease TTL ("+d.MinTTL().String()+")") {
		t.Fatalf("Add with lockTtl 2ms: %v", err)
	}
}

// A task that fires every 100ms on two nodes leaves one claim record and
// one token counter in Redis, however many fires: claims never pile up.
func TestClaimsKeepOneKeyPerTaskOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	recs, stop := startNodes(t, srv, "claims", 2, func() scheduling.Task {
		return scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Name("tick"),
			scheduling.Cron("@every 100ms"), scheduling.Lock("tick"), scheduling.LockTTL(5*time.Second))
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(schedulingtest.Runs(recs...)) < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := schedulingtest.AtMostOnce(recs...); err != nil {
		t.Fatal(err)
	}
	c := srv.Client()
	keys, err := c.Keys(context.Background(), "ndigo:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var claims int
	for _, k := range keys {
		if strings.HasSuffix(k, ":claim") {
			claims++
		}
	}
	if n := len(schedulingtest.Runs(recs...)); n < 20 || claims != 1 || len(keys) > 3 {
		t.Fatalf("after %d fires: keys %q, want one claim record, the token counter and at most a tombstone", n, keys)
	}
}
