package redislocks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// The driver's and the store's checks pass while Redis runs, fail with
// ErrRedis naming the address while it is down, and pass again after its
// restart; a server that refuses scripts fails them too.
func TestCheckHealth(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "health"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	s, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "health"})
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]locks.HealthChecker{"driver": d, "store": s}
	check := func(hc locks.HealthChecker) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hc.CheckHealth(ctx)
	}
	for what, hc := range checks {
		if err := check(hc); err != nil {
			t.Errorf("%s with Redis up: %v", what, err)
		}
	}
	srv.Kill()
	for what, hc := range checks {
		if err := check(hc); !errors.Is(err, redislocks.ErrRedis) || !strings.Contains(err.Error(), srv.Addr()) {
			t.Errorf("%s with Redis down: %v; want ErrRedis naming %s", what, err, srv.Addr())
		}
	}
	srv.Restart()
	for what, hc := range checks {
		if err := check(hc); err != nil {
			t.Errorf("%s after Redis restarted: %v", what, err)
		}
	}

	// A PING would pass here; every lock operation would fail.
	acl := srv.Client(&redis.Options{Username: "noscripts", Password: "pw", ContextTimeoutEnabled: true})
	if err := c.Do(context.Background(), "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	d, err = redislocks.New(redislocks.Options{Client: acl, Namespace: "health"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := acl.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING as a user without scripts: %v", err)
	}
	if err := check(d); !errors.Is(err, redislocks.ErrRedis) || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("driver as a user without scripts: %v; want ErrRedis with Redis's NOPERM", err)
	}
}

// With Options.MinReplicas, the driver's check fails while fewer replicas
// answer, as every acquisition would, and passes once one does.
func TestCheckHealthCountsReplicas(t *testing.T) {
	master := redistest.Start(t)
	d, err := redislocks.New(redislocks.Options{Client: master.Client(), Namespace: "health", MinReplicas: 1,
		MinReplicasTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.CheckHealth(ctx); !errors.Is(err, redislocks.ErrNotReplicated) || !errors.Is(err, redislocks.ErrRedis) ||
		!strings.Contains(err.Error(), "0 of the 1 replicas required (Options.MinReplicas)") {
		t.Errorf("without a replica: %v; want ErrNotReplicated and ErrRedis counting 0 of 1", err)
	}
	if _, err := d.Acquire(ctx, "k", time.Second); !errors.Is(err, redislocks.ErrNotReplicated) {
		t.Fatalf("Acquire without a replica: %v; the check must agree with it", err)
	}
	redistest.StartReplica(t, master)
	if err := d.CheckHealth(ctx); err != nil {
		t.Errorf("with a replica: %v", err)
	}
}
