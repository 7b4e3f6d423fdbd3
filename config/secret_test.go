package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const password = "hunter2-pw"

func secretConfig(t *testing.T) appConfig {
	t.Helper()
	cfg, err := Load[appConfig](LoadOptions{
		Data: []byte("node: billing-1\nredis:\n  url: redis://app:" + password + "@redis.internal:6379/2\n  namespace: prod\npayroll:\n  owner: ops-team\n  api-key: " + password + "-key\n"),
		Env:  noEnv(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertRedacted fails if out shows a password, or lost the settings around
// them, which redaction must leave readable.
func assertRedacted(t *testing.T, how, out string) {
	t.Helper()
	if strings.Contains(out, password) {
		t.Errorf("%s shows the password:\n%s", how, out)
	}
	for _, want := range []string{"billing-1", "redis.internal:6379/2", "app:xxxxx@", "prod", "ops-team", "[REDACTED]"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s lost %q:\n%s", how, want, out)
		}
	}
}

func TestRedactionWhenPrinted(t *testing.T) {
	cfg := secretConfig(t)
	if cfg.Redis.URL.Reveal() != "redis://app:"+password+"@redis.internal:6379/2" || cfg.Payroll.APIKey.Reveal() != password+"-key" {
		t.Fatalf("Reveal lost the values: %q %q", cfg.Redis.URL.Reveal(), cfg.Payroll.APIKey.Reveal())
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		assertRedacted(t, "fmt "+verb, fmt.Sprintf(verb, cfg))
	}
	assertRedacted(t, "fmt %+v of a pointer", fmt.Sprintf("%+v", &cfg))
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertRedacted(t, "json.Marshal", string(j))
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertRedacted(t, "yaml.Marshal", string(y))
}

func TestRedactionWhenLogged(t *testing.T) {
	cfg := secretConfig(t)
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("config", "cfg", cfg)
		log.Info("config", "url", cfg.Redis.URL, "key", cfg.Payroll.APIKey, "ptr", &cfg)
		assertRedacted(t, "slog "+name+" handler", buf.String())
	}
}

func TestSecretStrings(t *testing.T) {
	tests := []struct {
		in   fmt.Stringer
		want string
	}{
		{Secret(""), ""},
		{Secret("x"), "[REDACTED]"},
		{SecretURL(""), ""},
		{SecretURL("redis://h:6379/0"), "redis://h:6379/0"},
		{SecretURL("redis://"), "redis://"},
		{SecretURL("redis://user@h"), "redis://user@h"},
		{SecretURL("redis://:pw@h:1"), "redis://:xxxxx@h:1"},
		{SecretURL("rediss://u:p%40ss@h"), "rediss://u:xxxxx@h"},
		// Passwords with unescaped characters a URL parser reads differently.
		{SecretURL("redis://u:12/pw@h"), "redis://[REDACTED]@h"},
		{SecretURL("redis://u:p w@h"), "redis://[REDACTED]@h"},
		{SecretURL("redis://u:p?w@h"), "redis://[REDACTED]@h"},
		{SecretURL("u:pw@h"), "[REDACTED]@h"},
		{SecretURL("redis://u:p@ss@h"), "redis://u:xxxxx@h"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%T.String() = %q, want %q", tt.in, got, tt.want)
		}
		if got := fmt.Sprintf("%#v", tt.in); strings.Contains(got, "pw") || strings.Contains(got, "p%40ss") {
			t.Errorf("%%#v = %q shows the password", got)
		}
	}
}

func TestRedactionInErrors(t *testing.T) {
	tests := []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"bad URL scheme from file", LoadOptions{Path: "app.yaml", Data: []byte("redis:\n  url: http://u:" + password + "@h:1\n")},
			`config: redis.url "http://u:xxxxx@h:1" (app.yaml:2): must be a redis:// or rediss:// URL`},
		{"unparsable URL from env", LoadOptions{Env: env(map[string]string{"N_REDIS_URL": "redis://u:" + password + "/x@h"})},
			`config: redis.url "redis://[REDACTED]@h" (env N_REDIS_URL): must be a redis:// or rediss:// URL`},
		{"secret failing a rule", LoadOptions{Env: env(map[string]string{"N_PAYROLL_API_KEY": "hunter"})},
			`config: payroll.api-key "[REDACTED]" (env N_PAYROLL_API_KEY): must be at least 8 characters long`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.EnvPrefix = "N_"
			if tt.opts.Env == nil {
				tt.opts.Env = noEnv()
			}
			_, err := Load[appConfig](tt.opts)
			wantErrors(t, err, tt.want)
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "hunter") {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}
