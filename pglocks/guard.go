package pglocks

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ndigo/ndigo/locks"
)

// Guard checks, inside tx, that lease is still the current holder of its
// key, and keeps it so until tx ends: it locks the key's row FOR KEY SHARE
// in tx, so that no successor acquires the key while tx is open (their
// Acquire still never blocks: it answers locks.ErrNotAcquired), even once
// the lease's TTL has run out. The holder's own Extend and Release still go
// through while tx is open. Call it before the writes it guards, and keep
// the transaction short. tx must not be READ ONLY (a row lock is a write).
//
// A stale holder (its lease expired in the database, was released, was
// superseded, or is past its local deadline) gets an error wrapping
// locks.ErrLeaseLost, and its Done closes: roll tx back. A lease not made by
// this package's Driver gets locks.ErrInvalid. A failing statement gets
// ErrDatabase, and leaves tx aborted as any failed statement does.
//
// # Isolation levels
//
// In READ COMMITTED (PostgreSQL's default) Guard judges the latest version
// of the row. In REPEATABLE READ and SERIALIZABLE every statement of tx
// reads tx's snapshot, which may be older than the lease's last Extend (or
// its Release, or a successor's Acquire): Guard never judges the lease from
// such a version. It checks that the snapshot's version of the row is the
// latest and judges it if it is; if not (the row changed, or is being
// changed, after the snapshot was taken) it returns a serialization failure,
// an error wrapping ErrDatabase and a *pgconn.PgError with Code "40001",
// that errors.As finds: tx is aborted, and the caller retries the whole
// transaction, as it does for any serialization failure, with a new
// snapshot that sees the row as it is. Such an error never says the lease
// is lost, and leaves Done open. Guard as the first statement of a
// transaction takes its snapshot and cannot be older than the row.
//
// tx must be on a connection to the database the lease's driver uses.
func Guard(ctx context.Context, tx pgx.Tx, lease locks.Lease) error {
	if ctx == nil || tx == nil {
		return fmt.Errorf("%w: pglocks.Guard: ctx and tx must not be nil", locks.ErrInvalid)
	}
	l, ok := lease.(*handle)
	if !ok || l == nil {
		return fmt.Errorf("%w: pglocks.Guard: %T is not a lease of a pglocks.Driver", locks.ErrInvalid, lease)
	}
	d := l.d
	if err := l.Live(d.clock.Now()); err != nil {
		return err
	}
	var row bool
	err := tx.QueryRow(ctx, d.sql.guard, pgx.QueryExecModeExec, d.ns, l.Key(), int64(l.Token())).Scan(&row)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == serializationFailure {
		return fmt.Errorf("%w: guard key %q token %d: tx's snapshot predates a change of the lock row; retry the transaction: %w",
			ErrDatabase, l.Key(), l.Token(), err)
	}
	current, err := held(ctx, err, "guard", l)
	if err != nil {
		return err
	}
	if !current {
		return l.Lose()
	}
	return nil
}

// serializationFailure is PostgreSQL's SQLSTATE for a transaction that must
// be retried: Guard's answer to a snapshot older than the lock row.
const serializationFailure = "40001"
