package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
		NewDriver: func(t *testing.T) locks.Driver { return newDriver(t, c, "conformance") },
		TTL:       conformanceTTL,
	})
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

// The health check answers while etcd does.
func TestCheckHealth(t *testing.T) {
	d := newDriver(t, etcdtest.Start(t).Client(), "health")
	if err := d.CheckHealth(context.Background()); err != nil {
		t.Fatal(err)
	}
}
