package pglocks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/remotelease"
)

// handle is one acquisition: the locks.Lease of this driver. The database
// decides whether it is still the holder; the embedded local half only
// decides when Done closes (see the package documentation) and spares
// round trips for a lease known to be over.
type handle struct {
	*remotelease.Lease
	d *Driver
}

// Extend implements locks.Lease in one statement. A lease past its local
// deadline is not extended even if the database still holds it: its Done
// has closed and its holder was told to stop.
func (l *handle) Extend(ctx context.Context, ttl time.Duration) error {
	d := l.d
	return l.ExtendWith(ctx, ttl, func(ctx context.Context) (bool, error) {
		var ok bool
		err := d.pool.QueryRow(ctx, d.sql.extend, pgx.QueryExecModeExec, d.ns, l.Key(), int64(l.Token()), micros(ttl)).Scan(&ok)
		return held(ctx, err, "extend", l)
	})
}

// Release implements locks.Lease in one statement. A lease past its local
// deadline is still released in the database if the database still holds
// it, so the key frees before its TTL runs out. A Release whose earlier
// attempt failed with ErrDatabase after releasing the lease returns nil, as
// long as no successor acquired the key since.
func (l *handle) Release(ctx context.Context) error {
	d := l.d
	return l.ReleaseWith(ctx, func(ctx context.Context) (bool, error) {
		var ok bool
		err := d.pool.QueryRow(ctx, d.sql.release, pgx.QueryExecModeExec, d.ns, l.Key(), int64(l.Token()), d.channel).Scan(&ok)
		if err == nil && !ok {
			err = pgx.ErrNoRows
		}
		return held(ctx, err, "release", l)
	})
}

// held turns the error of a statement that returns a row only while l
// holds its key into whether it does, or ErrDatabase naming op (and
// wrapping ctx's error once ctx ended).
func held(ctx context.Context, err error, op string, l *handle) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	}
	return false, fmt.Errorf("%w: %s key %q token %d: %w", ErrDatabase, op, l.Key(), l.Token(), withContext(ctx, err))
}
