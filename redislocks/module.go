package redislocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/internal/redact"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// Module replaces the app's default lock driver with a Redis driver, the
// configuration-module pattern: it reads a [ModuleConfig] from the graph
// (app.Module provides it from the configuration's redis section), provides
// the go-redis client as a redis.UniversalClient for the app's own use, and
// decorates locks.Driver, and taskstate.Store (the paused flags, manual-run
// requests and run history the nodes share) with a [Store] in the same
// Redis and namespace.
//
// The module owns the client it builds: it pings Redis on start, so a wrong
// URL or an unreachable server fails startup with a message naming the
// (redacted) URL, and closes the client on stop, after the scheduler has
// released its leases. The driver itself only borrows the client.
//
// Include Module at the root of the application, beside locks.Module, not
// inside another fx.Module (see locks.Override): a nested one fails startup
// naming the fix. The task state (taskstate.Store) is replaced the same way.
var Module = fx.Options(
	locks.Override("redislocks", newModuleDriver, fx.Provide(newClient),
		fx.Provide(fx.Annotate(newModuleStore, fx.ResultTags(`name:"redislocks.store"`)))),
	fx.Decorate(fx.Annotate(func(s taskstate.Store) taskstate.Store { return s }, fx.ParamTags(`name:"redislocks.store"`))),
)

// ModuleConfig is what [Module] reads from the fx graph. app.Module
// provides it from the configuration's redis section (redis.url,
// redis.namespace); without app.Module, supply one.
type ModuleConfig struct {
	// URL is the go-redis URL, redis:// or rediss://, with the password, if
	// any, in its userinfo. No message of the module shows the password.
	URL string
	// Namespace isolates the lock keys of one environment from others
	// sharing the same Redis ([Options].Namespace).
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
	return fmt.Sprintf("redislocks.ModuleConfig{URL:%q, Namespace:%q}", redact.URL(c.URL), c.Namespace)
}

// LogValue implements slog.LogValuer, with the URL's password redacted.
func (c ModuleConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", redact.URL(c.URL)), slog.String("namespace", c.Namespace))
}

// Open builds what [Module] provides, for a caller that decides at run
// time whether Redis holds the locks (app.Module does, from the
// configuration's redis section): the client, pinged on lc's start and
// closed on its stop after the driver, and the driver and task state store
// on it. log, which may be nil, gets go-redis's and the driver's warnings.
func Open(lc fx.Lifecycle, cfg ModuleConfig, log *slog.Logger) (redis.UniversalClient, locks.Driver, taskstate.Store, error) {
	c, err := newClient(clientParams{Lifecycle: lc, Config: cfg, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	// An error after the client is made fails the app before its hooks
	// run: the client is closed here.
	d, err := newModuleDriver(moduleDriverParams{Lifecycle: lc, Client: c, Config: cfg, Logger: log})
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	st, err := newModuleStore(moduleStoreParams{Client: c, Config: cfg})
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	return c, d, st, nil
}

type clientParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    ModuleConfig
	Logger    *slog.Logger `optional:"true"`
}

// redisLog routes go-redis's own log lines (connection pool failures,
// several a second while Redis is down) to the application's logger at
// Warn, instead of go-redis's default, which writes them to stderr.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

func newClient(p clientParams) (redis.UniversalClient, error) {
	lc, cfg := p.Lifecycle, p.Config
	if p.Logger != nil {
		// go-redis has one logger per process.
		redis.SetLogger(redisLog{p.Logger})
	}
	url := redact.URL(cfg.URL)
	if cfg.URL == "" {
		return nil, fmt.Errorf("redislocks.Module: the Redis URL (redis.url) is empty: set it, or leave the module out to keep in-process locks")
	}
	if err := CheckURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("%w: redislocks.Module: Redis URL %s: %v", locks.ErrInvalid, url, err)
	}
	opts, _ := redis.ParseURL(cfg.URL)
	// Deadlines of the caller's contexts bound every command, so a hung
	// Redis fails a lock operation at the caller's deadline rather than after
	// the client's read timeouts and retries.
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := c.Ping(ctx).Err(); err != nil {
				_ = c.Close() // fx runs OnStop only for hooks whose OnStart succeeded
				if rerr := redis.Error(nil); errors.As(err, &rerr) {
					// Redis answered: the address is right, the setup is not
					// (a database index out of range, a wrong password).
					return fmt.Errorf("%w: redislocks.Module: Redis at %s refused the connection's setup (URL %s): %w", ErrRedis, opts.Addr, url, err)
				}
				return fmt.Errorf("%w: redislocks.Module: cannot reach Redis at %s (URL %s): %w", ErrRedis, opts.Addr, url, err)
			}
			return nil
		},
		OnStop: func(context.Context) error { return c.Close() },
	})
	return c, nil
}

type moduleDriverParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Client    redis.UniversalClient
	Config    ModuleConfig
	Logger    *slog.Logger `optional:"true"`
}

// newModuleDriver builds the module's driver; the decoration of
// locks.Driver returns it without asking for the default, so the in-process
// constructor is never called.
func newModuleDriver(p moduleDriverParams) (locks.Driver, error) {
	d, err := New(Options{Client: p.Client, Namespace: p.Config.Namespace, Logger: p.Logger})
	if err != nil {
		return nil, fmt.Errorf("redislocks.Module: %w", err)
	}
	// Appended after the client's hook, so it runs first on stop: the
	// release subscription ends while its connection lives.
	p.Lifecycle.Append(fx.StopHook(d.Close))
	return d, nil
}

type moduleStoreParams struct {
	fx.In
	Client redis.UniversalClient
	Config ModuleConfig
}

// newModuleStore builds the module's task state store on its client.
func newModuleStore(p moduleStoreParams) (taskstate.Store, error) {
	s, err := NewStore(StoreOptions{Client: p.Client, Namespace: p.Config.Namespace, History: p.Config.History})
	if err != nil {
		return nil, fmt.Errorf("redislocks.Module: %w", err)
	}
	return s, nil
}
