package etcdlocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/ndigo/ndigo/internal/etcdconf"
	"github.com/ndigo/ndigo/internal/redact"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// Module replaces the default in-process lock driver and task state with
// etcd's, on a client it opens from the graph's ModuleConfig and closes on
// stop: every node that shares the etcd cluster and namespace then shares
// its leases and task state. Include it at the root of the app, beside
// locks.Module (see locks.Override). Start fails, naming the endpoints,
// when no quorum answers a linearizable read within the dial timeout.
var Module = fx.Options(
	locks.Override("etcdlocks", newModuleDriver, fx.Provide(fx.Private, chooseConfig), fx.Provide(newClient),
		fx.Supply(etcdconf.Included(true)),
		fx.Provide(fx.Annotate(newModuleStore, fx.ResultTags(`name:"etcdlocks.store"`)))),
	fx.Decorate(fx.Annotate(func(s taskstate.Store) taskstate.Store { return s }, fx.ParamTags(`name:"etcdlocks.store"`))),
)

// ModuleConfig is what Module reads from the graph: provide one, or let
// app.Module hand Module the configuration's etcd section (app.Etcd). It
// prints and logs with Password redacted.
type ModuleConfig struct {
	// Endpoints are the members' client URLs or host:port pairs
	// ("https://etcd-0:2379"); at least one.
	Endpoints []string
	// Namespace isolates this application's keys (Options.Namespace).
	Namespace string
	// Username and Password authenticate with etcd's auth, if set;
	// Password needs Username.
	Username string
	Password string
	// CAFile verifies the members' certificates; CertFile and KeyFile, set
	// together, are the client's own (mutual TLS). An endpoint with https
	// uses TLS with the system's roots if CAFile is empty.
	CAFile, CertFile, KeyFile string
	// DialTimeout bounds connecting to a member; zero means 5s.
	DialTimeout time.Duration
	// History is how many runs per task the task state keeps (0:
	// taskstate.DefaultHistory).
	History int
}

// String prints c with its password redacted.
func (c ModuleConfig) String() string {
	return fmt.Sprintf("{Endpoints:%v Namespace:%s Username:%s Password:%s CAFile:%s CertFile:%s KeyFile:%s}",
		c.Endpoints, c.Namespace, c.Username, redacted(c.Password), c.CAFile, c.CertFile, c.KeyFile)
}

// GoString prints c with its password redacted, for %#v.
func (c ModuleConfig) GoString() string {
	return fmt.Sprintf("etcdlocks.ModuleConfig{Endpoints:%q, Namespace:%q, Username:%q, Password:%q}", c.Endpoints, c.Namespace, c.Username, redacted(c.Password))
}

// LogValue logs c with its password redacted.
func (c ModuleConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("endpoints", c.Endpoints), slog.String("namespace", c.Namespace),
		slog.String("username", c.Username), slog.String("password", redacted(c.Password)))
}

func redacted(s string) string {
	if s == "" {
		return ""
	}
	return redact.Mark
}

// check validates c, naming the setting, the value and the rule.
func (c ModuleConfig) check() error {
	switch {
	case len(c.Endpoints) == 0:
		return fmt.Errorf("%w: etcdlocks.Module: etcd.endpoints is empty: list the members' client URLs, or leave the module out to keep in-process locks", locks.ErrInvalid)
	case c.Password != "" && c.Username == "":
		return fmt.Errorf("%w: etcdlocks.Module: etcd.password is set without etcd.username", locks.ErrInvalid)
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("%w: etcdlocks.Module: etcd.cert-file %q and etcd.key-file %q must be set together", locks.ErrInvalid, c.CertFile, c.KeyFile)
	case c.DialTimeout < 0:
		return fmt.Errorf("%w: etcdlocks.Module: etcd.dial-timeout %v must not be negative", locks.ErrInvalid, c.DialTimeout)
	}
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" || strings.ContainsAny(e, " \t\n") {
			return fmt.Errorf("%w: etcdlocks.Module: etcd.endpoints[%d] %q must be a URL or host:port without spaces", locks.ErrInvalid, i, e)
		}
	}
	return nil
}

