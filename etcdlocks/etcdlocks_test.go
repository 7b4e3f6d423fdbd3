package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

// conformanceTTL is the suite's short lease: a whole number of seconds, as
// etcd counts them, so that the key frees within the suite's wait past it
// (1.5 TTL) even though the leader checks for expired leases every 500ms.
const conformanceTTL = 2 * time.Second

// newDriver returns a driver on c in namespace ns, closed by t.Cleanup.
func newDriver(t *testing.T, c *clientv3.Client, ns string) *etcdlocks.Driver {
	t.Helper()
	d, err := etcdlocks.New(etcdlocks.Options{Client: c, Namespace: ns})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func TestConformance(t *testing.T) {
	c := etcdtest.Start(t).Client()
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(t *testing.T) locks.Driver { return newDriver(t, c, "conformance") },
		TTL:        conformanceTTL,
		NewDrivers: lossyDrivers(c),
	})
}

// lossyDrivers returns a factory of two drivers in a new namespace of the
// shared member, as two nodes have: A on a client whose mutating calls
// lose the replies the suite asks (a replyLoser), B on c. clientv3 does
// not resend a write whose reply was lost: A's call fails.
func lossyDrivers(c *clientv3.Client) func(*testing.T) lockstest.Drivers {
	return func(t *testing.T) lockstest.Drivers {
		ns := storeNamespace()
		l := &replyLoser{}
		before, err := leaseIDs(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		a, b := newDriver(t, storeClientWith(t, l.intercept, grpc.WithChainStreamInterceptor(l.interceptStream)), ns), newDriver(t, c, ns)
		return lockstest.Drivers{A: a, B: b, Loss: lockstest.Failed,
			LoseReply: func(n int, then func()) { l.armAfter(n-1, then) },
			Leaks: func(t *testing.T) error {
				return keylessLeases(context.Background(), c, before, append(etcdlocks.ClaimLeases(a), etcdlocks.ClaimLeases(b)...))
			}}
	}
}

// keylessLeases returns an error naming the leases granted since before
// that hold no key, but for claims, the drivers' claim leases (see the
// package doc: one per driver and claim TTL, which another driver's claims
// may have emptied): each other lease of a driver holds a lock key or a
// member while it lives (no other test runs beside the conformance
// suite's).
func keylessLeases(ctx context.Context, c *clientv3.Client, before map[clientv3.LeaseID]bool, claims []clientv3.LeaseID) error {
	now, err := leaseIDs(ctx, c)
	if err != nil {
		return err
	}
	var keyless []string
	for id := range now {
		if before[id] || slices.Contains(claims, id) {
			continue
		}
		ttl, err := c.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
		if err != nil {
			return err
		}
		if ttl.TTL > 0 && len(ttl.Keys) == 0 {
			keyless = append(keyless, fmt.Sprintf("%x (TTL %d s left)", int64(id), ttl.TTL))
		}
	}
	if len(keyless) > 0 {
		return fmt.Errorf("%d leases hold no key: %s", len(keyless), strings.Join(keyless, ", "))
	}
	return nil
}

// Bad options name the field, the value and the rule.
func TestNewRefusesBadOptions(t *testing.T) {
	c := etcdtest.Start(t).Client()
	for _, o := range []struct {
		opts etcdlocks.Options
		want string
	}{
		{etcdlocks.Options{Namespace: "ns"}, "Options.Client"},
		{etcdlocks.Options{Client: c}, `Options.Namespace "" must not be empty`},
		{etcdlocks.Options{Client: c, Namespace: "a/b"}, `has '/' at byte 1`},
		{etcdlocks.Options{Client: c, Namespace: "ns", DriftRatio: 0.5}, "DriftRatio 0.5"},
		{etcdlocks.Options{Client: c, Namespace: "ns", MinDrift: -1}, "MinDrift -1ns"},
	} {
		if _, err := etcdlocks.New(o.opts); !errors.Is(err, locks.ErrInvalid) || !strings.Contains(err.Error(), o.want) {
			t.Errorf("New(%+v) = %v, want locks.ErrInvalid naming %q", o.opts, err, o.want)
		}
	}
}

// Namespaces are isolated: a key held in one is free in another.
func TestNamespacesAreIsolated(t *testing.T) {
	c := etcdtest.Start(t).Client()
	a, b := newDriver(t, c, "tenant-a"), newDriver(t, c, "tenant-b")
	ctx := context.Background()
	key := fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
	la, err := a.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Acquire in another namespace of a key held in one = %v, want the lease", err)
	}
	for _, l := range []locks.Lease{la, lb} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The driver's and the store's health checks, which /healthz runs
// (admin.BackendChecks), pass while etcd answers, fail naming the
// endpoints and what they check while it is down, and pass again once it
// is back.
func TestCheckHealthAcrossADownMember(t *testing.T) {
	c := etcdtest.StartCluster(t, 1)
	client := c.Client()
	checks := admin.BackendChecks(newDriver(t, client, "health"), newStore(t, client, "health", 0))
	if len(checks) != 2 {
		t.Fatalf("BackendChecks = %d checks, want the locks and the task state", len(checks))
	}
	run := func(want string) {
		t.Helper()
		for _, ch := range checks {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := ch.Check(ctx)
			cancel()
			switch {
			case want == "" && err != nil:
				t.Errorf("%s check with etcd up: %v", ch.Name, err)
			case want != "" && (!errors.Is(err, etcdlocks.ErrEtcd) || !strings.Contains(err.Error(), want) ||
				!strings.Contains(err.Error(), c.Endpoints()[0])):
				t.Errorf("%s check with etcd down: %v; want ErrEtcd naming %q and the endpoint", ch.Name, err, want)
			}
		}
	}
	run("")
	m := c.Members()[0]
	m.Kill()
	run("health check of")
	m.Restart()
	c.Leader()
	run("")
}
