package pgfault_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/internal/pgfault"
)

// A pool whose connections come from a Dialer loses the reply of its next
// statement after PostgreSQL ran it: the INSERT committed, and the caller
// gets an error (pgx does not resend). then runs between the two, where a
// test makes another node's calls.
func Example() {
	ctx := context.Background()
	var d pgfault.Dialer
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if err != nil {
		panic(err)
	}
	cfg.ConnConfig.DialFunc = d.DialContext
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	d.LoseNextReply(func() { fmt.Println("the INSERT ran; its reply is lost") })
	_, err = p.Exec(ctx, "INSERT INTO visits VALUES (1)", pgx.QueryExecModeExec)
	fmt.Println(err != nil, d.Lost())
}
