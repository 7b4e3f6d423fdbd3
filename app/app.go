// Package app composes an ndigo application from fx modules: logging,
// configuration, the lock driver and the scheduler, then the user's
// controllers and modules.
//
//	err := app.Run(ctx,
//		config.Module[Config](config.LoadOptions{Path: "app.yaml", EnvPrefix: "APP_"}),
//		annotations.Controller[*PayrollController](),
//		fx.Provide(NewPayrollController),
//	)
//
// Run starts the application, waits for SIGINT, SIGTERM, the context's end or
// an fx shutdown, and stops it gracefully: no new fires, running tasks get
// until the stop timeout, leases are released.
//
// The configuration chooses the lock driver and the task state in one
// step: redis.url puts them in Redis, postgres.url in PostgreSQL, neither
// keeps them in the process ([Backend]); etcd.endpoints puts them in etcd
// when the application includes etcdlocks.Module ([Etcd]). A configuration module at the
// root of the application (redislocks.Module, pglocks.Module, a driver of
// your own through locks.Override) replaces them whatever the
// configuration says.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/internal/etcdconf"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// Module holds the framework's own modules, each given its part of the
// graph's [Framework] (when there is one): a *slog.Logger from its log
// settings, the node name, zone and skip level of the scheduler, the
// configuration's values (and where each was set, for errors) as the
// annotations.Resolver of tag placeholders,
// the redis and postgres sections as redislocks.ModuleConfig and
// pglocks.ModuleConfig, the lock driver and task state they choose (a
// [Backend]), the scheduler, and package admin's Module, which serves the admin
// endpoints on admin.addr (and, with admin.metrics, the scheduler's
// Prometheus metrics at /metrics there), and, with ping.url, a package ping
// Pinger that pings the monitor outside the cluster while the scheduler
// runs, and, with a notify section, a scheduling.Alerter that sends each
// task's health changes to its webhook or Slack. [New] includes it; use
// it directly to compose an fx.App by hand. Do not add admin.Module again.
var Module = fx.Options(
	fx.Module("settings",
		fx.Provide(newLogger),
		fx.Provide(fx.Annotate(nodeName, fx.ResultTags(`name:"`+scheduling.NodeName+`"`))),
		fx.Provide(fx.Annotate(skipLevel, fx.ResultTags(`name:"`+scheduling.SkipLevelName+`"`))),
		fx.Provide(fx.Annotate(zone, fx.ResultTags(`name:"`+scheduling.LocationName+`"`))),
		fx.Provide(fx.Annotate(spreadMode, fx.ResultTags(`name:"`+scheduling.SpreadName+`"`))),
		fx.Provide(placeholders, redisConfig, postgresConfig, etcdSection),
	),
	fx.Module("backend", fx.Provide(newBackend)),
	scheduling.Module,
	operations,
)

// New returns an fx application made of Module and opts, with fx's own
// events, errors included, logged through the application's *slog.Logger
// at debug level: [Run] returns the error that matters once. A type among
// opts that declares annotations.Scheduled fields but whose tasks are not
// registered (given to fx.Provide instead of annotations.Provide) fails
// startup (annotations.CheckRegistered).
func New(opts ...fx.Option) *fx.App {
	events := &fxEvents{}
	return fx.New(
		Module,
		fx.Options(opts...),
		annotations.CheckRegistered(opts...),
		fx.WithLogger(func() fxevent.Logger { return events }),
		fx.Invoke(events.attach),
	)
}

// fxEvents logs fx's own events, its errors included, at Debug through the
// application's *slog.Logger: Run returns the error that stopped the
// application, once, as its root cause. The logger comes from the graph,
// which may fail to build it (a bad configuration file), so fx gets this
// forwarder instead, which needs nothing: events before the logger exists
// wait for it, and are dropped if it never does, rather than fx printing
// the failure itself through its fallback console logger.
type fxEvents struct {
	mu      sync.Mutex
	log     fxevent.Logger
	pending []fxevent.Event
}

