package config

import (
	"errors"
	"testing"
)

func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"",
		"node: a\nredis:\n  url: redis://:pw@h:6379/0\n  namespace: prod\nlog:\n  format: json\n  level: debug\n",
		"payroll:\n  window: 500\n  retries: 3\n  bank:\n    host: b:1\n  accounts:\n    - name: a\n      grace: 1s\n  limits:\n    eur: 7\n",
		"payroll:\n  window: soon\n  retries: many\n  limits:\n    eur: -1\n",
		"redis: plain\nlog: [a]\n",
		"base: &b\n  retries: 1\npayroll:\n  <<: *b\n",
		"payroll: &p\n  accounts:\n    - *p\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n",
		"- 1\n- 2\n",
		"node: a\n---\nnode: b\n",
		"node: [\n",
		"payroll:\n  window: 99999999999999999999\n",
		"redis:\n  url: \"redis://u:p w@h\"\n",
		"!!binary aGk=\n",
		"? [a]\n: b\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load[appConfig](LoadOptions{Data: data, Env: noEnv()})
		if err != nil {
			if cfg.Node != "" || cfg.Payroll.Bank != nil {
				t.Fatalf("error %v came with a non-zero value %+v", err, cfg)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error for bad YAML does not wrap ErrInvalid: %v", err)
			}
			return
		}
		// A loaded value has passed validation.
		if cfg.Redis.Namespace == "" || (cfg.Log.Format != "text" && cfg.Log.Format != "json") {
			t.Fatalf("Load accepted an invalid value: %+v", cfg.Framework)
		}
	})
}
