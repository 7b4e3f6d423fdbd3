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
