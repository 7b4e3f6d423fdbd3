package pglocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/pglocks"
)

// isolations are the levels a guarded transaction may run at; READ
// UNCOMMITTED is READ COMMITTED in PostgreSQL.
var isolations = []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable}

// snapshotAt begins a transaction at iso and takes its snapshot (the first
// statement of a REPEATABLE READ or SERIALIZABLE transaction does), rolled
// back by t.Cleanup if still open.
func snapshotAt(t *testing.T, p *pgxpool.Pool, iso pgx.TxIsoLevel) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := p.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM ndigo_locks").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return tx
}

// isSerializationFailure fails t unless err is Guard's retryable answer to
// an old snapshot: ErrDatabase wrapping SQLSTATE 40001, not ErrLeaseLost.
func isSerializationFailure(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "40001" || !errors.Is(err, pglocks.ErrDatabase) || errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Guard = %v; want a serialization failure (ErrDatabase wrapping SQLSTATE 40001), not ErrLeaseLost", err)
	}
}

// rowExpiry returns the database's expiry of the lease's row.
func rowExpiry(t *testing.T, p *pgxpool.Pool, ns string, l locks.Lease) time.Time {
	t.Helper()
	var at time.Time
	err := p.QueryRow(context.Background(), "SELECT expires_at FROM ndigo_locks WHERE ns = $1 AND key = $2 AND token = $3",
		ns, l.Key(), int64(l.Token())).Scan(&at)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// databasePasses polls the database's clock until it is past at: a wait
// for the condition, not for a guessed duration.
func databasePasses(t *testing.T, p *pgxpool.Pool, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var past bool
		if err := p.QueryRow(context.Background(), "SELECT clock_timestamp() > $1", at).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database's clock did not pass %v", at)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// guardIn runs Guard in a new transaction at iso and commits it if Guard
// passed.
func guardIn(t *testing.T, p *pgxpool.Pool, iso pgx.TxIsoLevel, l locks.Lease) error {
	t.Helper()
	ctx := context.Background()
	tx, err := p.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := pglocks.Guard(ctx, tx, l); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TestGuardAfterRenewalInEveryIsolation: a renewing holder whose guarded
// transaction took its snapshot before an Extend, and guards after the
// expiry that snapshot shows: in READ COMMITTED Guard passes (it reads the
// latest row); in REPEATABLE READ and SERIALIZABLE it returns a
// serialization failure, never ErrLeaseLost, leaves Done open, and passes
// in the retried transaction; the lease then releases the key in the
// database. Before the fix Guard judged the snapshot's expired row: the
// live lease was called lost.
func TestGuardAfterRenewalInEveryIsolation(t *testing.T) {
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			p := pool(t)
			ctx := context.Background()
			ns := unique("renewed")
			// Its local deadline never passes: only the database judges.
			d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Clock: clockwork.NewFakeClock()})
			if err != nil {
				t.Fatal(err)
			}
			// The lease must outlive the steps up to its Extend on a loaded
			// machine: immediate, not guardTTL.
			l, err := d.Acquire(ctx, "k", immediate)
			if err != nil {
				t.Fatal(err)
			}
			before := rowExpiry(t, p, ns, l)
			tx := snapshotAt(t, p, iso)
			if err := l.Extend(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			databasePasses(t, p, before)
			err = pglocks.Guard(ctx, tx, l)
			if iso == pgx.ReadCommitted {
				if err != nil {
					t.Fatalf("Guard after the renewal = %v, want nil", err)
				}
			} else {
				isSerializationFailure(t, err)
				if err := guardIn(t, p, iso, l); err != nil {
					t.Fatalf("Guard in the retried transaction = %v, want nil", err)
				}
			}
			if !lockstest.IsOpen(l.Done()) {
				t.Fatal("the renewed lease's Done closed")
			}
			_ = tx.Rollback(ctx)
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			next, err := d.Acquire(ctx, "k", time.Minute)
			if err != nil {
				t.Fatalf("Acquire after the release: %v (the release did not reach the database)", err)
			}
			_ = next.Release(ctx)
		})
	}
}

// TestGuardOldSnapshotOfAStaleLease: a holder whose Release took effect
// with its reply lost (so its handle still holds), then, in one case, a
// successor that acquired, and a guarded transaction whose snapshot
// predates both, in which the row still shows the holder's live lease:
// Guard must not pass. In READ COMMITTED it returns ErrLeaseLost; in
// REPEATABLE READ and SERIALIZABLE a serialization failure, then
// ErrLeaseLost in the retried transaction. FOR KEY SHARE alone does not
// see the change (a Release updates no key column): before the fix Guard
// passed on the snapshot's row of the released lease. The superseded case
// held before too, because a successor's Acquire locks the row FOR UPDATE,
// which FOR KEY SHARE does conflict with; it is here so that it stays so.
func TestGuardOldSnapshotOfAStaleLease(t *testing.T) {
	for _, superseded := range []bool{false, true} {
		for _, iso := range isolations {
			name := "released/" + string(iso)
			if superseded {
				name = "superseded/" + string(iso)
			}
			t.Run(name, func(t *testing.T) {
				p := pool(t)
				ctx := context.Background()
				ns := unique("stale_snapshot")
				d := newDriver(t, p, ns)
				l, err := d.Acquire(ctx, "k", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				tx := snapshotAt(t, p, iso)
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				pglocks.ForgetRelease(l)
				var next locks.Lease
				if superseded {
					if next, err = d.Acquire(ctx, "k", time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				err = pglocks.Guard(ctx, tx, l)
				if iso != pgx.ReadCommitted {
					isSerializationFailure(t, err)
					err = guardIn(t, p, iso, l)
				}
				if !errors.Is(err, locks.ErrLeaseLost) {
					t.Fatalf("Guard of the stale lease = %v, want ErrLeaseLost", err)
				}
				if superseded {
					if err := guardIn(t, p, iso, next); err != nil {
						t.Fatalf("the successor's Guard = %v, want nil", err)
					}
					_ = next.Release(ctx)
				}
			})
		}
	}
}

// TestGuardDuringAnUncommittedChange: a change of the lease's row that has
// not committed yet (an Extend in flight, here an update held open in
// another transaction) makes Guard neither wait nor judge: in READ
// COMMITTED it passes at once on the committed row (FOR KEY SHARE does not
// conflict with the update); in REPEATABLE READ and SERIALIZABLE it returns
// a serialization failure at once (the row's latest version is not known
// yet), and passes in a transaction retried once the change committed.
func TestGuardDuringAnUncommittedChange(t *testing.T) {
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			p := pool(t)
			ctx := context.Background()
			ns := unique("in_flight")
			d := newDriver(t, p, ns)
			l, err := d.Acquire(ctx, "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tx := snapshotAt(t, p, iso)
			change, err := p.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = change.Rollback(ctx) }()
			if _, err := change.Exec(ctx, "UPDATE ndigo_locks SET expires_at = expires_at + interval '1 second' WHERE ns = $1 AND key = 'k'", ns); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, immediate)
			err = pglocks.Guard(short, tx, l)
			cancel()
			if iso == pgx.ReadCommitted {
				if err != nil {
					t.Fatalf("Guard during an uncommitted change = %v, want nil at once", err)
				}
			} else {
				isSerializationFailure(t, err)
			}
			_ = tx.Rollback(ctx)
			if err := change.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := guardIn(t, p, iso, l); err != nil {
				t.Fatalf("Guard once the change committed = %v, want nil", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
