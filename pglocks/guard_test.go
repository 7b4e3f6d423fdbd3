package pglocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
)

// guardTTL is a lease the guard tests let expire in the database.
const guardTTL = 200 * time.Millisecond

// immediate bounds an Acquire that must not wait on a row lock: far below
// what a wait for the guarded transaction would take (it never ends on its
// own), far above a round trip under -race.
const immediate = 2 * time.Second

// expired polls the database until the lease's row has expired on its
// clock. It waits for the condition itself, not for a guessed duration.
func expired(t *testing.T, p *pgxpool.Pool, ns string, l locks.Lease) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var past bool
		err := p.QueryRow(context.Background(),
			"SELECT expires_at <= clock_timestamp() FROM ndigo_locks WHERE ns = $1 AND key = $2 AND token = $3",
			ns, l.Key(), int64(l.Token())).Scan(&past)
		if err != nil {
			t.Fatalf("reading the lease's row: %v", err)
		}
		if past {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease did not expire in the database")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acquireSoon acquires key, retrying while it is held, for at most 10s.
func acquireSoon(t *testing.T, d locks.Driver, key string) locks.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := d.Acquire(context.Background(), key, time.Minute)
		if err == nil {
			return l
		}
		if !errors.Is(err, locks.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// notAcquired checks that Acquire answers ErrNotAcquired without waiting.
func notAcquired(t *testing.T, d locks.Driver, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), immediate)
	defer cancel()
	start := time.Now()
	l, err := d.Acquire(ctx, key, time.Minute)
	if !errors.Is(err, locks.ErrNotAcquired) {
		if l != nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("Acquire(%q) = %v after %v, want ErrNotAcquired at once", key, err, time.Since(start))
	}
}

// TestGuardRefusesStaleHolder: a holder that stalled past its TTL while a
// successor acquired gets ErrLeaseLost from Guard in its transaction, and
// its Done closes; the successor's Guard passes.
func TestGuardRefusesStaleHolder(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	holder, successor := newDriver(t, p, "guard"), newDriver(t, p, "guard")
	key := unique("stale")
	stale, err := holder.Acquire(ctx, key, guardTTL)
	if err != nil {
		t.Fatal(err)
	}
	// The holder stalls (a GC pause, a stopped VM); the successor gets the
	// key once the lease expired in the database.
	next := acquireSoon(t, successor, key)
	if next.Token() <= stale.Token() {
		t.Fatalf("successor's token %d not above %d", next.Token(), stale.Token())
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, stale); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard of the stale holder = %v, want ErrLeaseLost", err)
	}
	lockstest.Closes(t, stale.Done(), "after Guard found the lease lost")
	_ = tx.Rollback(ctx)

	tx2, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pglocks.Guard(ctx, tx2, next); err != nil {
		t.Fatalf("Guard of the current holder: %v", err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A released lease is stale too, without asking the database.
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tx3, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx3.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx3, next); !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard of a released lease = %v, want ErrLeaseLost", err)
	}
}

// TestGuardKeepsSuccessorOut: while the holder's guarded transaction is
// open, a successor's Acquire answers ErrNotAcquired at once, even after
// the lease expired in the database; the holder can still extend; once the
// transaction ends, the successor acquires.
func TestGuardKeepsSuccessorOut(t *testing.T) {
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			p := pool(t)
			ctx := context.Background()
			holder, successor := newDriver(t, p, "guard"), newDriver(t, p, "guard")
			key := unique("out")
			// A lease long enough to be extended under any load; the Extend
			// below shortens it to guardTTL, which then runs out.
			l, err := holder.Acquire(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := pglocks.Guard(ctx, tx, l); err != nil {
				t.Fatalf("Guard: %v", err)
			}
			if _, err := tx.Exec(ctx, "CREATE TEMP TABLE written (v int)"); err != nil {
				t.Fatal(err)
			}
			notAcquired(t, successor, key)
			// The holder's own Extend does not wait on its guard (it sets
			// the lease's TTL to guardTTL from now).
			short, cancel := context.WithTimeout(ctx, immediate)
			err = l.Extend(short, guardTTL)
			cancel()
			if err != nil {
				t.Fatalf("Extend while guarded: %v", err)
			}
			// Past the lease's TTL, the key is still kept while tx is open.
			expired(t, p, "guard", l)
			notAcquired(t, successor, key)
			notAcquired(t, successor, key)
			if end == "commit" {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			next, err := successor.Acquire(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("Acquire once the guarded tx ended: %v", err)
			}
			if next.Token() <= l.Token() {
				t.Fatalf("successor's token %d not above %d", next.Token(), l.Token())
			}
			if err := l.Release(ctx); !errors.Is(err, locks.ErrLeaseLost) {
				t.Fatalf("Release of the superseded lease = %v, want ErrLeaseLost", err)
			}
			_ = next.Release(ctx)
		})
	}
}

// TestGuardReleaseWhileGuarded: the holder may release while its guarded
// transaction is open; the key then stays kept from successors until the
// transaction ends.
func TestGuardReleaseWhileGuarded(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	d := newDriver(t, p, "guard")
	key := unique("release")
	l, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, l); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, immediate)
	defer cancel()
	if err := l.Release(short); err != nil {
		t.Fatalf("Release while guarded: %v", err)
	}
	notAcquired(t, d, key)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the tx: %v", err)
	}
	_ = next.Release(ctx)
}

// TestGuardBadInput: a lease of another driver, or nil arguments, are
// ErrInvalid.
func TestGuardBadInput(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	foreign, err := locks.NewInProcessDriver().Acquire(ctx, unique("k"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, foreign); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Guard(in-process lease) = %v, want ErrInvalid", err)
	}
	if err := pglocks.Guard(ctx, tx, nil); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Guard(nil lease) = %v, want ErrInvalid", err)
	}
	var noTx pgx.Tx
	if err := pglocks.Guard(ctx, noTx, foreign); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Guard(nil tx) = %v, want ErrInvalid", err)
	}
}
