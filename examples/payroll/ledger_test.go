package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// staleHolderWriteIsRejected plays a holder that pauses past its lease:
// meanwhile a successor takes the lock and writes; the holder then resumes
// and writes with its old token. The ledger must keep the successor's entry
// and reject the stale one.
func staleHolderWriteIsRejected(t *testing.T, d locks.Driver, l ledger, expire func(time.Duration)) {
	t.Helper()
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	stale, err := d.Acquire(ctx, "payroll-window", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, stale.Token(), "before the pause"); err != nil {
		t.Fatalf("holder's first write: %v", err)
	}
	expire(ttl + ttl/2) // the holder is paused past its lease
	successor, err := d.Acquire(ctx, "payroll-window", time.Minute)
	if err != nil {
		t.Fatalf("successor: %v", err)
	}
	if err := l.Append(ctx, successor.Token(), "successor"); err != nil {
		t.Fatalf("successor's write: %v", err)
	}
	// The holder resumes, unaware, and writes.
	if err := l.Append(ctx, stale.Token(), "stale"); !errors.Is(err, errStaleToken) {
		t.Fatalf("stale write = %v, want errStaleToken", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryLedgerRejectsStaleHolder(t *testing.T) {
	fc := clockwork.NewFakeClock()
	m := &memoryLedger{}
	staleHolderWriteIsRejected(t, locks.NewInProcessDriver(locks.WithClock(fc)), m, fc.Advance)
	if want := []string{"before the pause", "successor"}; !slices.Equal(m.entries, want) {
		t.Fatalf("ledger %q, want %q", m.entries, want)
	}
}

func TestRedisLedgerRejectsStaleHolder(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "ledger-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l := newRedisLedger(c, "ledger-test")
	// Redis expires the lease in real time: the pause is a real wait.
	staleHolderWriteIsRejected(t, d, l, time.Sleep)
	got, err := l.entries(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"before the pause", "successor"}; !slices.Equal(got, want) {
		t.Fatalf("ledger %q, want %q", got, want)
	}
}
