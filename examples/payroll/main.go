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
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/redislocks"
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
	// For stops the process cleanly after this long; zero runs until a signal.
	For time.Duration `yaml:"for" env:"PAYROLL_FOR" validate:"min=0"`
}

// redisURLEnv is the variable of app.Framework's redis.url under the
// example's prefix: whether it is set decides the lock driver.
const redisURLEnv = "PAYROLL_REDIS_URL"

// flags maps each command-line flag to the environment variable that
// configuration reads; a flag given on the command line wins.
var flags = []struct {
	name, env, usage string
	boolean          bool // given without a value: --metrics
}{
	{"redis", redisURLEnv, "Redis URL; absent: in-process locks on this node only", false},
	{"namespace", "PAYROLL_REDIS_NAMESPACE", "lock namespace shared by the nodes of one environment", false},
	{"node", "PAYROLL_NODE", "this node's name (default: <hostname>-<pid>)", false},
	{"cron", "PAYROLL_CRON", "CloseBooks's schedule (default: @every 2s)", false},
	{"catch-up", "PAYROLL_CATCH_UP", "CloseBooks's catch-up: skip, or a window such as 1m (default: skip)", false},
	{"clock-offset", "PAYROLL_CLOCK_OFFSET", "shift this node's clock by a duration, e.g. 300ms or -300ms", false},
	{"log-format", "PAYROLL_LOG_FORMAT", "text or json", false},
	{"for", "PAYROLL_FOR", "exit cleanly after this long, e.g. 10s (default: run until a signal)", false},
	{"admin-addr", "PAYROLL_ADMIN_ADDR", "serve /scheduledtasks, /locks and /healthz on this address, e.g. 127.0.0.1:8081", false},
	{"metrics", "PAYROLL_ADMIN_METRICS", "expose Prometheus metrics at /metrics on --admin-addr", true},
	{"admin-token", "PAYROLL_ADMIN_TOKEN", "bearer token of the task control endpoints (run, pause, resume) on --admin-addr; " +
		"prefer the variable, which other users cannot read from the process list", false},
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
		if f.boolean {
			fs.Bool(f.name, false, f.usage+" ($"+f.env+")")
			continue
		}
		fs.String(f.name, "", f.usage+" ($"+f.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, m := range flags {
			if m.name == f.Name {
				given[m.env] = f.Value.String()
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

// options composes the example: its configuration, the lock driver it
// chooses, its clock, and its controllers. Configuration loads inside the
// graph (config.Module), so a bad setting fails startup like any other
// error; only the choice of driver module is made before, from whether a
// Redis URL is set at all.
func options(env func(string) (string, bool), logOut io.Writer) []fx.Option {
	opts := []fx.Option{
		config.Module[Config](config.LoadOptions{EnvPrefix: "PAYROLL_", Env: env}),
		fx.Supply(fx.Annotate(logOut, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		fx.Provide(func(cfg Config) clockwork.Clock {
			return offsetClock{clockwork.NewRealClock(), cfg.Payroll.ClockOffset}
		}),
		fx.Invoke(stopAfter),
		annotations.Provide(NewPayrollController),
		scheduling.Provide(reconcile),
	}
	if url, _ := env(redisURLEnv); url == "" {
		return append(opts, fx.Supply(fx.Annotate(&memoryLedger{}, fx.As(new(ledger)))))
	}
	return append(opts,
		redislocks.Module,
		fx.Provide(func(c redis.UniversalClient, cfg Config) ledger { return newRedisLedger(c, cfg.Redis.Namespace) }),
	)
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