func (e *fxEvents) LogEvent(ev fxevent.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.log == nil {
		e.pending = append(e.pending, ev)
		return
	}
	e.log.LogEvent(ev)
}

func (e *fxEvents) attach(l *slog.Logger) {
	fl := &fxevent.SlogLogger{Logger: l}
	fl.UseLogLevel(slog.LevelDebug)
	fl.UseErrorLevel(slog.LevelDebug)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.pending {
		fl.LogEvent(ev)
	}
	e.log, e.pending = fl, nil
}

// Run builds the application with New, starts it, and stops it when ctx
// ends, on SIGINT or SIGTERM, or when a component asks fx to shut down. It
// returns the first error of building, starting or stopping.
func Run(ctx context.Context, opts ...fx.Option) error {
	var fw Framework // its stop-timeout, if the graph has one
	a := New(append(opts, fx.Invoke(func(p frameworkParams) { fw = p.Framework }))...)
	if err := a.Err(); err != nil {
		// The root cause is the message a user acts on (an invalid spec,
		// a bad setting); fx's wrapping only names the constructors, of
		// which a missing type keeps the one that needs it.
		cause := dig.RootCause(err)
		if strings.HasPrefix(cause.Error(), "app: ") { // an error of this package's own
			return cause
		}
		if needer := missingFor(err); needer != "" {
			return fmt.Errorf("app: %w, which %s needs: provide it (fx.Provide or fx.Supply), or remove what needs it", cause, needer)
		}
		return fmt.Errorf("app: %w", cause)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Starting runs to completion (or its timeout) even if ctx ends
	// meanwhile; the stop below then undoes it.
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.StartTimeout())
	defer cancel()
	if err := a.Start(startCtx); err != nil {
		return fmt.Errorf("app: start: %w", err)
	}
	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	var exit error
	select {
	case <-sigCtx.Done():
	case sig := <-a.Wait():
		if sig.ExitCode != 0 {
			exit = fmt.Errorf("app: shut down with exit code %d", sig.ExitCode)
		}
	}
	stopTimeout := a.StopTimeout()
	if fw.StopTimeout > 0 {
		stopTimeout = fw.StopTimeout
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), stopTimeout)
	defer cancelStop()
	if err := a.Stop(stopCtx); err != nil {
		return errors.Join(exit, fmt.Errorf("app: stop: %w", err))
	}
	return exit
}

// LogOutputName is the fx name of an io.Writer that, when the graph has one,
// receives the application's log instead of os.Stderr.
const LogOutputName = "app.log-output"

type loggerParams struct {
	fx.In
	Framework Framework `optional:"true"`
	Output    io.Writer `name:"app.log-output" optional:"true"` // LogOutputName
}

type frameworkParams struct {
	fx.In
	Framework Framework `optional:"true"`
}

// newLogger builds the application's logger from the framework's log
// settings: text or JSON, at the configured level.
func newLogger(p loggerParams) *slog.Logger {
	out := p.Output
	if out == nil {
		out = os.Stderr
	}
	return WithNode(NewLogger(out, p.Framework.Log), nodeName(frameworkParams{Framework: p.Framework}))
}

// WithNode returns l with the attribute node=name on every record that
// does not carry a node attribute of its own (a line about another node
// keeps its own): in a cluster's merged logs, every line says which node
// wrote it.
func WithNode(l *slog.Logger, name string) *slog.Logger {
	return slog.New(&nodeHandler{inner: l.Handler(), node: name})
}

// nodeHandler adds node to the records that lack one.
type nodeHandler struct {
	inner slog.Handler
	node  string
	has   bool // WithAttrs gave a node
}

func (h *nodeHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *nodeHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.has {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == "node"
			return !has
		})
		if !has {
			r = r.Clone()
			r.AddAttrs(slog.String("node", h.node))
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *nodeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range attrs {
		has = has || a.Key == "node"
	}
	return &nodeHandler{inner: h.inner.WithAttrs(attrs), node: h.node, has: has}
}

