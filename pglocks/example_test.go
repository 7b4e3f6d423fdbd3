package pglocks_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/pglocks"
)

// Acquire a lease, then write under it in a transaction that Guard keeps
// exclusive: the write commits only while no other node holds the key.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleURL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "example"})
	if err != nil {
		panic(err)
	}
	if err := d.CreateSchema(ctx); err != nil {
		panic(err)
	}
	lease, err := d.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		panic(err) // locks.ErrNotAcquired: another node runs payroll
	}
	defer lease.Release(ctx)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := pglocks.Guard(ctx, tx, lease); err != nil {
			return err // locks.ErrLeaseLost: stop, another node took over
		}
		_, err := tx.Exec(ctx, "CREATE TEMP TABLE payslips (token bigint)")
		return err
	})
	fmt.Println("written under the lease:", err == nil)
	// Output: written under the lease: true
}

// exampleURL is the URL of the test server. Use your own database's, for
// example "postgres://app@db.internal/app".
func exampleURL() string { return shared.URL() }
