package app_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/scheduling"
)

type payrollConfig struct {
	app.Framework `yaml:",inline"`
	Payroll       struct {
		Cron string `yaml:"cron"`
	} `yaml:"payroll"`
}

type PayrollController struct {
	_ annotations.Scheduled `method:"CloseBooks" cron:"${payroll.cron}"`
}

func (*PayrollController) CloseBooks(context.Context) error { return nil }

// A bad cron expression read from the configuration through a tag's
// placeholder fails startup with an error naming the setting and where it
// was set: the file and line, or the environment variable.
func TestBadPlaceholderValueNamesItsSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte("node: n1\npayroll:\n  cron: every 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts config.LoadOptions
		want string
	}{
		{"file", config.LoadOptions{Path: path, EnvPrefix: "APP_", Env: func(string) (string, bool) { return "", false }},
			`PayrollController.CloseBooks: option cron = "every 5s" (from ${payroll.cron}, set by ` + path + `:3): must be a valid cron expression (`},
		{"env", config.LoadOptions{Data: []byte("node: n1\n"), EnvPrefix: "APP_", Env: func(name string) (string, bool) {
			return "every 5s", name == "APP_PAYROLL_CRON"
		}}, `PayrollController.CloseBooks: option cron = "every 5s" (from ${payroll.cron}, set by env APP_PAYROLL_CRON): must be a valid cron expression (`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := app.Run(context.Background(), logTo(io.Discard),
				config.Module[payrollConfig](c.opts),
				annotations.Provide(func() *PayrollController { return &PayrollController{} }),
			)
			if !errors.Is(err, scheduling.ErrInvalidSpec) {
				t.Fatalf("Run = %v; want ErrInvalidSpec", err)
			}
			for _, want := range []string{c.want, `did you mean "@every 5s"?`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Run = %v\nwant it to contain %s", err, want)
				}
			}
		})
	}
}
