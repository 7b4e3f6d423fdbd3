// Command payroll is the ndigo example: a controller whose CloseBooks task,
// declared with struct tags, runs on exactly one node per fire.
//
// With no flags it runs on one node with the in-process lock driver:
//
//	go run ./examples/payroll
//
// With --redis it coordinates with every other node on the same Redis and
// namespace:
//
//	go run ./examples/payroll --redis redis://localhost:6379 --node a --cron '@every 1s'
//
// With --postgres it does so through a PostgreSQL database instead, where
// its ledger is a table whose writes pglocks.Guard fences:
//
//	go run ./examples/payroll --postgres postgres://app@localhost:5432/app --node a --cron '@every 1s'
//
// With --etcd it does so through an etcd cluster, whose transactions fence
// its ledger (etcdlocks.Guard). etcd's client (gRPC and its dependencies)
// is built in only with the build tag etcd, so that the example's first
// build, the first thing a new user runs, does not compile it:
//
//	go run -tags etcd ./examples/payroll --etcd http://localhost:2379 --node a --cron '@every 1s'
//
// Every flag can also be set through the environment variable named beside
// it in --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/internal/clockskew"
	"github.com/ndigo/ndigo/scheduling"
)

// Config is the example's configuration: ndigo's own settings plus the
// payroll section.
type Config struct {
	app.Framework `yaml:",inline"`
	Payroll       Payroll `yaml:"payroll"`
}

// Payroll holds the example's own settings.
type Payroll struct {
	// Cron is CloseBooks's schedule.
	Cron string `yaml:"cron" env:"PAYROLL_CRON" default:"@every 2s" validate:"required"`
	// LockTTL is CloseBooks's lease: how long the lock outlives a node that
	// dies holding it.
	LockTTL time.Duration `yaml:"lock-ttl" env:"PAYROLL_LOCK_TTL" default:"30s" validate:"gt=0"`
	// ClockOffset shifts this node's clock, to show skew tolerance.
	ClockOffset time.Duration `yaml:"clock-offset" env:"PAYROLL_CLOCK_OFFSET"`
	// CatchUp is CloseBooks's catch-up policy: "skip", or the window within
	// which a fire missed while no node ran is run when a node starts.
	CatchUp string `yaml:"catch-up" env:"PAYROLL_CATCH_UP" default:"skip"`
	// Retry is how many times CloseBooks retries a fire whose run failed;
	// 0 does not retry. With --redis, --postgres or --etcd the retry is pending in
	// the shared store, so another node runs it if this one dies.
	Retry int `yaml:"retry" env:"PAYROLL_RETRY" default:"3" validate:"min=0,max=100"`
	// RetryBackoff is the backoff before CloseBooks's first retry of a fire,
	// doubled for each next one; each delay is drawn below it.
	RetryBackoff time.Duration `yaml:"retry-backoff" env:"PAYROLL_RETRY_BACKOFF" default:"10s" validate:"gt=0"`
	// LateAfter is the grace of a fire of CloseBooks and Reconcile for their
	// health: one not started this long after its instant makes the task
	// late. DownAfter makes it down (see scheduling.LateAfter and DownAfter).
	LateAfter time.Duration `yaml:"late-after" env:"PAYROLL_LATE_AFTER" default:"2m" validate:"gt=0"`
	DownAfter time.Duration `yaml:"down-after" env:"PAYROLL_DOWN_AFTER" default:"5m" validate:"gtfield=LateAfter"`
	// For stops the process cleanly after this long; zero runs until a signal.
	For time.Duration `yaml:"for" env:"PAYROLL_FOR" validate:"min=0"`
}

// The variables of app.Framework's redis.url and postgres.url under the
// example's prefix: which one is set decides the lock driver and the ledger.
const (
	redisURLEnv      = "PAYROLL_REDIS_URL"
	postgresURLEnv   = "PAYROLL_POSTGRES_URL"
	etcdEndpointsEnv = "PAYROLL_ETCD_ENDPOINTS"
)

