package redislocks_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

func frameworkWith(url string) fx.Option {
	return fx.Supply(redislocks.ModuleConfig{URL: url, Namespace: "module-test"})
}

// The module replaces the in-process default app-wide with a Redis driver on
// a client it owns: open while the app runs, closed when it stops.
func TestModuleOverridesDefaultDriver(t *testing.T) {
	srv := redistest.Start(t)
	var d locks.Driver
	var c redis.UniversalClient
	app := fxtest.New(t, locks.Module, frameworkWith("redis://"+srv.Addr()), redislocks.Module,
		fx.Module("consumer", fx.Populate(&d)), fx.Populate(&c))
	app.RequireStart()
	if _, ok := d.(*redislocks.Driver); !ok {
		t.Fatalf("driver %T, want *redislocks.Driver", d)
	}
	ctx := context.Background()
	l, err := d.Acquire(ctx, "module", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := srv.Client().Exists(ctx, "ndigo:{module-test:module}:lock").Result(); err != nil || n != 1 {
		t.Fatalf("lease key in Redis: %d, %v; want it there", n, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	app.RequireStop()
	if err := c.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Ping after stop = %v, want redis.ErrClosed", err)
	}
}

// An unreachable Redis fails startup naming the address, never the password.
func TestModuleUnreachableRedisFailsStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	app := fx.New(fx.NopLogger, locks.Module, frameworkWith("redis://:hunter2@"+addr), redislocks.Module,
		fx.Invoke(func(locks.Driver) {}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = app.Start(ctx)
	if !errors.Is(err, redislocks.ErrRedis) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Start = %v; want ErrRedis naming %s without the password", err, addr)
	}
}

// A malformed URL fails fx.New naming the URL, never the password.
func TestModuleBadURL(t *testing.T) {
	app := fx.New(fx.NopLogger, locks.Module, frameworkWith("redis://:hunter2@localhost:notaport"), redislocks.Module,
		fx.Invoke(func(locks.Driver) {}))
	err := app.Err()
	if !errors.Is(err, locks.ErrInvalid) || !strings.Contains(err.Error(), "Redis URL redis://[REDACTED]@localhost:notaport") ||
		strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("fx.New = %v; want ErrInvalid naming the URL without the password", err)
	}
}

// A Module nested in another fx.Module decorates locks.Driver for that
// module only: the scheduler at the root would run on in-process locks, so
// startup fails instead, naming both drivers and the fix. At the root, the
// scheduler runs on the Redis driver.
func TestModuleNestedFailsStartup(t *testing.T) {
	srv := redistest.Start(t)
	nested := fx.New(fx.NopLogger, locks.Module, scheduling.Module, frameworkWith("redis://"+srv.Addr()),
		fx.Module("infra", redislocks.Module))
	err := nested.Start(context.Background())
	for _, want := range []string{"redislocks (namespace module-test)", "locks.InProcessDriver",
		"must be included at the root of the application"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start with redislocks.Module nested: %v; want it to name %q", err, want)
		}
	}
	var s *scheduling.Scheduler
	root := fxtest.New(t, locks.Module, scheduling.Module, frameworkWith("redis://"+srv.Addr()),
		redislocks.Module, fx.Populate(&s))
	root.RequireStart()
	if got := s.DriverName(); got != "redislocks (namespace module-test)" {
		t.Fatalf("scheduler's driver %q", got)
	}
	root.RequireStop()
}

// Whatever the URL's shape, a URL go-redis cannot parse fails the app with
// a message that names the setting and never the password.
func TestModuleNeverPrintsThePassword(t *testing.T) {
	const secret = "Pa55w0rd"
	for _, u := range []string{
		"redis://:?" + secret + "@127.0.0.1:6379",
		"redis://user:" + secret + "@127.0.0.1:6379/notadb",
		"redis://:" + secret + "/x@127.0.0.1:6379",
		"redis://:" + secret + "@127.0.0.1:99999",
		"http://:" + secret + "@127.0.0.1:6379",
	} {
		app := fx.New(fx.NopLogger, locks.Module, frameworkWith(u), redislocks.Module, fx.Invoke(func(locks.Driver) {}))
		err := app.Err()
		if err == nil {
			err = app.Start(context.Background())
			_ = app.Stop(context.Background())
		}
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "redis") {
			t.Errorf("URL %q: %v", strings.ReplaceAll(u, secret, "<secret>"), err)
		}
	}
}

// A Redis that answers but refuses the connection's setup (a database index
// out of range) is reported as such, not as unreachable.
func TestModuleBadDatabaseIsNotUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	app := fx.New(fx.NopLogger, locks.Module, frameworkWith("redis://"+srv.Addr()+"/99"), redislocks.Module,
		fx.Invoke(func(locks.Driver) {}))
	err := app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused the connection's setup") || strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("start with database 99: %v", err)
	}
}

// ModuleConfig never shows the URL's password, however it is printed.
func TestModuleConfigRedactsPassword(t *testing.T) {
	c := redislocks.ModuleConfig{URL: "redis://:hunter2@h:6379/0", Namespace: "prod"}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "redis", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "h:6379") || !strings.Contains(s, "prod") {
			t.Errorf("printed %q: want the host and namespace, never the password", s)
		}
	}
}
