package config_test

import (
	"testing"
	"time"

	"github.com/ndigo/ndigo/config"
)

func TestValuesOf(t *testing.T) {
	type job struct {
		Cron  string        `yaml:"cron"`
		Every time.Duration `yaml:"every"`
	}
	type cfg struct {
		config.Framework `yaml:",inline"`
		Job              job  `yaml:"job"`
		Opt              *job `yaml:"opt"`
	}
	c, err := config.Load[cfg](config.LoadOptions{Data: []byte(`
redis:
  url: redis://:hunter2@localhost:6379
  namespace: prod
job:
  cron: "@every 5s"
  every: 1500
`)})
	if err != nil {
		t.Fatal(err)
	}
	values := config.ValuesOf(c)
	for path, want := range map[string]string{
		"job.cron":        "@every 5s",
		"job.every":       "1.5s",
		"redis.namespace": "prod",
		"log.format":      "text",
	} {
		if got, ok := values(path); !ok || got != want {
			t.Errorf("values(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"redis.url", "job", "opt.cron", "nope"} {
		if got, ok := values(path); ok {
			t.Errorf("values(%q) = %q; want no value", path, got)
		}
	}
	if _, ok := config.ValuesOf(42)("x"); ok {
		t.Error("values of a non-struct found something")
	}
}
