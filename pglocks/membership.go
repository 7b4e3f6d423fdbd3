package pglocks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/locks"
)

var _ locks.Membership = (*Driver)(nil)

// Heartbeat implements locks.Membership in one statement on the members
// table (Options.Table plus "_members"), lives counted on the database's
// clock; the heartbeat deletes its group's lapsed members.
func (d *Driver) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	if err := locks.CheckMembership(ctx, group, member, ttl, false); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql.heartbeat, pgx.QueryExecModeExec, d.ns, group, member, micros(ttl))
	if err != nil {
		return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrDatabase, member, group, withContext(ctx, err))
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrDatabase, member, group, withContext(ctx, err))
	}
	slices.Sort(members)
	return members, nil
}

// Leave implements locks.Membership in one statement.
func (d *Driver) Leave(ctx context.Context, group, member string) error {
	if err := locks.CheckMembership(ctx, group, member, 0, true); err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, d.sql.leave, pgx.QueryExecModeExec, d.ns, group, member); err != nil {
		return fmt.Errorf("%w: %q leaving group %q: %w", ErrDatabase, member, group, withContext(ctx, err))
	}
	return nil
}
