package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
)

// staleHolderWriteIsRejected plays a holder that pauses past its lease:
// meanwhile a successor takes the lock and writes; the holder then resumes
// and writes with its old lease. The ledger must keep the successor's entry
// and reject the stale one.
func staleHolderWriteIsRejected(t *testing.T, d locks.Driver, l ledger, expire func(time.Duration)) {
	t.Helper()
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	fire := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	stale, err := d.Acquire(ctx, "payroll-window", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, stale, fire, "holder"); err != nil {
		t.Fatalf("holder's first write: %v", err)
	}
	expire(ttl + ttl/2) // the holder is paused past its lease
	successor, err := d.Acquire(ctx, "payroll-window", time.Minute)
	if err != nil {
		t.Fatalf("successor: %v", err)
	}
	if err := l.Append(ctx, successor, fire.Add(time.Second), "successor"); err != nil {
		t.Fatalf("successor's write: %v", err)
	}
	// The holder resumes, unaware, and writes.
	if err := l.Append(ctx, stale, fire.Add(2*time.Second), "holder"); !errors.Is(err, errStaleToken) {
		t.Fatalf("stale write = %v, want errStaleToken", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{Fire: fire, Node: "holder", Token: stale.Token()},
		{Fire: fire.Add(time.Second), Node: "successor", Token: successor.Token()},
	}
	if !slices.EqualFunc(got, want, func(a, b entry) bool { return a.String() == b.String() }) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
}

func TestMemoryLedgerRejectsStaleHolder(t *testing.T) {
	fc := clockwork.NewFakeClock()
	staleHolderWriteIsRejected(t, locks.NewInProcessDriver(locks.WithClock(fc)), &memoryLedger{}, fc.Advance)
}

func TestRedisLedgerRejectsStaleHolder(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "ledger-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Redis expires the lease in real time: the pause is a real wait.
	staleHolderWriteIsRejected(t, d, newRedisLedger(c, "ledger-test"), time.Sleep)
}

// On PostgreSQL the stale write is refused by pglocks.Guard inside the
// write's transaction; the ledger's table is made as a node makes it, twice
// to show that a restarted node finds it in place.
func TestPostgresLedgerRejectsStaleHolder(t *testing.T) {
	pool := pgtest.Start(t).Pool()
	ctx := context.Background()
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "ledger-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	l := newPGLedger(pool, "ledger-test")
	for range 2 {
		if err := l.createTable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The database expires the lease in real time: the pause is a real wait.
	staleHolderWriteIsRejected(t, d, l, time.Sleep)
	// Rows of another namespace are another environment's.
	if got, err := newPGLedger(pool, "other").Entries(ctx); err != nil || len(got) != 0 {
		t.Fatalf("namespace other: %v, %v; want no entries", got, err)
	}
}
