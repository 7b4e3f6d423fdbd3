package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/fx"

	"github.com/ndigo/ndigo/internal/nodetest"
)

// A payroll process that cannot start says why once, exits non-zero, and
// never prints a password: a bad task spec, a bad setting, an unreachable
// Redis, PostgreSQL or etcd, two stores at once. --help exits 0.
func TestStartFailuresExitNonZeroWithOneError(t *testing.T) {
	bin := nodetest.BuildPayroll(t)
	const password = "s3cret-pw"
	for _, c := range []struct {
		name  string
		args  []string
		env   []string
		cause string
	}{
		{"bad spec", nil, []string{"PAYROLL_CRON=61 * * * *"}, `option cron = "61 * * * *" (from ${payroll.cron}, set by env PAYROLL_CRON)`},
		{"bad setting", nil, []string{"PAYROLL_LOCK_TTL=-5s"}, `payroll.lock-ttl "-5s"`},
		{"unreachable Redis", []string{"--redis", "redis://user:" + password + "@127.0.0.1:1"}, nil, "cannot reach Redis at 127.0.0.1:1"},
		{"unreachable PostgreSQL", []string{"--postgres", "postgres://user:" + password + "@127.0.0.1:1/app"}, nil, "cannot reach PostgreSQL at 127.0.0.1"},
		{"unreachable etcd", []string{"--etcd", "127.0.0.1:1"}, []string{"PAYROLL_ETCD_USERNAME=user", "PAYROLL_ETCD_PASSWORD=" + password,
			"PAYROLL_ETCD_DIAL_TIMEOUT=300ms"}, "cannot reach etcd at 127.0.0.1:1"},
		{"two stores", []string{"--postgres", "postgres://user:" + password + "@127.0.0.1:1/app"},
			[]string{"PAYROLL_REDIS_URL=redis://user:" + password + "@127.0.0.1:1"}, "the configuration names both redis.url"},
		{"etcd and another store", []string{"--etcd", "127.0.0.1:1"},
			[]string{"PAYROLL_REDIS_URL=redis://user:" + password + "@127.0.0.1:1"}, "and etcd.endpoints (127.0.0.1:1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit: %v, want a non-zero exit; output:\n%s", err, out)
			}
			text := string(out)
			if strings.Contains(text, password) {
				t.Errorf("the password is in the output:\n%s", text)
			}
			if n := strings.Count(text, c.cause); n != 1 {
				t.Errorf("the cause %q appears %d times, want once:\n%s", c.cause, n, text)
			}
			if strings.Contains(text, "level=ERROR") || strings.Contains(text, "[Fx]") {
				t.Errorf("fx's own error lines in the output:\n%s", text)
			}
		})
	}
	if out, err := exec.Command(bin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "-redis") || !strings.Contains(string(out), "-postgres") ||
		!strings.Contains(string(out), "-etcd") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

// A binary built without the tag etcd refuses --etcd saying how to build
// one with it.
func TestEtcdWithoutTheTagSaysHowToBuild(t *testing.T) {
	defer func(s fx.Option) { etcdStore = s }(etcdStore)
	etcdStore = withoutEtcd()
	env := map[string]string{etcdEndpointsEnv: "127.0.0.1:1"}
	err := fx.New(append(options(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard), fx.NopLogger)...).Err()
	if err == nil || !strings.Contains(err.Error(), "go run -tags etcd ./examples/payroll --etcd") {
		t.Fatalf("options with --etcd in a build without the tag: %v; want the error saying to build with -tags etcd", err)
	}
}
