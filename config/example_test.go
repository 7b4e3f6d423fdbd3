package config_test

import (
	"fmt"
	"time"

	"github.com/ndigo/ndigo/config"
	"go.uber.org/fx"
)

// Config is an application's configuration: the framework's settings inline,
// beside the application's own section.
type Config struct {
	config.Framework `yaml:",inline"`
	Payroll          struct {
		Window time.Duration `yaml:"window" default:"30s" validate:"min=1s"`
		Bank   config.Secret `yaml:"bank-token" validate:"required"`
	} `yaml:"payroll"`
}

func Example() {
	yaml := []byte(`
node: billing-1
redis:
  url: redis://:s3cret@redis.internal:6379/0
  namespace: staging
payroll:
  window: 1500
  bank-token: tok-123
`)
	environ := map[string]string{"NDIGO_REDIS_NAMESPACE": "prod"}
	opts := config.LoadOptions{
		Path:      "app.yaml", // names Data in error messages
		Data:      yaml,
		EnvPrefix: "NDIGO_",
		Env: func(name string) (string, bool) { // nil reads the process environment
			v, ok := environ[name]
			return v, ok
		},
	}

	cfg, err := config.Load[Config](opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Node, cfg.Redis.Namespace, cfg.Log.Level, cfg.Payroll.Window)
	fmt.Printf("%+v\n", cfg.Redis)
	fmt.Println(cfg.Payroll.Bank, cfg.Payroll.Bank.Reveal())

	environ["NDIGO_REDIS_NAMESPACE"] = "pr od"
	_, err = config.Load[Config](opts)
	fmt.Println(err)
	// Output:
	// billing-1 prod info 1.5s
	// {URL:redis://:xxxxx@redis.internal:6379/0 Namespace:prod}
	// [REDACTED] tok-123
	// config: redis.namespace "pr od" (env NDIGO_REDIS_NAMESPACE): must match [A-Za-z0-9_.-]{1,64}
}

func ExampleModule() {
	app := fx.New(
		fx.NopLogger,
		config.Module[Config](config.LoadOptions{Data: []byte("node: n1\npayroll:\n  bank-token: t\n")}),
		// ndigo's own modules ask for config.Framework, which the module
		// provides because Config embeds it.
		fx.Invoke(func(fw config.Framework) { fmt.Println(fw.Node, fw.Log.Format) }),
	)
	fmt.Println(app.Err())
	// Output:
	// n1 text
	// <nil>
}
