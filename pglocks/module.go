package pglocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/internal/redact"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// Module replaces the app's default lock driver with a PostgreSQL driver,
// the configuration-module pattern: it reads a [ModuleConfig] from the
// graph (app.Module provides it from the configuration's postgres
// section), provides the connection pool as a *pgxpool.Pool for the app's
// own use (its guarded transactions, see [Guard]), and decorates
// locks.Driver, and taskstate.Store with a [Store] in the same database and
// namespace (its tables created on start too).
//
// The module owns the pool it builds: on start it pings the database, so a
// wrong URL or an unreachable server fails startup with a message naming
// the (redacted) URL, and creates the schema ([Driver.CreateSchema]); on
// stop, after the scheduler has released its leases, it stops the driver's
// listener and closes the pool. The driver itself only borrows the pool.
//
// Include Module at the root of the application, beside locks.Module, not
// inside another fx.Module (see locks.Override): a nested one fails startup
// naming the fix. The task state (taskstate.Store) is replaced the same way.
var Module = fx.Options(
	locks.Override("pglocks", newModuleDriver, fx.Provide(newPool),
		fx.Provide(fx.Annotate(newModuleStore, fx.ResultTags(`name:"pglocks.store"`)))),
	fx.Decorate(fx.Annotate(func(s taskstate.Store) taskstate.Store { return s }, fx.ParamTags(`name:"pglocks.store"`))),
)

// ModuleConfig is what [Module] reads from the fx graph. app.Module
// provides it from the configuration's postgres section (postgres.url,
// postgres.namespace); without app.Module, supply one.
type ModuleConfig struct {
	// URL is a PostgreSQL connection URL, postgres:// or postgresql://,
	// with the password, if any, in its userinfo ([CheckURL]). No message
	// of the module shows the password.
	URL string
	// Namespace isolates the locks of one environment from others sharing
	// the database ([Options].Namespace).
	Namespace string
	// History is how many runs per task the task state keeps
	// ([StoreOptions].History); zero means taskstate.DefaultHistory.
	History int
}

// String returns the configuration with the URL's password redacted.
func (c ModuleConfig) String() string {
	return fmt.Sprintf("{URL:%s Namespace:%s}", redact.URL(c.URL), c.Namespace)
}

// GoString redacts the %#v form too.
func (c ModuleConfig) GoString() string {
	return fmt.Sprintf("pglocks.ModuleConfig{URL:%q, Namespace:%q}", redact.URL(c.URL), c.Namespace)
}

// LogValue implements slog.LogValuer, with the URL's password redacted.
func (c ModuleConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", redact.URL(c.URL)), slog.String("namespace", c.Namespace))
}

// CheckURL says why url is not a PostgreSQL connection URL that pgx can
// use, or returns nil. Only the URL form (postgres:// or postgresql://) is
// accepted, not the keyword/value form ("host=… password=…"), so that
// messages can always redact the password. The reason never quotes the URL.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") {
		return errors.New("must be a postgres:// or postgresql:// URL, such as postgres://user:password@host:5432/db?sslmode=require")
	}
	if _, err := pgxpool.ParseConfig(u); err != nil {
		return errors.New("pgx cannot parse it: check the host and port, the database, the query parameters, " +
			"and that special characters in the password are percent-escaped")
	}
	return nil
}

// Open builds what [Module] provides, for a caller that decides at run
// time whether PostgreSQL holds the locks (app.Module does, from the
// configuration's postgres section): the pool, pinged on lc's start and
// closed on its stop after the driver, and the driver and task state store
// on it, their tables created on start. log, which may be nil, gets the
// driver's warnings.
func Open(lc fx.Lifecycle, cfg ModuleConfig, log *slog.Logger) (*pgxpool.Pool, locks.Driver, taskstate.Store, error) {
	pool, err := newPool(poolParams{Lifecycle: lc, Config: cfg})
	if err != nil {
		return nil, nil, nil, err
	}
	// An error after the pool is made fails the app before its hooks run:
	// the pool, whose health checks already run, is closed here.
	d, err := newModuleDriver(moduleDriverParams{Lifecycle: lc, Pool: pool, Config: cfg, Logger: log})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	st, err := newModuleStore(moduleStoreParams{Lifecycle: lc, Pool: pool, Config: cfg})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return pool, d, st, nil
}

type poolParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    ModuleConfig
}

func newPool(p poolParams) (*pgxpool.Pool, error) {
	shownURL := redact.URL(p.Config.URL)
	if p.Config.URL == "" {
		return nil, errors.New("pglocks.Module: the PostgreSQL URL (postgres.url) is empty: set it, or leave the module out to keep in-process locks")
	}
	if err := CheckURL(p.Config.URL); err != nil {
		return nil, fmt.Errorf("%w: pglocks.Module: PostgreSQL URL %s: %v", locks.ErrInvalid, shownURL, err)
	}
	cfg, _ := pgxpool.ParseConfig(p.Config.URL)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("%w: pglocks.Module: PostgreSQL URL %s: %s", locks.ErrInvalid, shownURL, scrub(err, cfg.ConnConfig.Password))
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := pool.Ping(ctx); err != nil {
				pool.Close() // fx runs OnStop only for hooks whose OnStart succeeded
				return fmt.Errorf("%w: pglocks.Module: cannot reach PostgreSQL at %s (URL %s): %s",
					ErrDatabase, cfg.ConnConfig.Host, shownURL, scrub(err, cfg.ConnConfig.Password))
			}
			return nil
		},
		OnStop: func(context.Context) error { pool.Close(); return nil },
	})
	return pool, nil
}

// scrub returns err's text without password, which pgx's connection errors
// do not quote today; this keeps it so if one ever does.
func scrub(err error, password string) string {
	if password == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), password, "xxxxx")
}

type moduleDriverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Pool      *pgxpool.Pool
	Config    ModuleConfig
	Logger    *slog.Logger `optional:"true"`
}

// newModuleDriver builds the module's driver; the decoration of
// locks.Driver returns it without asking for the default, so the in-process
// constructor is never called.
func newModuleDriver(p moduleDriverParams) (locks.Driver, error) {
	d, err := New(Options{Pool: p.Pool, Namespace: p.Config.Namespace, Logger: p.Logger})
	if err != nil {
		return nil, fmt.Errorf("pglocks.Module: %w", err)
	}
	// Appended after the pool's hook, so it starts after the ping and stops
	// before the pool closes: the listener's connection ends first.
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := d.CreateSchema(ctx); err != nil {
				return fmt.Errorf("pglocks.Module: %w", err)
			}
			return nil
		},
		OnStop: func(context.Context) error { return d.Close() },
	})
	return d, nil
}
