package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

//go:embed pgledger.sql
var pgLedgerSchema string

// pgLedger is a table in the database that holds the locks, shared by
// every node: a write is fenced by pglocks.Guard in the write's own
// transaction, so a stale holder's insert never commits. Its statements use
// no server-side prepared statement, as pglocks does, so that it works
// through PgBouncer in transaction mode too.
type pgLedger struct {
	pool *pgxpool.Pool
	ns   string // the lock namespace: nodes of other environments keep their rows apart
}

func newPGLedger(pool *pgxpool.Pool, namespace string) *pgLedger {
	return &pgLedger{pool: pool, ns: namespace}
}

// providePGLedger is the ledger of a node on PostgreSQL: its table is
// created on start, after pglocks.Module has pinged the database.
func providePGLedger(pool *pgxpool.Pool, cfg Config, lc fx.Lifecycle) ledger {
	l := newPGLedger(pool, cfg.Postgres.Namespace)
	lc.Append(fx.Hook{OnStart: l.createTable})
	return l
}

// createTable creates the ledger's table if it does not exist; nodes may
// call it at once.
func (l *pgLedger) createTable(ctx context.Context) error {
	// The simple protocol runs the script's statements as one transaction.
	if _, err := l.pool.Exec(ctx, pgLedgerSchema, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("payroll: create the ledger table payroll_ledger: %w", err)
	}
	return nil
}

func (l *pgLedger) Append(ctx context.Context, lease locks.Lease, fire time.Time, node string) error {
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if err := pglocks.Guard(ctx, tx, lease); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO payroll_ledger (ns, fire, node, token) VALUES ($1, $2, $3, $4)",
			pgx.QueryExecModeExec, l.ns, fire, node, int64(lease.Token()))
		return err
	})
	switch {
	case errors.Is(err, locks.ErrLeaseLost):
		return fmt.Errorf("%w: token %d: %w", errStaleToken, lease.Token(), err)
	case err != nil:
		return fmt.Errorf("payroll: ledger append: %w", err)
	}
	return nil
}

func (l *pgLedger) Entries(ctx context.Context) ([]entry, error) {
	rows, err := l.pool.Query(ctx, "SELECT fire, node, token FROM payroll_ledger WHERE ns = $1 ORDER BY id",
		pgx.QueryExecModeExec, l.ns)
	if err != nil {
		return nil, fmt.Errorf("payroll: ledger entries: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		var token int64
		err := r.Scan(&e.Fire, &e.Node, &token)
		e.Token = uint64(token)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("payroll: ledger entries: %w", err)
	}
	return entries, nil
}
