package pgfault_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/pgfault"
	"github.com/ndigo/ndigo/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An INSERT whose reply is lost has run once when then runs and when the
// caller gets its error; the pool's next statement works on a new
// connection, and a ping does not use the armed loss.
func TestLosesTheReplyAfterTheStatementRan(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	direct := srv.Pool()
	if _, err := direct.Exec(ctx, "CREATE TABLE visits (n int)"); err != nil {
		t.Fatal(err)
	}
	var d pgfault.Dialer
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = d.DialContext
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM visits").Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	var seen atomic.Int64
	seen.Store(-1)
	d.LoseNextReply(func() { seen.Store(int64(count())) })
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("a ping with a loss armed: %v, want it untouched", err)
	}
	_, err = p.Exec(ctx, "INSERT INTO visits VALUES (1)", pgx.QueryExecModeExec)
	if err == nil { // pgx reports it as its own "conn closed"
		t.Fatal("INSERT whose reply was lost: err = nil, want an error")
	}
	if got := seen.Load(); got != 1 {
		t.Fatalf("then saw %d rows, want 1: the statement ran before its reply was lost", got)
	}
	if n, lost := count(), d.Lost(); n != 1 || lost != 1 {
		t.Fatalf("%d rows and %d replies lost; want 1 and 1: pgx does not resend", n, lost)
	}
	if _, err := p.Exec(ctx, "INSERT INTO visits VALUES (2)", pgx.QueryExecModeExec); err != nil {
		t.Fatalf("the next statement: %v", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

// LoseNthReply lets the statements before the n-th through: the third
// INSERT's reply is lost, after the first two and it ran.
func TestLosesTheNthReply(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	direct := srv.Pool()
	if _, err := direct.Exec(ctx, "CREATE TABLE visits (n int)"); err != nil {
		t.Fatal(err)
	}
	var d pgfault.Dialer
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = d.DialContext
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	d.LoseNthReply(3, func() {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM visits").Scan(&n); err != nil {
			t.Error(err)
		}
		seen.Store(int64(n))
	})
	for i := 1; i <= 3; i++ {
		_, err := p.Exec(ctx, "INSERT INTO visits VALUES ($1)", pgx.QueryExecModeExec, i)
		if lost := err != nil; lost != (i == 3) {
			t.Fatalf("INSERT %d: %v; want the third one's reply lost, and only it", i, err)
		}
	}
	if got, lost := seen.Load(), d.Lost(); got != 3 || lost != 1 {
		t.Fatalf("then saw %d rows and %d replies were lost; want 3 and 1", got, lost)
	}
}
