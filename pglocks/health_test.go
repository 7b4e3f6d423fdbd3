package pglocks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

// healthOf returns the driver and store of namespace ns on p, their tables
// created unless bare, as the health checks see them.
func healthOf(t *testing.T, p *pgxpool.Pool, ns, table string, bare bool) (locks.HealthChecker, locks.HealthChecker) {
	t.Helper()
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	s, err := pglocks.NewStore(pglocks.StoreOptions{Pool: p, Namespace: ns, Table: table + "_state"})
	if err != nil {
		t.Fatal(err)
	}
	if !bare {
		if err := d.CreateSchema(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSchema(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return d, s
}

func checkWithin(hc locks.HealthChecker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hc.CheckHealth(ctx)
}

// The checks pass on a working database, and fail, naming what is wrong,
// where every fire would fail: tables missing, a read-only session.
func TestCheckHealthFindsWhatFiresNeed(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	table := unique("health")
	d, s := healthOf(t, p, "health", table, false)
	for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
		if err := checkWithin(hc); err != nil {
			t.Errorf("%s on a working database: %v", what, err)
		}
	}

	missing := unique("nothing")
	d, s = healthOf(t, p, "health", missing, true)
	for what, c := range map[string]struct {
		hc    locks.HealthChecker
		table string
	}{"driver": {d, missing}, "store": {s, missing + "_state_paused"}} {
		err := checkWithin(c.hc)
		if !errors.Is(err, pglocks.ErrDatabase) || !strings.Contains(err.Error(), c.table) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%s without its tables: %v; want ErrDatabase naming %s, which does not exist", what, err, c.table)
		}
	}

	cfg, err := pgxpool.ParseConfig(shared.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	ro, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ro.Close)
	d, s = healthOf(t, ro, "health", table, true) // the tables exist: made above
	for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
		if err := checkWithin(hc); !errors.Is(err, pglocks.ErrDatabase) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on a read-only session: %v; want ErrDatabase saying it is read-only", what, err)
		}
	}
}

// The checks run unprepared: through PgBouncer in transaction mode, on a
// pool that caches prepared statements, they pass.
func TestCheckHealthThroughPgBouncer(t *testing.T) {
	table := unique("health_bouncer")
	healthOf(t, pgtest.Wrap(t, shared).Pool(), "health", table, false)
	p, _ := bouncedPool(t, 0)
	d, s := healthOf(t, p, "health", table, true)
	for range 3 { // more checks than the bouncer's two server sessions
		for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
			if err := checkWithin(hc); err != nil {
				t.Fatalf("%s through PgBouncer: %v", what, err)
			}
		}
	}
}

// A stopped server fails both checks, with the address and never the
// password; once it is back, the next checks pass, also when the pool
// still holds connections the old server closed.
func TestCheckHealthAcrossARestart(t *testing.T) {
	srv := pgtest.Start(t)
	const password = "hunter2-health" // trust authentication ignores it
	cfg, err := pgxpool.ParseConfig(strings.Replace(srv.URL(), "postgres@", "postgres:"+password+"@", 1))
	if err != nil {
		t.Fatal(err)
	}
	// Without the pool's ping of connections idle for a second, a dead one
	// reaches the check whatever the timing.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	d, s := healthOf(t, p, "health", "ndigo_locks", false)
	// idleConns leaves n connections idle in the pool.
	idleConns := func(n int) {
		var held []*pgxpool.Conn
		for range n {
			c, err := p.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		for _, c := range held {
			c.Release()
		}
	}
	idleConns(4)
	srv.Kill()
	for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
		err := checkWithin(hc)
		if !errors.Is(err, pglocks.ErrDatabase) || !strings.Contains(err.Error(), srv.Addr()) || strings.Contains(err.Error(), password) {
			t.Errorf("%s with the server down: %v; want ErrDatabase naming %s, without the password", what, err, srv.Addr())
		}
	}
	srv.Restart()
	for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
		if err := checkWithin(hc); err != nil {
			t.Errorf("%s after the restart: %v", what, err)
		}
	}
	// A restart between two checks leaves the pool's idle connections
	// dead: the server is up all the same.
	idleConns(4)
	srv.Restart()
	for what, hc := range map[string]locks.HealthChecker{"driver": d, "store": s} {
		if err := checkWithin(hc); err != nil {
			t.Errorf("%s after a restart between two checks: %v", what, err)
		}
	}
}
