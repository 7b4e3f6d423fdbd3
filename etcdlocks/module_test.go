package etcdlocks_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// The module replaces the in-process default lock driver and task state
// app-wide with etcd's, on a client it owns: open while the app runs,
// closed when it stops.
func TestModuleOverridesTheDefaults(t *testing.T) {
	c := etcdtest.Start(t)
	var d locks.Driver
	var st taskstate.Store
	app := fxtest.New(t, locks.Module, taskstate.Module,
		fx.Supply(etcdlocks.ModuleConfig{Endpoints: c.Endpoints(), Namespace: "module-test", DialTimeout: 2 * time.Second}),
		etcdlocks.Module, fx.Module("consumer", fx.Populate(&d, &st)))
	app.RequireStart()
	if _, ok := d.(*etcdlocks.Driver); !ok {
		t.Fatalf("driver %T, want *etcdlocks.Driver", d)
	}
	if _, ok := st.(*etcdlocks.Store); !ok {
		t.Fatalf("task state %T, want *etcdlocks.Store", st)
	}
	ctx := context.Background()
	key := fmt.Sprintf("module-%d", time.Now().UnixNano())
	l, err := d.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Client().Get(ctx, "ndigo/module-test/lock/k/"+key); err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the lock key in etcd: %v, %v; want it there", got, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	app.RequireStop()
	if _, err := d.Acquire(ctx, key, time.Minute); err == nil {
		t.Fatal("Acquire after the app stopped succeeded; want the closed client's error")
	}
}

// Bad settings fail startup naming the setting, the value and the rule; an
// unreachable etcd names its endpoints, never the password.
func TestModuleRefusesBadSettings(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		cfg  etcdlocks.ModuleConfig
		want string
	}{
		{etcdlocks.ModuleConfig{Namespace: "n"}, "etcd.endpoints is empty"},
		{etcdlocks.ModuleConfig{Endpoints: []string{"a:1"}, Namespace: "n", Password: "pw"}, "etcd.password is set without etcd.username"},
		{etcdlocks.ModuleConfig{Endpoints: []string{"a:1"}, Namespace: "n", CertFile: "c.pem"}, `etcd.cert-file "c.pem" and etcd.key-file "" must be set together`},
		{etcdlocks.ModuleConfig{Endpoints: []string{"a 1"}, Namespace: "n"}, `etcd.endpoints[0] "a 1"`},
		{etcdlocks.ModuleConfig{Endpoints: []string{"a:1"}, Namespace: "n", CAFile: "/nonexistent/ca.pem"}, `ca-file "/nonexistent/ca.pem"`},
		{etcdlocks.ModuleConfig{Endpoints: []string{"a:1"}, Namespace: "a/b"}, `has '/' at byte 1`},
		{etcdlocks.ModuleConfig{Endpoints: []string{dead}, Namespace: "n", Username: "u", Password: "s3cret", DialTimeout: 200 * time.Millisecond},
			"cannot reach etcd at " + dead},
		{etcdlocks.ModuleConfig{Endpoints: []string{dead}, Namespace: "n", DialTimeout: 200 * time.Millisecond}, "no quorum of etcd at " + dead},
	} {
		app := fx.New(fx.NopLogger, locks.Module, taskstate.Module, fx.Supply(c.cfg), etcdlocks.Module, fx.Invoke(func(locks.Driver) {}))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := app.Err()
		if err == nil {
			err = app.Start(ctx)
			_ = app.Stop(context.Background())
		}
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("app with %v: err = %v; want it to name %q, without the password", c.cfg, err, c.want)
		}
		if c.cfg.Password != "" && !strings.Contains(fmt.Sprint(c.cfg), "[REDACTED]") {
			t.Errorf("ModuleConfig prints as %v; want the password redacted", c.cfg)
		}
	}
}

// In an application of package app, the module reads the configuration's
// etcd section (app.Etcd) when the graph has no ModuleConfig of the
// application's own, and the scheduler runs on etcd's driver and task
// state; an app.Backend asked for meanwhile holds no client.
func TestModuleReadsTheAppsEtcdSection(t *testing.T) {
	c := etcdtest.Start(t)
	var d locks.Driver
	var st taskstate.Store
	var b app.Backend
	var logs bytes.Buffer
	fw := app.Framework{Etcd: app.Etcd{Endpoints: c.Endpoints(), Namespace: "app-section", History: 7, DialTimeout: 2 * time.Second}}
	a := app.New(fx.Supply(fw), etcdlocks.Module, fx.Populate(&d, &st, &b),
		fx.Supply(fx.Annotate(io.Writer(&logs), fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if ed, ok := d.(*etcdlocks.Driver); !ok || !strings.Contains(ed.String(), "app-section") {
		t.Fatalf("driver %v (%T), want an *etcdlocks.Driver in namespace app-section", d, d)
	}
	if _, ok := st.(*etcdlocks.Store); !ok {
		t.Fatalf("task state %T, want *etcdlocks.Store", st)
	}
	if b.Redis != nil || b.Postgres != nil {
		t.Fatalf("Backend %+v, want neither client: the module's etcd client is in the graph", b)
	}
	l, err := d.Acquire(ctx, "section", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if got, err := c.Client().Get(ctx, "ndigo/app-section/lock/k/section"); err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the lock key in etcd: %v, %v; want it there", got, err)
	}
}

// The etcd section with another store's URL, or without etcdlocks.Module
// in the application, fails startup saying which settings and what to do.
func TestAppRefusesEtcdSectionWithoutTheModuleOrWithAnotherStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		fw     app.Framework
		module bool
		want   string
	}{
		{"no module", app.Framework{Etcd: app.Etcd{Endpoints: []string{"127.0.0.1:1"}, Namespace: "n"}}, false,
			"etcd.endpoints is set (127.0.0.1:1), but the application does not include etcdlocks.Module"},
		{"and redis", app.Framework{Etcd: app.Etcd{Endpoints: []string{"127.0.0.1:1"}, Namespace: "n"},
			Redis: app.Redis{URL: "redis://:s3cret@127.0.0.1:1", Namespace: "n"}}, true,
			"names both redis.url (redis://:xxxxx@127.0.0.1:1) and etcd.endpoints (127.0.0.1:1)"},
	} {
		opts := []fx.Option{fx.Supply(c.fw), fx.Invoke(func(locks.Driver) {}),
			fx.Supply(fx.Annotate(io.Discard, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`)))}
		if c.module {
			opts = append(opts, etcdlocks.Module)
		}
		err := app.New(opts...).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: err = %v; want it to name %q, without the password", c.name, err, c.want)
		}
	}
}
