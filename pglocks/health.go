package pglocks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/locks"
)

var (
	_ locks.HealthChecker = (*Driver)(nil)
	_ locks.HealthChecker = (*Store)(nil)
)

// errReadOnly is the health check's finding on a server that accepts no
// writes: every lock operation and task state change would fail there.
var errReadOnly = errors.New("the server is read-only (transaction_read_only is on: a standby, or default_transaction_read_only is set), so it can take no lock and record no run")

// CheckHealth reads from the lock table and the session's
// transaction_read_only in one unprepared statement (so it works through
// PgBouncer in transaction mode), and fails, wrapping ErrDatabase, when the
// database is unreachable, the table is missing, or the server is
// read-only. The error names the server's address, never the password. It
// implements locks.HealthChecker, for /healthz.
func (d *Driver) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, d.pool, d.table, "the lock driver (namespace "+d.ns+", table "+d.table+")")
}

// CheckHealth is [Driver.CheckHealth] for the task state: it reads from
// the store's table of paused flags, which every fire reads.
func (s *Store) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, s.pool, s.table+"_paused", "the task state store (namespace "+s.ns+", tables "+s.table+"_*)")
}

func checkHealth(ctx context.Context, pool *pgxpool.Pool, table, what string) error {
	// A timeout's error does not name the server.
	cc := pool.Config().ConnConfig
	what += " at " + net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	q := "SELECT current_setting('transaction_read_only') = 'on', EXISTS (SELECT FROM " +
		pgx.Identifier(strings.Split(table, ".")).Sanitize() + ")"
	// A pooled connection that the server closed meanwhile (it restarted)
	// fails its first statement and leaves the pool, and the pool may hold
	// more of them: whether the server answers now is what the next idle
	// connection, or at last a new one (made by the pool, with its hooks),
	// tells. A server that answered with an error did answer.
	idle := pool.Stat().IdleConns()
	err := healthQuery(ctx, pool, q)
	var pgErr *pgconn.PgError
	for range idle {
		if err == nil || errors.As(err, &pgErr) || ctx.Err() != nil {
			break
		}
		err = healthQuery(ctx, pool, q)
	}
	if err == nil {
		return nil
	}
	if pw := pool.Config().ConnConfig.Password; pw != "" && strings.Contains(err.Error(), pw) {
		return fmt.Errorf("%w: health check of %s: %s", ErrDatabase, what, scrub(err, pw))
	}
	return fmt.Errorf("%w: health check of %s: %w", ErrDatabase, what, err)
}

// healthQuery runs the health check's statement q on pool, unprepared.
func healthQuery(ctx context.Context, pool *pgxpool.Pool, q string) error {
	var readOnly, rows bool
	if err := pool.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&readOnly, &rows); err != nil {
		return err
	}
	if readOnly {
		return errReadOnly
	}
	return nil
}
