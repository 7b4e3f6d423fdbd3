package redislocks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/faultproxy"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conformanceTTL is the suite's short lease: well above a round trip under
// -race on a busy machine, and well above the default drift margin.
const conformanceTTL = 200 * time.Millisecond

// newDriver returns a driver on c in namespace ns, closed by t.Cleanup.
func newDriver(t *testing.T, c redislocks.Client, ns string) *redislocks.Driver {
	t.Helper()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformanceSingleServer(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(t *testing.T) locks.Driver { return newDriver(t, c, "conformance") },
		TTL:        conformanceTTL,
		NewDrivers: lossyDrivers(c, srv.Addr(), func(t *testing.T, c redislocks.Client) locks.Driver { return newDriver(t, c, "conformance") }),
	})
}

// lossyDrivers returns a factory of two drivers that newDriver makes in
// namespace "conformance" of the server at addr, as two nodes have: A on a
// client with go-redis's default options (MaxRetries 3) that reaches the
// server through a faultproxy, B on direct. A lost reply of A is resent by
// its client.
func lossyDrivers(direct *redis.Client, addr string, newDriver func(*testing.T, redislocks.Client) locks.Driver) func(*testing.T) lockstest.Drivers {
	// Loaded scripts make each call one EVALSHA, so that the loss hits the
	// script's run and not a NOSCRIPT answer.
	for _, sc := range redislocks.Scripts {
		if err := sc.Load(context.Background(), direct).Err(); err != nil {
			panic(err)
		}
	}
	return func(t *testing.T) lockstest.Drivers {
		p, err := faultproxy.New(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return lockstest.Drivers{A: newDriver(t, c), B: newDriver(t, direct), Loss: lockstest.Retried,
			LoseReply: func(n int, then func()) { p.DropReplyThen(nthCall(n), then) },
			Leaks:     func(t *testing.T) error { return lockLeaks(context.Background(), direct, "conformance") }}
	}
}

// nthCall matches the n-th of the commands of a driver's calls from now
// on: those a client sends on a new connection, and subscriptions, are
// not. The proxy asks it of each command in order, under its lock.
func nthCall(n int) faultproxy.Match {
	return func(c faultproxy.Command) bool {
		switch c.Name() {
		case "SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE":
			return false
		}
		if !storeCall(c) {
			return false
		}
		n--
		return n == 0
	}
}

// lockLeaks returns an error naming the keys of namespace ns on c that
// have no expiry: every key of a lock, claim or group expires (see the
// package doc's key layout).
func lockLeaks(ctx context.Context, c *redis.Client, ns string) error {
	var leaked []string
	for _, match := range []string{"ndigo:{" + ns + "}:*", "ndigo:{" + ns + ":*"} {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			ttl, err := c.PTTL(ctx, it.Val()).Result()
			if err != nil {
				return err
			}
			if ttl == -1 {
				leaked = append(leaked, it.Val())
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	if len(leaked) > 0 {
		return fmt.Errorf("%d keys of namespace %q without an expiry: %q", len(leaked), ns, leaked)
	}
	return nil
}

// On a Cluster the LostReply cases skip: a proxy in front of the nodes
// would have to rewrite the addresses of every MOVED and CLUSTER SLOTS
// reply. Its calls are the single server's scripts, each run on its key's
// node (AcquireClaims in two steps, Acquire then Claim, as the two-step
// in-process harness runs them), whose lost replies the single server's
// harness covers.
func TestConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client()
	lockstest.Run(t, lockstest.Harness{
		NewDriver: func(t *testing.T) locks.Driver { return newDriver(t, c, "conformance") },
		TTL:       conformanceTTL,
	})
}

// Every go-redis client kind fits Options.Client.
var (
	_ redislocks.Client = (*redis.Client)(nil)
	_ redislocks.Client = (*redis.ClusterClient)(nil)
	_ redislocks.Client = (*redis.Ring)(nil)
	_ redislocks.Client = redis.UniversalClient(nil)
)

func TestClientIsBorrowed(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "borrow")
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	released, stop := d.Watch("k")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-released
	stop()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("client after the driver closed: %v", err)
	}
	// The closed driver stays usable, and so does the client.
	if _, err := d.Acquire(ctx, "k", time.Minute); err != nil {
		t.Fatalf("Acquire after Close: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, ns := range []string{"", "prod:eu", "a{b}", "a}", "a*", "a?", "a[b]", "a b", "a\\b", "ünïcode", "a\nb",
		strings.Repeat("x", 65)} {
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns})
		if d != nil || !errors.Is(err, redislocks.ErrInvalidNamespace) || !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(Namespace %q) = %v, %v; want ErrInvalidNamespace wrapping locks.ErrInvalid", ns, d, err)
			continue
		}
		if !strings.Contains(err.Error(), "Options.Namespace") || !strings.Contains(err.Error(), fmt.Sprintf("%q", ns)) {
			t.Errorf("error %q does not name the field", err)
		}
	}
	for _, ns := range []string{"prod", "Prod_1", "eu-west.2", strings.Repeat("y", 64)} {
		if _, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns}); err != nil {
			t.Errorf("New(Namespace %q) = %v, want nil", ns, err)
		}
	}
	bad := []redislocks.Options{
		{Namespace: "prod"},
		{Client: c, Namespace: "prod", DriftRatio: -0.1},
		{Client: c, Namespace: "prod", DriftRatio: 0.5},
		{Client: c, Namespace: "prod", MinDrift: -time.Millisecond},
	}
	for _, o := range bad {
		if _, err := redislocks.New(o); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}
