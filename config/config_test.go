package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env returns a lookup over m, so tests never read the process environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type appConfig struct {
	Framework `yaml:",inline"`
	Payroll   payroll `yaml:"payroll"`
}

type payroll struct {
	Window   time.Duration     `yaml:"window" default:"30s" validate:"min=1s"`
	Retries  int               `yaml:"retries" default:"3" validate:"gte=0,lte=10"`
	Enabled  bool              `yaml:"enabled"`
	Ratio    float64           `yaml:"ratio"`
	Owner    string            `yaml:"owner" env:"PAYROLL_OWNER"`
	Internal string            `yaml:"internal" env:"-"`
	APIKey   Secret            `yaml:"api-key" validate:"omitempty,min=8"`
	Bank     *bank             `yaml:"bank"`
	Accounts []account         `yaml:"accounts" validate:"dive"`
	Limits   map[string]uint16 `yaml:"limits"`
}

type bank struct {
	Host    string        `yaml:"host" validate:"required,hostname_port"`
	Timeout time.Duration `yaml:"timeout"`
}

type account struct {
	Name  string        `yaml:"name" validate:"required"`
	Grace time.Duration `yaml:"grace"`
}

func noEnv() func(string) (string, bool) { return env(nil) }

func TestLoadFileOnly(t *testing.T) {
	path := writeFile(t, `
node: billing-1
redis:
  url: redis://:s3cret@redis.internal:6379/0
  namespace: prod
log:
  format: json
  level: debug
payroll:
  window: 1m30s
  retries: 5
  enabled: true
  ratio: 0.25
  owner: ops
  api-key: abcdefgh12
  bank:
    host: bank.internal:443
    timeout: 750
  accounts:
    - name: main
      grace: 250
    - name: spare
      grace: 1s
  limits:
    eur: 100
`)
	cfg, err := Load[appConfig](LoadOptions{Path: path, EnvPrefix: "NDIGO_", Env: noEnv()})
	if err != nil {
		t.Fatal(err)
	}
	want := Framework{
		Node:  "billing-1",
		Redis: Redis{URL: "redis://:s3cret@redis.internal:6379/0", Namespace: "prod"},
		Log:   Log{Format: "json", Level: "debug", SkipLevel: "info"},
	}
	if cfg.Framework != want {
		t.Errorf("Framework = %+v, want %+v", cfg.Framework, want)
	}
	p := cfg.Payroll
	if p.Window != 90*time.Second || p.Retries != 5 || !p.Enabled || p.Ratio != 0.25 || p.Owner != "ops" || p.APIKey.Reveal() != "abcdefgh12" {
		t.Errorf("Payroll = %+v", p)
	}
	if p.Bank == nil || p.Bank.Host != "bank.internal:443" || p.Bank.Timeout != 750*time.Millisecond {
		t.Errorf("Bank = %+v, want host bank.internal:443 and timeout 750ms", p.Bank)
	}
	if len(p.Accounts) != 2 || p.Accounts[0].Grace != 250*time.Millisecond || p.Accounts[1].Grace != time.Second {
		t.Errorf("Accounts = %+v, want grace 250ms and 1s", p.Accounts)
	}
	if p.Limits["eur"] != 100 {
		t.Errorf("Limits = %v", p.Limits)
	}
}

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Env: noEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Namespace != "default" || cfg.Redis.URL != "" || cfg.Log.Format != "text" || cfg.Log.Level != "info" {
		t.Errorf("Framework defaults = %+v", cfg.Framework)
	}
	if cfg.Payroll.Window != 30*time.Second || cfg.Payroll.Retries != 3 {
		t.Errorf("Payroll defaults = %+v", cfg.Payroll)
	}
	if cfg.Payroll.Bank != nil {
		t.Errorf("Bank = %+v, want nil: defaults must not create an optional section", cfg.Payroll.Bank)
	}
}

