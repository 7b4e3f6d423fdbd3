package app

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/internal/etcdconf"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

// A Backend is where the configuration puts the locks and the task state
// the nodes share, as [Module] provides it: the Redis client when
// redis.url is set, the PostgreSQL pool when postgres.url is, neither for
// the in-process default (one node only). The application may use the
// client or the pool for its own data (the payroll example keeps its
// ledger there); the framework closes them at stop, after the scheduler.
// With redislocks.Module or pglocks.Module in the application, which
// provide their own, use theirs: asking for a Backend then opens a second
// client or pool.
//
// With the etcd section and etcdlocks.Module, a Backend holds neither: the
// module provides its *clientv3.Client to the graph.
type Backend struct {
	Redis    redis.UniversalClient // nil unless redis.url is set
	Postgres *pgxpool.Pool         // nil unless postgres.url is set
}

type backendParams struct {
	fx.In
	Framework Framework         `optional:"true"`
	Etcd      etcdconf.Included `optional:"true"` // etcdlocks.Module is in the application
	Lifecycle fx.Lifecycle
	Logger    *slog.Logger `optional:"true"`
}

// newBackend chooses the lock driver and the task state from the
// configuration, in one step: the redis section's URL makes them
// redislocks' (redislocks.Open), the postgres section's pglocks', neither
// the in-process defaults. redislocks.Module or pglocks.Module, included
// at the root, decorate both and win: this constructor is then not called
// for them.
func newBackend(p backendParams) (Backend, locks.Driver, taskstate.Store, error) {
	fw := p.Framework
	if err := oneStore(fw); err != nil {
		return Backend{}, nil, nil, err
	}
	switch {
	case len(fw.Etcd.Endpoints) > 0 && bool(p.Etcd):
		// etcdlocks.Module replaces the driver and the task state; the
		// Backend holds no client of etcd (the module's *clientv3.Client is
		// in the graph), and the defaults below are never used.
		st, err := taskstate.NewInProcess(0)
		return Backend{}, locks.NewInProcessDriver(), st, err
	case len(fw.Etcd.Endpoints) > 0:
		return Backend{}, nil, nil, fmt.Errorf("app: etcd.endpoints is set (%s), but the application does not include etcdlocks.Module, "+
			"which provides the etcd driver: add it to app.Run or app.New (import github.com/ndigo/ndigo/etcdlocks), "+
			"or remove the etcd section to keep in-process locks", strings.Join(fw.Etcd.Endpoints, ","))
	case fw.Redis.URL != "":
		c, d, st, err := redislocks.Open(p.Lifecycle, redisConfig(frameworkParams{Framework: fw}), p.Logger)
		return Backend{Redis: c}, d, st, err
	case fw.Postgres.URL != "":
		pool, d, st, err := pglocks.Open(p.Lifecycle, postgresConfig(frameworkParams{Framework: fw}), p.Logger)
		return Backend{Postgres: pool}, d, st, err
	}
	st, err := taskstate.NewInProcess(0)
	return Backend{}, locks.NewInProcessDriver(), st, err
}

// oneStore refuses a configuration that names more than one of the
// stores: the locks and the task state live in one of them.
func oneStore(fw Framework) error {
	var named []string
	if fw.Redis.URL != "" {
		named = append(named, fmt.Sprintf("redis.url (%s)", fw.Redis.URL))
	}
	if fw.Postgres.URL != "" {
		named = append(named, fmt.Sprintf("postgres.url (%s)", fw.Postgres.URL))
	}
	if len(fw.Etcd.Endpoints) > 0 {
		named = append(named, fmt.Sprintf("etcd.endpoints (%s)", strings.Join(fw.Etcd.Endpoints, ",")))
	}
	if len(named) < 2 {
		return nil
	}
	what := strings.Join(named, " and ")
	if len(named) == 2 {
		what = "both " + what
	}
	return fmt.Errorf("app: the configuration names %s: the locks and the task state live in one of them; keep one", what)
}