// flags maps each command-line flag to the environment variables that
// configuration reads; a flag given on the command line wins.
var flags = []struct {
	name, usage string
	envs        []string // the variables the flag sets
	boolean     bool     // given without a value: --metrics
}{
	{"redis", "Redis URL; absent (and no --postgres): in-process locks on this node only", []string{redisURLEnv}, false},
	{"postgres", "PostgreSQL URL: locks and the ledger in that database, instead of Redis", []string{postgresURLEnv}, false},
	{"etcd", "etcd endpoints, comma-separated: locks and the ledger in that cluster, instead of Redis", []string{etcdEndpointsEnv}, false},
	// One namespace flag for any store: the settings take the same values.
	{"namespace", "lock namespace shared by the nodes of one environment",
		[]string{"PAYROLL_REDIS_NAMESPACE", "PAYROLL_POSTGRES_NAMESPACE", "PAYROLL_ETCD_NAMESPACE"}, false},
	// One history flag for any store, as for the namespace.
	{"history", "runs per task the shared history keeps, which the audit judges fires by (default 20, at most 1000)",
		[]string{"PAYROLL_REDIS_HISTORY", "PAYROLL_POSTGRES_HISTORY", "PAYROLL_ETCD_HISTORY"}, false},
	{"node", "this node's name (default: <hostname>-<pid>)", []string{"PAYROLL_NODE"}, false},
	{"cron", "CloseBooks's schedule (default: @every 2s)", []string{"PAYROLL_CRON"}, false},
	{"catch-up", "CloseBooks's catch-up: skip, or a window such as 1m (default: skip)", []string{"PAYROLL_CATCH_UP"}, false},
	{"clock-offset", "shift this node's clock by a duration, e.g. 300ms or -300ms", []string{"PAYROLL_CLOCK_OFFSET"}, false},
	{"log-format", "text or json", []string{"PAYROLL_LOG_FORMAT"}, false},
	{"for", "exit cleanly after this long, e.g. 10s (default: run until a signal)", []string{"PAYROLL_FOR"}, false},
	{"admin-addr", "serve /scheduledtasks, /locks and /healthz on this address, e.g. 127.0.0.1:8081", []string{"PAYROLL_ADMIN_ADDR"}, false},
	{"metrics", "expose Prometheus metrics at /metrics on --admin-addr", []string{"PAYROLL_ADMIN_METRICS"}, true},
	{"admin-token", "bearer token of the task control endpoints (run, pause, resume, backfill) on --admin-addr; " +
		"prefer the variable, which other users cannot read from the process list", []string{"PAYROLL_ADMIN_TOKEN"}, false},
}

func main() {
	err := run(context.Background(), os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp): // --help printed the usage
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("payroll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, f := range flags {
		usage := f.usage + " ($" + strings.Join(f.envs, ", $") + ")"
		if f.boolean {
			fs.Bool(f.name, false, usage)
			continue
		}
		fs.String(f.name, "", usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, m := range flags {
			if m.name == f.Name {
				for _, e := range m.envs {
					given[e] = f.Value.String()
				}
			}
		}
	})
	env := func(name string) (string, bool) {
		if v, ok := given[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
	return app.Run(ctx, options(env, stderr)...)
}

// options composes the example: its configuration, its ledger, its clock,
// and its controllers. Configuration loads inside the graph
// (config.Module), and its redis or postgres section chooses the lock
// driver and task state there too (app.Backend): one load, and a bad
// setting fails startup like any other error. With etcd endpoints, the
// example includes etcdlocks.Module, which reads the etcd section, as an
// application on etcd does.
func options(env func(string) (string, bool), logOut io.Writer) []fx.Option {
	store := fx.Provide(newLedger)
	if e, _ := env(etcdEndpointsEnv); e != "" {
		store = etcdStore
	}
	return []fx.Option{
		store,
		config.Module[Config](config.LoadOptions{EnvPrefix: "PAYROLL_", Env: env}),
		fx.Supply(fx.Annotate(logOut, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		fx.Provide(func(cfg Config) clockwork.Clock {
			return clockskew.New(clockwork.NewRealClock(), cfg.Payroll.ClockOffset)
		}),
		fx.Invoke(stopAfter),
		annotations.Provide(NewPayrollController),
		scheduling.Provide(reconcile),
		fx.Invoke(registerTenantReports),
	}
}

// etcdStore is the example's lock store and ledger on etcd: etcdlocks.Module
// and a ledger on its client, in a binary built with -tags etcd (etcd.go).
var etcdStore = withoutEtcd()

// withoutEtcd is etcdStore in a build without the tag etcd: the error that
// says how to build the example with it.
func withoutEtcd() fx.Option {
	return fx.Error(errors.New("payroll: --etcd (" + etcdEndpointsEnv + ") needs etcd's client, which this binary " +
		"was built without: build the example with the tag etcd, as in go run -tags etcd ./examples/payroll --etcd ENDPOINTS"))
}

// newLedger keeps the ledger where the configuration put the locks: in
// Redis, in PostgreSQL (its table created on start), or in memory.
func newLedger(b app.Backend, cfg Config, lc fx.Lifecycle) ledger {
	switch {
	case b.Redis != nil:
		return newRedisLedger(b.Redis, cfg.Redis.Namespace)
	case b.Postgres != nil:
		return providePGLedger(b.Postgres, cfg, lc)
	}
	return &memoryLedger{}
}

// stopAfter shuts the application down cleanly (exit code 0) once
// payroll.for has passed since start, if it is set.
func stopAfter(cfg Config, lc fx.Lifecycle, sd fx.Shutdowner) {
	if cfg.Payroll.For <= 0 {
		return
	}
	var t *time.Timer
	lc.Append(fx.StartStopHook(
		func() { t = time.AfterFunc(cfg.Payroll.For, func() { _ = sd.Shutdown() }) },
		func() { t.Stop() },
	))
}