func TestLoadFileKeepsDefaultsOfUnsetKeys(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Data: []byte("payroll:\n  bank:\n    host: b:1\nredis:\n  namespace:\n"), Env: noEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Payroll.Bank == nil || cfg.Payroll.Bank.Host != "b:1" {
		t.Errorf("Bank = %+v, want host b:1", cfg.Payroll.Bank)
	}
	if cfg.Redis.Namespace != "default" {
		t.Errorf("namespace = %q, want the default kept by an empty (null) key", cfg.Redis.Namespace)
	}
	if cfg.Payroll.Retries != 3 {
		t.Errorf("retries = %d, want default 3", cfg.Payroll.Retries)
	}
}

func TestLoadEnvOnly(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{EnvPrefix: "NDIGO_", Env: env(map[string]string{
		"NDIGO_NODE":              "n2",
		"NDIGO_REDIS_URL":         "rediss://user:pw@r:6380",
		"NDIGO_REDIS_NAMESPACE":   "staging",
		"NDIGO_LOG_LEVEL":         "warn",
		"NDIGO_PAYROLL_WINDOW":    "2m",
		"NDIGO_PAYROLL_RETRIES":   "7",
		"NDIGO_PAYROLL_ENABLED":   "true",
		"NDIGO_PAYROLL_RATIO":     "1.5",
		"NDIGO_PAYROLL_API_KEY":   "0123456789",
		"NDIGO_PAYROLL_BANK_HOST": "b:1",
		"PAYROLL_OWNER":           "finance",
		"NDIGO_PAYROLL_OWNER":     "ignored: an env tag names the variable exactly",
		"NDIGO_PAYROLL_INTERNAL":  "ignored: env:\"-\"",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != "n2" || cfg.Redis.URL != "rediss://user:pw@r:6380" || cfg.Redis.Namespace != "staging" || cfg.Log.Level != "warn" {
		t.Errorf("Framework = %+v", cfg.Framework)
	}
	p := cfg.Payroll
	if p.Window != 2*time.Minute || p.Retries != 7 || !p.Enabled || p.Ratio != 1.5 || p.APIKey != "0123456789" || p.Owner != "finance" || p.Internal != "" {
		t.Errorf("Payroll = %+v", p)
	}
	if p.Bank == nil || p.Bank.Host != "b:1" {
		t.Errorf("Bank = %+v, want host b:1 set through env", p.Bank)
	}
}

func TestLoadEnvOverridesFile(t *testing.T) {
	path := writeFile(t, "node: from-file\nredis:\n  namespace: file-ns\npayroll:\n  retries: 1\n")
	cfg, err := Load[appConfig](LoadOptions{Path: path, EnvPrefix: "NDIGO_", Env: env(map[string]string{
		"NDIGO_REDIS_NAMESPACE": "env-ns",
		"NDIGO_PAYROLL_RETRIES": "9",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Namespace != "env-ns" || cfg.Payroll.Retries != 9 {
		t.Errorf("namespace %q retries %d, want env-ns and 9 from env", cfg.Redis.Namespace, cfg.Payroll.Retries)
	}
	if cfg.Node != "from-file" {
		t.Errorf("node = %q, want from-file kept", cfg.Node)
	}
}

func TestLoadEmptyPrefixReadsOnlyTaggedVariables(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Env: env(map[string]string{"NODE": "x", "PAYROLL_OWNER": "y"})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != "" || cfg.Payroll.Owner != "y" {
		t.Errorf("node %q owner %q, want empty (no derived names without a prefix) and y", cfg.Node, cfg.Payroll.Owner)
	}
}

func TestLoadDuration(t *testing.T) {
	tests := []struct {
		name string
		opts LoadOptions
		want time.Duration
	}{
		{"file Go form", LoadOptions{Data: []byte("payroll:\n  window: 5s\n")}, 5 * time.Second},
		{"file milliseconds", LoadOptions{Data: []byte("payroll:\n  window: 1500\n")}, 1500 * time.Millisecond},
		{"file quoted milliseconds", LoadOptions{Data: []byte("payroll:\n  window: \"2000\"\n")}, 2 * time.Second},
		{"env Go form", LoadOptions{Env: env(map[string]string{"X_PAYROLL_WINDOW": "1h2m"})}, time.Hour + 2*time.Minute},
		{"env milliseconds", LoadOptions{Env: env(map[string]string{"X_PAYROLL_WINDOW": "500"})}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.EnvPrefix = "X_"
			if tt.opts.Env == nil {
				tt.opts.Env = noEnv()
			}
			cfg, err := Load[appConfig](tt.opts)
			if tt.want == 0 {
				// 500ms is below the field's min=1s: the plain number was
				// read as milliseconds, not seconds or nanoseconds.
				if err == nil || !strings.Contains(err.Error(), `payroll.window "500ms" (env X_PAYROLL_WINDOW): must be at least 1s`) {
					t.Fatalf("err = %v, want the 500ms value rejected by min=1s", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Payroll.Window != tt.want {
				t.Errorf("window = %v, want %v", cfg.Payroll.Window, tt.want)
			}
		})
	}
}

// wantErrors asserts that err wraps ErrInvalid and carries each message.
func wantErrors(t *testing.T, err error, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %q", msgs)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("err = %v, want it to wrap ErrInvalid", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("err =\n%v\nwant it to contain\n%s", err, m)
		}
	}
}

func TestLoadUnknownKeys(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Path: "app.yaml", Data: []byte("node: a\nredis:\n  urll: redis://h\npayrol: {}\n"), Env: noEnv()})
	wantErrors(t, err,
		`config: redis.urll (app.yaml:3): unknown key; did you mean "url"? known keys here: url, namespace`,
		`config: payrol (app.yaml:4): unknown key; did you mean "payroll"? known keys here: node, redis, log, zone, stop-timeout, admin, payroll`,
	)
}

func TestLoadTypeErrors(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Data: []byte(`
payroll:
  retries: many
  enabled: maybe
  window: soon
  limits:
    eur: 70000
  api-key: [a, b]
redis: plain
`), Env: noEnv()})
	wantErrors(t, err,
		`config: payroll.retries "many" (line 3): must be an integer that fits in 64 bits`,
		`config: payroll.enabled "maybe" (line 4): must be true or false`,
		`config: payroll.window "soon" (line 5): must be a duration like "5s" or "1m30s", or whole milliseconds like "500"`,
		`config: payroll.limits.eur "70000" (line 7): must be a non-negative integer that fits in 16 bits`,
		`config: payroll.api-key (line 8): is a list but must be a single value`,
		`config: redis "plain" (line 9): must be a mapping of keys to values`,
	)
}

func TestLoadEnvErrors(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{EnvPrefix: "NDIGO_", Env: env(map[string]string{
		"NDIGO_PAYROLL_RETRIES": "1e3",
		"NDIGO_PAYROLL_WINDOW":  "5 s",
		"NDIGO_PAYROLL_ENABLED": "yes",
	})})
	wantErrors(t, err,
		`config: payroll.retries "1e3" (env NDIGO_PAYROLL_RETRIES): must be an integer that fits in 64 bits`,
		`config: payroll.window "5 s" (env NDIGO_PAYROLL_WINDOW): must be a duration`,
		`config: payroll.enabled "yes" (env NDIGO_PAYROLL_ENABLED): must be true or false`,
	)
}

func TestLoadValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string
	}{
		{"namespace pattern from file", "redis:\n  namespace: pr od\n", nil,
			`config: redis.namespace "pr od" (app.yaml:2): must match [A-Za-z0-9_.-]{1,64}`},
		{"namespace pattern from env", "", map[string]string{"NDIGO_REDIS_NAMESPACE": "pr od"},
			`config: redis.namespace "pr od" (env NDIGO_REDIS_NAMESPACE): must match [A-Za-z0-9_.-]{1,64}`},
		{"namespace too long", "redis:\n  namespace: " + strings.Repeat("n", 65) + "\n", nil,
			`config: redis.namespace "` + strings.Repeat("n", 65) + `" (app.yaml:2): must match`},
		{"namespace empty", "redis:\n  namespace: \"\"\n", nil,
			`config: redis.namespace "" (app.yaml:2): must match`},
		{"redis scheme", "redis:\n  url: http://h:1\n", nil,
			`config: redis.url "http://h:1" (app.yaml:2): must be a redis:// or rediss:// URL with a host`},
		{"redis no host", "", map[string]string{"NDIGO_REDIS_URL": "redis://"},
			`config: redis.url "redis://" (env NDIGO_REDIS_URL): must be a redis:// or rediss:// URL with a host`},
		{"redis database", "redis:\n  url: redis://h:1/zero\n", nil,
			`config: redis.url "redis://h:1/zero" (app.yaml:2): must be a redis:// or rediss:// URL with a host and an optional /database number`},
		{"log format", "log:\n  format: xml\n", nil,
			`config: log.format "xml" (app.yaml:2): must be one of text, json`},
		{"log level", "", map[string]string{"NDIGO_LOG_LEVEL": "trace"},
			`config: log.level "trace" (env NDIGO_LOG_LEVEL): must be one of debug, info, warn, error`},
		{"node length", "node: " + strings.Repeat("x", 129) + "\n", nil,
			`(app.yaml:1): must be at most 128 characters long`},
		{"user range", "payroll:\n  retries: 11\n", nil,
			`config: payroll.retries "11" (app.yaml:2): must be at most 10`},
		{"user duration min", "payroll:\n  window: 10ms\n", nil,
			`config: payroll.window "10ms" (app.yaml:2): must be at least 1s`},
		{"required in pointer section", "payroll:\n  bank:\n    timeout: 1s\n", nil,
			`config: payroll.bank.host (app.yaml:2): is required`},
		{"host:port", "payroll:\n  bank:\n    host: nohost\n", nil,
			`config: payroll.bank.host "nohost" (app.yaml:3): must be host:port`},
		{"inside a list", "payroll:\n  accounts:\n    - grace: 1s\n", nil,
			`config: payroll.accounts[0].name (app.yaml:3): is required`},
		{"admin address", "admin:\n  addr: localhost\n", nil,
			`config: admin.addr "localhost" (app.yaml:2): must be host:port or :port, such as 127.0.0.1:8081 (port 0 picks a free one)`},
		{"admin port", "", map[string]string{"NDIGO_ADMIN_ADDR": ":65536"},
			`config: admin.addr ":65536" (env NDIGO_ADMIN_ADDR): must be host:port or :port`},
		{"metrics without an address", "admin:\n  metrics: true\n", nil,
			`config: admin.addr (app.yaml:1): is required when metrics is set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load[appConfig](LoadOptions{Path: "app.yaml", Data: []byte(tt.yaml), EnvPrefix: "NDIGO_", Env: env(tt.env)})
			wantErrors(t, err, tt.want)
		})
	}
}

func TestLoadReportsEveryError(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Data: []byte("redis:\n  namespace: a b\nlog:\n  level: loud\n"), Env: noEnv()})
	wantErrors(t, err, "redis.namespace", "log.level")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Key != "log.level" && fe.Key != "redis.namespace" {
		t.Errorf("errors.As(%v) = %+v, want a FieldError", err, fe)
	}
}

// An optional file may be missing, and is read when present; any other
// read error (here, a directory at Path) still fails.
func TestLoadOptionalFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	cfg, err := Load[appConfig](LoadOptions{Path: missing, Optional: true, EnvPrefix: "NDIGO_", Env: env(map[string]string{"NDIGO_NODE": "a"})})
	if err != nil || cfg.Node != "a" || cfg.Log.Level != "info" {
		t.Fatalf("optional missing file: %+v, %v; want defaults and the environment", cfg.Framework, err)
	}
	cfg, err = Load[appConfig](LoadOptions{Path: writeFile(t, "node: b\n"), Optional: true, Env: noEnv()})
	if err != nil || cfg.Node != "b" {
		t.Fatalf("optional present file: node %q, %v; want b", cfg.Node, err)
	}
	_, err = Load[appConfig](LoadOptions{Path: t.TempDir(), Optional: true, Env: noEnv()})
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("optional path that is a directory: %v, want a read error", err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Path: filepath.Join(t.TempDir(), "missing.yaml"), Env: noEnv()})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
	_, err = Load[appConfig](LoadOptions{Path: "bad.yaml", Data: []byte("node: [\n"), Env: noEnv()})
	wantErrors(t, err, "config: invalid configuration: bad.yaml: yaml: line")
	_, err = Load[appConfig](LoadOptions{Path: "two.yaml", Data: []byte("node: a\n---\nnode: b\n"), Env: noEnv()})
	wantErrors(t, err, "two.yaml: line 2: a second YAML document")
	_, err = Load[appConfig](LoadOptions{Data: []byte("- a\n"), Env: noEnv()})
	wantErrors(t, err, "config: the document (line 1): is a list but must be a mapping")
	_, err = Load[appConfig](LoadOptions{Data: []byte("node: a\nnode: b\n"), Env: noEnv()})
	wantErrors(t, err, `mapping key "node" already defined`)
}

func TestLoadBadTypes(t *testing.T) {
	if _, err := Load[int](LoadOptions{}); err == nil || !strings.Contains(err.Error(), "config: Load[int]: the configuration type must be a struct") {
		t.Errorf("Load[int]: err = %v", err)
	}
	type plainSecret struct {
		Password string `yaml:"password" secret:"true"`
	}
	if _, err := Load[plainSecret](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), `field Password: tag secret:"true" needs type config.Secret or config.SecretURL`) {
		t.Errorf("secret tag on string: err = %v", err)
	}
	type badRule struct {
		X string `yaml:"x" validate:"no_such_rule"`
	}
	if _, err := Load[badRule](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), "config: bad validate tag") {
		t.Errorf("unknown validate rule: err = %v", err)
	}
	type badDefault struct {
		N int `yaml:"n" default:"ten"`
	}
	if _, err := Load[badDefault](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), `field N: tag default:"ten" must be an integer`) {
		t.Errorf("bad default: err = %v", err)
	}
	type section struct {
		D time.Duration `yaml:"d" default:"1s"`
	}
	type defaultUnderPointer struct {
		S *section `yaml:"s"`
	}
	if _, err := Load[defaultUnderPointer](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), `field S.D: tag default:"1s" under pointer field S`) {
		t.Errorf("default under pointer: err = %v", err)
	}
	type inlinePointer struct {
		*Framework `yaml:",inline"`
	}
	if _, err := Load[inlinePointer](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), ",inline is supported on struct values only, not *config.Framework") {
		t.Errorf("inline pointer: err = %v", err)
	}
	type sameEnv struct {
		A string `yaml:"api-key"`
		B string `yaml:"api_key"`
	}
	if _, err := Load[sameEnv](LoadOptions{EnvPrefix: "P_", Env: noEnv()}); err == nil || !strings.Contains(err.Error(), "fields A and B both read environment variable P_API_KEY") {
		t.Errorf("env name collision: err = %v", err)
	}
	type badSecretTag struct {
		S Secret `yaml:"s" secret:"maybe"`
	}
	if _, err := Load[badSecretTag](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), `field S: tag secret:"maybe" must be true or false`) {
		t.Errorf("bad secret tag: err = %v", err)
	}
	type hidden struct{ X string }
	type inlineUnexported struct {
		hidden `yaml:",inline"`
	}
	if _, err := Load[inlineUnexported](LoadOptions{Env: noEnv()}); err == nil || !strings.Contains(err.Error(), "an ,inline struct must be exported") {
		t.Errorf("unexported inline: err = %v", err)
	}
}

func TestLoadReturnsZeroOnError(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Data: []byte("node: a\nlog:\n  level: loud\n"), Env: noEnv()})
	if err == nil || cfg.Node != "" {
		t.Errorf("cfg.Node = %q, err = %v; want a zero value with the error", cfg.Node, err)
	}
}

func TestLoadSecretTagOnSecretTypes(t *testing.T) {
	type creds struct {
		Password Secret    `yaml:"password" secret:"true"`
		DSN      SecretURL `yaml:"dsn" secret:"true"`
	}
	cfg, err := Load[creds](LoadOptions{Data: []byte("password: pw\ndsn: postgres://u:pw@h/db\n"), EnvPrefix: "C_", Env: env(map[string]string{"C_PASSWORD": "pw2"})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Password.Reveal() != "pw2" || cfg.DSN.Reveal() != "postgres://u:pw@h/db" {
		t.Errorf("creds = %q %q", cfg.Password.Reveal(), cfg.DSN.Reveal())
	}
}

func TestLoadAnchorsAndMergeKeys(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Data: []byte(`
payroll:
  accounts:
    - &main {name: main, grace: 500}
    - <<: *main
      name: spare
    - *main
`), Env: noEnv()})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Payroll.Accounts
	if len(a) != 3 || a[1].Name != "spare" || a[2].Name != "main" {
		t.Fatalf("accounts = %+v", a)
	}
	for i, acc := range a {
		if acc.Grace != 500*time.Millisecond {
			t.Errorf("accounts[%d].grace = %v, want 500ms through the anchor", i, acc.Grace)
		}
	}
	_, err = Load[appConfig](LoadOptions{Data: []byte("payroll:\n  accounts:\n    - &a {name: a, color: red}\n    - <<: *a\n"), Env: noEnv()})
	wantErrors(t, err, "config: payroll.accounts[0].color (line 3): unknown key; known keys here: name, grace") // nothing close
}

// A missing file is named by its absolute path, with the working
// directory, so that a relative path's base is plain.
func TestLoadMissingFileNamesAbsolutePath(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Path: "no-such-app.yaml", Env: noEnv()})
	wd, _ := os.Getwd()
	for _, want := range []string{filepath.Join(wd, "no-such-app.yaml"), "(working directory " + wd + ")"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to contain %q", err, want)
		}
	}
}

// Unknown keys, values of the wrong type and rule violations come in one
// run; a value of the wrong type is reported for that alone.
func TestLoadReportsEveryKindAtOnce(t *testing.T) {
	_, err := Load[appConfig](LoadOptions{Path: "app.yaml", Env: noEnv(),
		Data: []byte("log:\n  format: xml\npayroll:\n  retries: many\n  window: 1ms\n  colour: red\n")})
	wantErrors(t, err,
		`config: payroll.colour (app.yaml:6): unknown key`,
		`config: payroll.retries "many" (app.yaml:4)`,
		`config: log.format "xml" (app.yaml:2): must be one of text, json`,
		`config: payroll.window "1ms" (app.yaml:5): must be at least 1s`,
	)
	if n := strings.Count(err.Error(), "payroll.retries"); n != 1 {
		t.Errorf("payroll.retries reported %d times, want once:\n%v", n, err)
	}
}

// Variables are read as caarlos0/env reads them: an empty one sets the zero
// value, even over the file.
func TestLoadEmptyVariableIsZero(t *testing.T) {
	cfg, err := Load[appConfig](LoadOptions{Data: []byte("node: a\npayroll:\n  retries: 5\n"), EnvPrefix: "N_",
		Env: env(map[string]string{"N_NODE": "", "N_PAYROLL_RETRIES": "", "N_PAYROLL_WINDOW": " 2s "})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != "" || cfg.Payroll.Retries != 0 || cfg.Payroll.Window != 2*time.Second {
		t.Errorf("node %q retries %d window %v, want empty, 0 and 2s", cfg.Node, cfg.Payroll.Retries, cfg.Payroll.Window)
	}
}
