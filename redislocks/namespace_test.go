package redislocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

// Two namespaces on one Redis hold the same key independently, and neither
// sees the other's release notifications.
func TestNamespacesAreIsolated(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	staging, prod := newDriver(t, c, "staging"), newDriver(t, c, "prod")

	ls, err := staging.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := prod.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatalf("prod Acquire of a key staging holds: %v", err)
	}
	if _, err := prod.Acquire(ctx, "payroll", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("second prod Acquire = %v, want ErrNotAcquired", err)
	}

	// Staging's failed attempt marks its lease as waited for, so its
	// release is published (on staging's channel).
	if _, err := staging.Acquire(ctx, "payroll", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("second staging Acquire = %v, want ErrNotAcquired", err)
	}
	published := c.PSubscribe(ctx, "ndigo:*")
	defer published.Close()
	if _, err := published.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	prodReleased, stop := prod.Watch("payroll")
	defer stop()
	probeLease, err := prod.Acquire(ctx, "probe", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	probe, stopProbe := prod.Watch("probe")
	defer stopProbe()

	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Redis delivers one subscription's messages in publish order, so once
	// the later probe release has arrived, a staging notification that
	// leaked into prod would have arrived too.
	if err := probeLease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, probe, "prod probe watch")
	if msg, err := published.ReceiveMessage(ctx); err != nil || msg.Channel != "ndigo:staging:released:payroll" {
		t.Fatalf("first release published = %v, %v; want it on ndigo:staging:released:payroll", msg, err)
	}
	if !lockstest.IsOpen(prodReleased) {
		t.Fatal("a staging release woke a prod waiter")
	}
	if _, err := prod.Acquire(ctx, "payroll", time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("prod Acquire after staging released = %v, want ErrNotAcquired (prod still holds it)", err)
	}
	if err := lp.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, prodReleased, "prod watch after the prod release")
}
