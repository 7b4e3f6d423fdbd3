package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func logTo(w io.Writer) fx.Option {
	return fx.Supply(fx.Annotate(w, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`)))
}

func fakeClock(fc *clockwork.FakeClock) fx.Option {
	return fx.Supply(fx.Annotate(fc, fx.As(new(clockwork.Clock))))
}

// A locked task declared by a user runs on the default in-process driver,
// with its token in the run's context, and the app stops cleanly.
func TestRunsLockedTaskOnDefaultDriver(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 500_000_000, time.UTC))
	// The in-process lease table is process-wide: a key of its own keeps
	// this test's fire claims apart from a rerun's.
	key := fmt.Sprintf("app-test-window-%d", time.Now().UnixNano())
	tokens := make(chan uint64, 10)
	var driver locks.Driver
	var sched *scheduling.Scheduler
	a := app.New(
		fakeClock(fc),
		logTo(io.Discard),
		fx.Populate(&driver, &sched),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(ctx context.Context) error {
				l, _ := locks.FromContext(ctx)
				tokens <- l.Token()
				return nil
			}, scheduling.Name("close-books"), scheduling.Cron("@every 1s"), scheduling.Lock(key))
		}),
	)
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := driver.(*locks.InProcessDriver); !ok {
		t.Fatalf("default driver %T, want *locks.InProcessDriver", driver)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	var token uint64
	select {
	case token = <-tokens:
	case <-time.After(10 * time.Second):
		t.Fatal("task did not run")
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	info := sched.Tasks()[0]
	if info.Runs != 1 || info.Last.Token != token || token == 0 {
		t.Fatalf("registry: %d runs, last token %d; want 1 run with token %d", info.Runs, info.Last.Token, token)
	}
}

// The logger follows app.Framework: JSON at the configured level.
func TestLoggerFollowsConfig(t *testing.T) {
	var out syncbuf.Buffer
	cfg := app.Framework{Node: "node-a", Log: app.Log{Format: "json", Level: "warn"}}
	var logger *slog.Logger
	var node struct {
		fx.In
		Name string `name:"scheduling.node"`
	}
	a := app.New(fx.Supply(cfg), logTo(&out), fx.Populate(&logger, &node))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	logger.Info("hidden")
	logger.Warn("shown", "k", "v")
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &line); err != nil {
		t.Fatalf("log %q is not one JSON line: %v", out.String(), err)
	}
	if line["msg"] != "shown" || line["k"] != "v" || line["node"] != "node-a" {
		t.Fatalf("logged %v, want the line with its node", line)
	}
	if node.Name != "node-a" {
		t.Fatalf("node name %q, want node-a", node.Name)
	}
}

// Run stops the app when its context ends, running OnStop hooks.
func TestRunStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := false
	err := app.Run(ctx, logTo(io.Discard), fx.Invoke(func(lc fx.Lifecycle) {
		lc.Append(fx.Hook{
			OnStart: func(context.Context) error { cancel(); return nil },
			OnStop:  func(context.Context) error { stopped = true; return nil },
		})
	}))
	if err != nil || !stopped {
		t.Fatalf("Run = %v, stopped = %v; want nil, true", err, stopped)
	}
}

// Run reports every invalid task spec before starting anything.
func TestRunFailsOnInvalidSpecs(t *testing.T) {
	noop := func(context.Context) error { return nil }
	err := app.Run(context.Background(), logTo(io.Discard),
		scheduling.Provide(func() []scheduling.Task {
			return []scheduling.Task{
				scheduling.NewTask(noop, scheduling.Name("a"), scheduling.Cron("not a cron")),
				scheduling.NewTask(noop, scheduling.Name("b"), scheduling.Cron("@every 1s"), scheduling.LockTTL(time.Second)),
			}
		}),
	)
	if !errors.Is(err, scheduling.ErrInvalidSpec) {
		t.Fatalf("Run = %v, want ErrInvalidSpec", err)
	}
	for _, want := range []string{"not a cron", "lockTtl"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// Mailer is a dependency that no one provides in TestRunNamesWhoNeedsAMissingType.
type Mailer interface{ Send() }

// newPayroll needs a Mailer.
func newPayroll(Mailer) int { return 1 }

// A missing type names the constructor that needs it, with its file and
// line, not only the type.
func TestRunNamesWhoNeedsAMissingType(t *testing.T) {
	err := app.Run(context.Background(), logTo(io.Discard), fx.Provide(newPayroll), fx.Invoke(func(int) {}))
	for _, want := range []string{"app: missing type: app_test.Mailer, which ", `".newPayroll (`, "app_test.go:", "provide it (fx.Provide or fx.Supply)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v; want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "app: app:") {
		t.Errorf("Run = %v; two prefixes", err)
	}
}

// app.Framework's zone sets the scheduler's zone; its stop-timeout bounds
// Run's stop: a run that ignores cancellation is cut when it passes.
func TestFrameworkZoneAndStopTimeout(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s *scheduling.Scheduler
	a := app.New(logTo(io.Discard), fakeClock(fc), fx.Supply(app.Framework{Zone: "Europe/Paris"}),
		scheduling.Provide(func() scheduling.Task {
			return scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("0 2 * * *"), scheduling.Name("nightly"))
		}), fx.Populate(&s))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	// 02:00 in Paris in winter is 01:00 UTC.
	if next := s.Tasks()[0].Next; !next.Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("next fire %v, want 01:00 UTC", next)
	}

	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	begin := time.Now()
	go func() {
		done <- app.Run(ctx, logTo(io.Discard), fx.Supply(app.Framework{StopTimeout: time.Second}),
			scheduling.Provide(func() scheduling.Task {
				return scheduling.NewTask(func(context.Context) error {
					close(started)
					<-release // ignores its context
					return nil
				}, scheduling.Cron("@every 100ms"), scheduling.Name("stubborn"))
			}))
	}()
	<-started
	cancel()
	err := <-done
	if !errors.Is(err, scheduling.ErrStopTimeout) {
		t.Fatalf("Run: %v, want the stop timeout", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("Run took %v to stop with a 1s stop-timeout", took)
	}
}

