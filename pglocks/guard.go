package pglocks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/locks"
)

// Guard checks, inside tx, that lease is still the current holder of its
// key, and keeps it so until tx ends: it locks the key's row FOR KEY SHARE
// in tx, so that no successor acquires the key while tx is open (their
// Acquire still never blocks: it answers locks.ErrNotAcquired), even once
// the lease's TTL has run out. The holder's own Extend and Release still go
// through while tx is open. Call it before the writes it guards, and keep
// the transaction short.
//
// A stale holder (its lease expired in the database, was released, was
// superseded, or is past its local deadline) gets an error wrapping
// locks.ErrLeaseLost, and its Done closes: roll tx back. A lease not made by
// this package's Driver gets locks.ErrInvalid. A failing statement gets
// ErrDatabase, and leaves tx aborted as any failed statement does; in a
// REPEATABLE READ or SERIALIZABLE transaction that is also what a
// concurrent change of the row since tx's snapshot gives (a serialization
// failure, SQLSTATE 40001: retry the transaction).
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
	current, err := held(tx.QueryRow(ctx, d.sql.guard, pgx.QueryExecModeExec, d.ns, l.Key(), int64(l.Token())).Scan(&row), "guard", l)
	if err != nil {
		return err
	}
	if !current {
		return l.Lose()
	}
	return nil
}
