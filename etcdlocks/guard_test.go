package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
)

// Guard writes for the holder, and etcd refuses the writes of a holder
// whose lease expired while it was paused: its clock (a fake one, stopped
// as a paused process's is) still says the lease lasts, but the compare on
// the lock key fails once etcd expired the lease and a successor took the
// key. The successor's own guarded write goes through.
func TestGuardRefusesAStaleHolder(t *testing.T) {
	c := etcdtest.Start(t).Client()
	ctx := context.Background()
	paused := clockwork.NewFakeClock()
	stale, err := etcdlocks.New(etcdlocks.Options{Client: c, Namespace: "guard", Clock: paused})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stale.Close)
	key := fmt.Sprintf("ledger-%d", time.Now().UnixNano())
	row := "ledger/" + key
	l, err := stale.Acquire(ctx, key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdlocks.Guard(ctx, l, clientv3.OpPut(row, "by the holder")); err != nil {
		t.Fatalf("Guard of the holder = %v, want the write", err)
	}
	successor := newDriver(t, c, "guard")
	var next locks.Lease
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) { // until etcd expires the lease
		if next, err = successor.Acquire(ctx, key, time.Minute); err == nil {
			break
		}
		if !errors.Is(err, locks.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("the successor's Acquire = %v, want the lease once the first expired", err)
		}
	}
	if _, err := etcdlocks.Guard(ctx, l, clientv3.OpPut(row, "by the stale holder")); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard of the stale holder = %v, want locks.ErrLeaseLost", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("the stale lease's Done is open after its refused Guard")
	}
	if _, err := etcdlocks.Guard(ctx, next, clientv3.OpPut(row, "by the successor")); err != nil {
		t.Fatalf("Guard of the successor = %v, want the write", err)
	}
	got, err := c.Get(ctx, row)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "by the successor" {
		t.Fatalf("the row = %v, %v; want the successor's write", got, err)
	}
	if _, err := etcdlocks.Guard(ctx, fakeLease{}, clientv3.OpPut(row, "x")); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("Guard of another driver's lease = %v, want locks.ErrInvalid", err)
	}
	_ = next.Release(ctx)
}

// fakeLease is a lease of no etcdlocks driver.
type fakeLease struct{ locks.Lease }