// clientConfig returns the etcd client's configuration for c.
func (c ModuleConfig) clientConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints, Username: c.Username, Password: c.Password, DialTimeout: c.DialTimeout,
		Logger: zap.NewNop()}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	tlsOn := c.CAFile != "" || c.CertFile != ""
	for _, e := range c.Endpoints {
		tlsOn = tlsOn || strings.HasPrefix(e, "https://")
	}
	if tlsOn {
		info := transport.TLSInfo{TrustedCAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
		tc, err := info.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("%w: etcdlocks.Module: etcd TLS files (ca-file %q, cert-file %q, key-file %q): %v", locks.ErrInvalid, c.CAFile, c.CertFile, c.KeyFile, err)
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

type configParams struct {
	fx.In
	Config  ModuleConfig     `optional:"true"`
	Section etcdconf.Section `optional:"true"`
}

// moduleConfig is the configuration the module's constructors use.
type moduleConfig ModuleConfig

// chooseConfig chooses the module's configuration: the application's own
// ModuleConfig, or else app.Module's etcd section.
func chooseConfig(p configParams) moduleConfig {
	if len(p.Config.Endpoints) > 0 {
		return moduleConfig(p.Config)
	}
	return moduleConfig(p.Section)
}

type clientParams struct {
	fx.In
	Config    moduleConfig
	Lifecycle fx.Lifecycle
}

// newClient opens the module's client; OnStart checks that the quorum
// answers, OnStop closes it.
func newClient(p clientParams) (*clientv3.Client, error) {
	cfg := ModuleConfig(p.Config)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ccfg, err := cfg.clientConfig()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(ccfg)
	if err != nil {
		// With a username, New authenticates at once, and fails when no
		// member answers.
		return nil, fmt.Errorf("%w: etcdlocks.Module: cannot reach etcd at %s: %w", ErrEtcd, strings.Join(cfg.Endpoints, ","), err)
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			// Bounded by the dial timeout, so that the error names etcd
			// rather than fx's start timeout.
			ctx, cancel := context.WithTimeout(ctx, ccfg.DialTimeout)
			defer cancel()
			if _, err := c.Get(ctx, "ndigo/"+cfg.Namespace+"/health", clientv3.WithCountOnly()); err != nil {
				_ = c.Close() // fx runs OnStop only for hooks whose OnStart succeeded
				return fmt.Errorf("%w: etcdlocks.Module: no quorum of etcd at %s answered: %w", ErrEtcd, strings.Join(cfg.Endpoints, ","), err)
			}
			return nil
		},
		OnStop: func(context.Context) error {
			if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	})
	return c, nil
}

type moduleDriverParams struct {
	fx.In
	Config    moduleConfig
	Lifecycle fx.Lifecycle
	Client    *clientv3.Client
	Logger    *slog.Logger `optional:"true"`
}

// newModuleDriver builds the module's driver; its watch stops before the
// client closes.
func newModuleDriver(p moduleDriverParams) (locks.Driver, error) {
	d, err := New(Options{Client: p.Client, Namespace: p.Config.Namespace, Logger: p.Logger})
	if err != nil {
		return nil, fmt.Errorf("etcdlocks.Module: %w", err)
	}
	p.Lifecycle.Append(fx.StopHook(d.Close))
	return d, nil
}

type moduleStoreParams struct {
	fx.In
	Config moduleConfig
	Client *clientv3.Client
}

// newModuleStore builds the module's task state store on its client.
func newModuleStore(p moduleStoreParams) (taskstate.Store, error) {
	s, err := NewStore(StoreOptions{Client: p.Client, Namespace: p.Config.Namespace, History: p.Config.History})
	if err != nil {
		return nil, fmt.Errorf("etcdlocks.Module: %w", err)
	}
	return s, nil
}