func (h *nodeHandler) WithGroup(name string) slog.Handler {
	// Attributes after a group are the group's: the node goes before it.
	inner := h.inner
	if !h.has {
		inner = inner.WithAttrs([]slog.Attr{slog.String("node", h.node)})
	}
	return &nodeHandler{inner: inner.WithGroup(name), node: h.node, has: true}
}

// NewLogger returns a logger that writes to w in cfg's format ("json", or
// text otherwise) at cfg's level (info when empty or unknown).
func NewLogger(w io.Writer, cfg Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// missingFor names the constructor whose dependency is missing, with its
// file and line, when err (fx's) is about a missing type: the root cause
// alone names only the type. It returns "" otherwise.
func missingFor(err error) string {
	const marker = "missing dependencies for function "
	full := err.Error()
	i := strings.LastIndex(full, marker)
	if i < 0 {
		return ""
	}
	fn := full[i+len(marker):]
	if j := strings.Index(fn, ": missing type"); j >= 0 {
		return fn[:j]
	}
	return ""
}

// zone gives the scheduler the configured zone of cron expressions; nil,
// the local zone, when none is set.
func zone(p frameworkParams) (*time.Location, error) {
	if p.Framework.Zone == "" {
		return nil, nil
	}
	loc, err := time.LoadLocation(p.Framework.Zone)
	if err != nil {
		return nil, fmt.Errorf("app: zone %q: %w", p.Framework.Zone, err)
	}
	return loc, nil
}

// redisConfig adapts the configuration's redis section for
// redislocks.Module.
func redisConfig(p frameworkParams) redislocks.ModuleConfig {
	return redislocks.ModuleConfig{URL: p.Framework.Redis.URL.Reveal(), Namespace: p.Framework.Redis.Namespace,
		History: p.Framework.Redis.History}
}

// etcdSection hands the configuration's etcd section to
// etcdlocks.Module, which is the only one to ask for it; it refuses a
// configuration that also names redis.url or postgres.url.
func etcdSection(p frameworkParams) (etcdconf.Section, error) {
	e, fw := p.Framework.Etcd, p.Framework
	if len(e.Endpoints) > 0 {
		if err := oneStore(fw); err != nil {
			return etcdconf.Section{}, err
		}
	}
	return etcdconf.Section{Endpoints: e.Endpoints, Namespace: e.Namespace, Username: e.Username, Password: e.Password.Reveal(),
		CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile, DialTimeout: e.DialTimeout, History: e.History}, nil
}

// postgresConfig adapts the configuration's postgres section for
// pglocks.Module.
func postgresConfig(p frameworkParams) pglocks.ModuleConfig {
	return pglocks.ModuleConfig{URL: p.Framework.Postgres.URL.Reveal(), Namespace: p.Framework.Postgres.Namespace,
		History: p.Framework.Postgres.History}
}

type valuesParams struct {
	fx.In
	Values  config.Values  `optional:"true"`
	Sources config.Sources `optional:"true"`
}

// placeholders resolves the ${path} placeholders of annotations' tags from
// the configuration's values, when the graph has them (config.Module
// provides them), and says where each was set (config.Sources), so that a
// bad value in a tag is reported with its setting and that setting's
// source.
func placeholders(p valuesParams) annotations.Resolver {
	if p.Values == nil {
		return nil
	}
	return settings{p.Values, p.Sources}
}

// settings is an annotations.SourceResolver: Lookup from config.Values,
// Source from config.Sources (none when nil).
type settings struct {
	config.Values
	config.Sources
}

// skipLevel gives the scheduler the configured level of its skip lines.
func skipLevel(p frameworkParams) slog.Level { return p.Framework.Log.SlogSkipLevel() }

// spreadMode gives the scheduler the configured spread mode.
func spreadMode(p frameworkParams) scheduling.SpreadMode {
	return scheduling.SpreadMode(p.Framework.Spread)
}

// nodeName gives the scheduler, and every log line, the configured node
// name, or scheduling.DefaultNodeName.
func nodeName(p frameworkParams) string {
	if p.Framework.Node != "" {
		return p.Framework.Node
	}
	return scheduling.DefaultNodeName()
}
