package config_test

import (
	"fmt"
	"time"

	"go.uber.org/fx"

	"github.com/ndigo/ndigo/config"
)

// Server is a section that some module reads on its own, as app.Module
// reads app.Framework.
type Server struct {
	Addr     string           `yaml:"addr" default:":8080" validate:"hostname_port"`
	Upstream config.SecretURL `yaml:"upstream" validate:"required,url"`
}

// Config is an application's configuration: a shared section inline,
// beside the application's own.
type Config struct {
	Server  `yaml:",inline"`
	Payroll struct {
		Window time.Duration `yaml:"window" default:"30s" validate:"min=1s"`
		Bank   config.Secret `yaml:"bank-token" validate:"required"`
	} `yaml:"payroll"`
}

func Example() {
	yaml := []byte(`
upstream: https://payroll:s3cret@bank.internal/api
payroll:
  window: 1500
  bank-token: tok-123
`)
	environ := map[string]string{"APP_ADDR": "127.0.0.1:9090"}
	opts := config.LoadOptions{
		Path:      "app.yaml", // names Data in error messages
		Data:      yaml,
		EnvPrefix: "APP_",
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
	fmt.Println(cfg.Addr, cfg.Payroll.Window)
	fmt.Printf("%+v\n", cfg.Server)
	fmt.Println(cfg.Payroll.Bank, cfg.Payroll.Bank.Reveal())

	environ["APP_ADDR"] = "localhost"
	_, err = config.Load[Config](opts)
	fmt.Println(err)
	// Output:
	// 127.0.0.1:9090 1.5s
	// {Addr:127.0.0.1:9090 Upstream:https://payroll:xxxxx@bank.internal/api}
	// [REDACTED] tok-123
	// config: addr "localhost" (env APP_ADDR): must be host:port
}

func ExampleModule() {
	app := fx.New(
		fx.NopLogger,
		config.Module[Config](config.LoadOptions{Data: []byte("upstream: https://bank\npayroll:\n  bank-token: t\n")}),
		// A module that reads only the Server section asks for Server,
		// which config.Module provides because Config embeds it.
		fx.Invoke(func(s Server) { fmt.Println(s.Addr) }),
	)
	fmt.Println(app.Err())
	// Output:
	// :8080
	// <nil>
}
