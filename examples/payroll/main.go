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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/metrics"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// Config is the example's configuration: ndigo's own settings plus the
// payroll section.
type Config struct {
	config.Framework `yaml:",inline"`
	Payroll          Payroll `yaml:"payroll"`
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
	// For stops the process cleanly after this long; zero runs until a signal.
	For time.Duration `yaml:"for" env:"PAYROLL_FOR" validate:"min=0"`
	// AdminAddr is where the admin endpoints (/scheduledtasks, /locks,
	// /healthz) are served; empty serves none.
	AdminAddr string `yaml:"admin-addr" env:"PAYROLL_ADMIN_ADDR"`
	// Metrics exposes Prometheus metrics at /metrics on AdminAddr.
	Metrics bool `yaml:"metrics" env:"PAYROLL_METRICS"`
}

// flags maps each command-line flag to the environment variable that
// configuration reads; a flag given on the command line wins.
var flags = []struct {
	name, env, usage string
	boolean          bool // given without a value: --metrics
}{
	{"redis", "PAYROLL_REDIS_URL", "Redis URL; absent: in-process locks on this node only", false},
	{"namespace", "PAYROLL_REDIS_NAMESPACE", "lock namespace shared by the nodes of one environment", false},
	{"node", "PAYROLL_NODE", "this node's name (default: <hostname>-<pid>)", false},
	{"cron", "PAYROLL_CRON", "CloseBooks's schedule (default: @every 2s)", false},
	{"clock-offset", "PAYROLL_CLOCK_OFFSET", "shift this node's clock by a duration, e.g. 300ms or -300ms", false},
	{"log-format", "PAYROLL_LOG_FORMAT", "text or json", false},
	{"for", "PAYROLL_FOR", "exit cleanly after this long, e.g. 10s (default: run until a signal)", false},
	{"admin-addr", "PAYROLL_ADMIN_ADDR", "serve /scheduledtasks, /locks and /healthz on this address, e.g. 127.0.0.1:8081", false},
	{"metrics", "PAYROLL_METRICS", "expose Prometheus metrics at /metrics on --admin-addr", true},
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
	cfg, err := config.Load[Config](config.LoadOptions{
		EnvPrefix: "PAYROLL_",
		Env: func(name string) (string, bool) {
			if v, ok := given[name]; ok {
				return v, true
			}
			return os.LookupEnv(name)
		},
	})
	if err != nil {
		return err
	}
	if cfg.Payroll.Metrics && cfg.Payroll.AdminAddr == "" {
		return errors.New("payroll: --metrics ($PAYROLL_METRICS) needs --admin-addr ($PAYROLL_ADMIN_ADDR): /metrics is served there")
	}
	if cfg.Payroll.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Payroll.For)
		defer cancel()
	}
	err = app.Run(ctx, options(cfg, stderr)...)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// options composes the example: its configuration, the lock driver it
// chose, its clock, and its controller.
func options(cfg Config, logOut io.Writer) []fx.Option {
	opts := []fx.Option{
		fx.Supply(cfg, cfg.Framework, config.ValuesOf(cfg)),
		fx.Supply(fx.Annotate(logOut, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		fx.Supply(fx.Annotate(clockwork.Clock(offsetClock{clockwork.NewRealClock(), cfg.Payroll.ClockOffset}), fx.As(new(clockwork.Clock)))),
		annotations.Provide(NewPayrollController),
		scheduling.Provide(reconcile),
	}
	opts = append(opts, operations(cfg.Payroll)...)
	if cfg.Redis.URL == "" {
		return append(opts, fx.Supply(fx.Annotate(&memoryLedger{}, fx.As(new(ledger)))))
	}
	return append(opts,
		redislocks.Module,
		fx.Provide(func(c redis.UniversalClient) ledger { return newRedisLedger(c, cfg.Redis.Namespace) }),
	)
}

// operations turns on the admin endpoints and metrics that cfg asks for.
// Metrics go to a registry of the example's own, served by the admin server.
func operations(cfg Payroll) []fx.Option {
	var opts []fx.Option
	if cfg.AdminAddr != "" {
		opts = append(opts, fx.Supply(admin.Config{Addr: cfg.AdminAddr}), admin.Module)
	}
	if cfg.Metrics {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts = append(opts,
			fx.Supply(fx.Annotate(reg, fx.As(new(prometheus.Registerer)))),
			metrics.Module,
			admin.Mount("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		)
	}
	return opts
}
