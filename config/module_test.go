package config

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/dig"
	"go.uber.org/fx"
)

func TestModuleProvidesConfigAndFramework(t *testing.T) {
	var (
		cfg    appConfig
		fw     Framework
		values Values
	)
	app := fx.New(
		fx.NopLogger,
		Module[appConfig](LoadOptions{
			Data:      []byte("node: n1\nredis:\n  namespace: prod\npayroll:\n  retries: 4\n"),
			EnvPrefix: "NDIGO_",
			Env:       env(map[string]string{"NDIGO_LOG_FORMAT": "json"}),
		}),
		fx.Populate(&cfg, &fw, &values),
	)
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if cfg.Payroll.Retries != 4 || cfg.Node != "n1" {
		t.Errorf("appConfig = %+v", cfg)
	}
	want := Framework{Node: "n1", Redis: Redis{Namespace: "prod"}, Log: Log{Format: "json", Level: "info", SkipLevel: "info"}}
	if fw != want {
		t.Errorf("Framework = %+v, want %+v", fw, want)
	}
	if v, ok := values("log.format"); !ok || v != "json" {
		t.Errorf(`Values("log.format") = %q, %v; want "json"`, v, ok)
	}
}

func TestModuleOfFrameworkItself(t *testing.T) {
	var fw Framework
	app := fx.New(fx.NopLogger, Module[Framework](LoadOptions{Data: []byte("node: solo\n"), Env: noEnv()}), fx.Populate(&fw))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if fw.Node != "solo" || fw.Redis.Namespace != "default" {
		t.Errorf("Framework = %+v", fw)
	}
}

func TestModuleWithoutFramework(t *testing.T) {
	type own struct {
		Name string `yaml:"name" validate:"required"`
	}
	var got own
	app := fx.New(fx.NopLogger, Module[own](LoadOptions{Data: []byte("name: x\n"), Env: noEnv()}), fx.Populate(&got))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if got.Name != "x" {
		t.Errorf("own = %+v", got)
	}
	app = fx.New(fx.NopLogger, Module[own](LoadOptions{Data: []byte("name: x\n"), Env: noEnv()}), fx.Invoke(func(Framework) {}))
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "missing type: config.Framework") {
		t.Errorf("Framework from a type that does not embed it: err = %v, want missing type", err)
	}
}

func TestModuleFailsFxNewOnBadConfig(t *testing.T) {
	// Nothing depends on the configuration: the module must still load it
	// during fx.New, so that a bad file fails startup at once.
	app := fx.New(fx.NopLogger, Module[appConfig](LoadOptions{
		Path: "app.yaml",
		Data: []byte("redis:\n  url: redis://:" + password + "@h:1\n  namespace: pr od\n"),
		Env:  noEnv(),
	}))
	err := app.Err()
	if err == nil {
		t.Fatal("fx.New succeeded on a bad configuration")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false; the app needs it to tell bad configuration apart", err)
	}
	if root := dig.RootCause(err); !strings.HasPrefix(root.Error(), "config: redis.namespace") {
		t.Errorf("dig.RootCause = %v, want the config error itself, for a short message at startup", root)
	}
	if want := `config: redis.namespace "pr od" (app.yaml:3): must match [A-Za-z0-9_.-]{1,64}`; !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %q", err, want)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("err shows the password: %v", err)
	}
}

// Module's Sources say where each setting was set: the file and line, the
// environment variable (over the file), the default tag, or nowhere.
func TestModuleProvidesSources(t *testing.T) {
	path := writeFile(t, "node: n1\npayroll:\n  retries: 4\n  owner: file\n")
	var sources Sources
	app := fx.New(fx.NopLogger,
		Module[appConfig](LoadOptions{Path: path, EnvPrefix: "NDIGO_",
			Env: env(map[string]string{"NDIGO_LOG_FORMAT": "json", "PAYROLL_OWNER": "env"})}),
		fx.Populate(&sources),
	)
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"node":            path + ":1",
		"payroll.retries": path + ":3",
		"payroll.owner":   "env PAYROLL_OWNER",
		"log.format":      "env NDIGO_LOG_FORMAT",
		"payroll.window":  "the default tag of Payroll.Window",
		"payroll.ratio":   "no file, variable or default: the zero value",
		"payroll.api-key": "no file, variable or default: the zero value",
	} {
		if got, ok := sources.Source(key); !ok || got != want {
			t.Errorf("Source(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	for _, key := range []string{"payroll", "payroll.bank", "nope"} {
		if got, ok := sources.Source(key); ok {
			t.Errorf("Source(%q) = %q; want no setting", key, got)
		}
	}
	if _, ok := Sources(nil).Source("node"); ok {
		t.Error("a nil Sources knows a setting")
	}
	// Without a file name, the line alone.
	app = fx.New(fx.NopLogger, Module[appConfig](LoadOptions{Data: []byte("node: n1\n"), Env: noEnv()}), fx.Populate(&sources))
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := sources.Source("node"); got != "line 1 of the YAML data" {
		t.Errorf(`Source("node") = %q; want "line 1 of the YAML data"`, got)
	}
}
