package pglocks_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/scheduling"
)

func moduleConfig(url, ns string) fx.Option {
	return fx.Supply(pglocks.ModuleConfig{URL: url, Namespace: ns})
}

// The module replaces the in-process default app-wide with a PostgreSQL
// driver on a pool it owns: the schema made on start, the pool open while
// the app runs and closed when it stops.
func TestModuleOverridesDefaultDriver(t *testing.T) {
	ns := unique("module")
	var d locks.Driver
	var p *pgxpool.Pool
	app := fxtest.New(t, locks.Module, moduleConfig(shared.URL(), ns), pglocks.Module,
		fx.Module("consumer", fx.Populate(&d)), fx.Populate(&p))
	app.RequireStart()
	if _, ok := d.(*pglocks.Driver); !ok {
		t.Fatalf("driver %T, want *pglocks.Driver", d)
	}
	ctx := context.Background()
	l, err := d.Acquire(ctx, "module", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var token int64
	if err := p.QueryRow(ctx, "SELECT token FROM ndigo_locks WHERE ns = $1 AND key = 'module'", ns).Scan(&token); err != nil || uint64(token) != l.Token() {
		t.Fatalf("lock row: token %d, %v; want %d", token, err, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	app.RequireStop()
	if err := p.Ping(ctx); err == nil {
		t.Fatal("Ping after stop succeeded, want the pool closed")
	}
}

// An unreachable database fails startup naming the address, never the
// password.
func TestModuleUnreachableDatabaseFailsStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	app := fx.New(fx.NopLogger, locks.Module, moduleConfig("postgres://u:hunter2@"+addr+"/db?connect_timeout=5", "ns"),
		pglocks.Module, fx.Invoke(func(locks.Driver) {}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = app.Start(ctx)
	if !errors.Is(err, pglocks.ErrDatabase) || !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Start = %v; want ErrDatabase naming 127.0.0.1 without the password", err)
	}
}

// Whatever the URL's shape, one pgx cannot use (or a keyword/value string,
// whose password could not be redacted) fails the app with a message that
// never shows the password.
func TestModuleNeverPrintsThePassword(t *testing.T) {
	const secret = "Pa55w0rd"
	for _, u := range []string{
		"postgres://u:" + secret + "@127.0.0.1:notaport/db",
		"postgres://u:?" + secret + "@127.0.0.1:1/db",
		"postgres://u:" + secret + "@127.0.0.1:5432/db?sslmode=bogus",
		"host=127.0.0.1 password=" + secret,
		"http://u:" + secret + "@127.0.0.1:5432/db",
	} {
		app := fx.New(fx.NopLogger, locks.Module, moduleConfig(u, "ns"), pglocks.Module, fx.Invoke(func(locks.Driver) {}))
		err := app.Err()
		if err == nil {
			err = app.Start(context.Background())
			_ = app.Stop(context.Background())
		}
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "URL") {
			t.Errorf("URL %q: %v", strings.ReplaceAll(u, secret, "<secret>"), err)
		}
	}
}

// A Module nested in another fx.Module decorates locks.Driver for that
// module only: startup fails naming the fix. At the root, the scheduler
// runs on the PostgreSQL driver.
func TestModuleNestedFailsStartup(t *testing.T) {
	ns := unique("nested")
	nested := fx.New(fx.NopLogger, locks.Module, scheduling.Module, moduleConfig(shared.URL(), ns),
		fx.Module("infra", pglocks.Module))
	err := nested.Start(context.Background())
	_ = nested.Stop(context.Background())
	for _, want := range []string{"pglocks (namespace " + ns + ")", "locks.InProcessDriver", "must be included at the root of the application"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start with pglocks.Module nested: %v; want it to name %q", err, want)
		}
	}
	var s *scheduling.Scheduler
	root := fxtest.New(t, locks.Module, scheduling.Module, moduleConfig(shared.URL(), ns), pglocks.Module, fx.Populate(&s))
	root.RequireStart()
	if got := s.DriverName(); got != "pglocks (namespace "+ns+")" {
		t.Fatalf("scheduler's driver %q", got)
	}
	root.RequireStop()
}

// ModuleConfig never shows the URL's password, however it is printed.
func TestModuleConfigRedactsPassword(t *testing.T) {
	if s := fmt.Sprint(pglocks.ModuleConfig{URL: "host=db password=hunter2"}); strings.Contains(s, "hunter2") {
		t.Errorf("a keyword/value string printed as %q", s)
	}
	c := pglocks.ModuleConfig{URL: "postgres://u:hunter2@db:5432/app", Namespace: "prod"}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "postgres", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, "db:5432") || !strings.Contains(s, "prod") {
			t.Errorf("printed %q: want the host and namespace, never the password", s)
		}
	}
}