// Every line of the application's logger names the node, once: a line
// with a node of its own (about another node) keeps it, a group's
// attributes do not take it, and a logger with a node attribute of its own
// is not given a second.
func TestEveryLogLineNamesTheNode(t *testing.T) {
	var out syncbuf.Buffer
	l := app.WithNode(app.NewLogger(&out, app.Log{Format: "json"}), "node-a")
	l.Info("plain")
	l.Info("about another", "node", "node-b")
	l.WithGroup("g").Info("grouped", "k", "v")
	l.With("node", "node-c").Info("with")
	l.With("k", "v").Info("with other")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Count(line, `"node"`) != 1 {
			t.Errorf("line %s: want one node", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(m["msg"], "=", m["node"]))
	}
	want := []string{"plain=node-a", "about another=node-b", "grouped=node-a", "with=node-c", "with other=node-a"}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}

type forgotten struct {
	_ annotations.Scheduled `method:"Run" cron:"@daily"`
}

func (forgotten) Run(context.Context) error { return nil }

// A controller given to fx.Provide instead of annotations.Provide fails
// Run, naming the type and the fix, instead of dropping its tasks.
func TestRunRefusesAnUnregisteredController(t *testing.T) {
	err := app.Run(context.Background(), logTo(io.Discard), fx.Provide(func() *forgotten { return &forgotten{} }))
	if err == nil || !strings.Contains(err.Error(), "*app_test.forgotten declares scheduled tasks") ||
		!strings.Contains(err.Error(), "annotations.Provide") || strings.Count(err.Error(), "app:") > 1 {
		t.Fatalf("Run = %v, want the unregistered controller named, with the fix", err)
	}
}
