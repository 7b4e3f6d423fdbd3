package redistest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerLifecycle(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil || cfg["save"] != "" {
		t.Fatalf("save = %q, %v; want persistence off", cfg["save"], err)
	}

	s.Restart()
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart = %v, want redis.Nil (data lost without persistence)", err)
	}

	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING to a paused server succeeded")
	}
	s.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}

	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a killed server succeeded")
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart of a killed server: %v", err)
	}
}

func TestServersAreIndependent(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on %s", a.Addr())
	}
	ctx := context.Background()
	if err := a.Client().Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client().Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET on the other server = %v, want redis.Nil", err)
	}
}

func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cc := c.Client()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	var masters, keys atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		n, err := m.DBSize(ctx).Result()
		keys.Add(n)
		return err
	})
	if err != nil || masters.Load() != 3 || keys.Load() != 6 {
		t.Fatalf("ForEachMaster: %d masters holding %d keys, %v; want 3 masters holding 6", masters.Load(), keys.Load(), err)
	}
}

// A write acknowledged by the replica (WAIT) survives the master's death:
// the sentinels promote the replica within the helper's bound, the failover
// client follows it, and the old master rejoins as its replica.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := s.Client()
	ctx := context.Background()
	// A pipeline runs on one connection, so WAIT waits for the SET.
	pipe := c.Pipeline()
	pipe.Set(ctx, "k", "v", 0)
	wait := pipe.Do(ctx, "WAIT", 1, 5000)
	if _, err := pipe.Exec(ctx); err != nil || wait.Val() != int64(1) {
		t.Fatalf("SET and WAIT = %v replicas, %v; want 1", wait.Val(), err)
	}
	if v, err := s.Replica.Client().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the replica after WAIT = %q, %v", v, err)
	}

	s.KillMaster()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || role[0] != "master" {
		t.Fatalf("ROLE through the failover client after the failover = %v, %v; want master", role, err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET after the failover = %q, %v; want the replicated write", v, err)
	}

	// The killed master comes back empty and syncs from the new one.
	s.RejoinMaster()
	if v, err := s.Master.Client().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET on the rejoined old master = %q, %v; want the new master's data", v, err)
	}
}
