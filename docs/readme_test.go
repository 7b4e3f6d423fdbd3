package docs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/tracing"
)

// This file holds every Go block of README.md and the docs pages it links
// (but the README's first program, built on its own), so that each compiles;
// TestReadmeBlocksCompile checks that the pages show them as they are here.

// The quick start.
type PayrollController struct {
	_ annotations.Scheduled `method:"CloseBooks" cron:"0 2 * * *" lock:"payroll-window" lockTtl:"60s"`
}

func (c *PayrollController) CloseBooks(ctx context.Context) error {
	// One node of the cluster reaches this point for each fire.
	lease, _ := locks.FromContext(ctx)
	log.Printf("closing the books with fencing token %d", lease.Token()) // hand the token to the storage you write
	return nil
}

func main() {
	err := app.Run(context.Background(),
		annotations.Provide(func() *PayrollController { return &PayrollController{} }), // provides it and registers its tasks
	)
	if err != nil {
		log.Fatal(err)
	}
}

var _ = main

func NewPayrollController() *PayrollController { return &PayrollController{} }

// On PostgreSQL.
type Payslips struct{ pool *pgxpool.Pool }

func (c *Payslips) Close(ctx context.Context) error {
	lease, _ := locks.FromContext(ctx)
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := pglocks.Guard(ctx, tx, lease); err != nil {
			return err // locks.ErrLeaseLost: a successor holds the key; nothing is written
		}
		_, err := tx.Exec(ctx, "INSERT INTO payslips (month) VALUES ($1)", "2026-11")
		return err // no successor acquires the key until this transaction ends
	})
}

func (c *Payslips) CloseOnEtcd(ctx context.Context) error {
	lease, _ := locks.FromContext(ctx)
	_, err := etcdlocks.Guard(ctx, lease, clientv3.OpPut("payslips/2026-11", "closed"))
	return err // locks.ErrLeaseLost: a successor holds the key; nothing is written
}

// An application on etcd.
func onEtcd(ctx context.Context) error {
	type Config struct {
		app.Framework `yaml:",inline"`
	}
	err := app.Run(ctx,
		config.Module[Config](config.LoadOptions{Path: "app.yaml", EnvPrefix: "APP_"}),
		etcdlocks.Module, // reads the etcd section; app.Module alone links no etcd client
		annotations.Provide(NewPayrollController),
	)
	return err
}

// The builder form.
var builderForm = scheduling.Provide(func(c *PayrollController) scheduling.Task {
	return scheduling.NewTask(c.CloseBooks,
		scheduling.Cron("0 2 * * *"),
		scheduling.Lock("payroll-window"),
		scheduling.LockTTL(time.Minute))
})

// From one node to many.
func manyNodes(ctx context.Context) error {
	type Config struct {
		app.Framework `yaml:",inline"` // node, redis.url, redis.namespace, log.format, log.level
	}

	err := app.Run(ctx,
		config.Module[Config](config.LoadOptions{Path: "app.yaml", EnvPrefix: "APP_"}),
		annotations.Provide(NewPayrollController),
	)
	return err
}

// A driver of your own client.
var ownClient = fx.Options(
	fx.Decorate(func(c *redis.Client) (locks.Driver, error) {
		return redislocks.New(redislocks.Options{Client: c, Namespace: "prod"})
	}),
)

// Locks without the scheduler.
func directLock(ctx context.Context, driver locks.Driver) error {
	lease, err := driver.Acquire(ctx, "payroll-window", 30*time.Second)
	if errors.Is(err, locks.ErrNotAcquired) {
		return nil // another holder owns it: skip (Acquire never blocks; locks.Wait waits within a budget)
	}
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	return nil
}

// Operating it.
func operated(ctx context.Context) error {
	err := app.Run(ctx,
		// ... your configuration, controllers ...
		tracing.Module, // uses a trace.TracerProvider from the graph, else the global one
	)
	return err
}

// The test kit.
func kit(ctx context.Context) error {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &schedulingtest.Recorder{}
	s := scheduling.New(scheduling.Config{Clock: fc, Driver: locks.NewInProcessDriver(locks.WithClock(fc)),
		Listeners: []scheduling.Listener{rec}})
	// ... s.Add(your tasks), s.Start() ...
	err := schedulingtest.Step(ctx, fc, time.Minute, time.Second, s) // a minute, a second at a time, each fire done
	return err
}

// Stored schedules: the handler that they name.
func tenantReports(send func(ctx context.Context, tenant string) error) fx.Option {
	return scheduling.Handler("tenant-report", func(ctx context.Context, args json.RawMessage) error {
		var a struct{ Tenant string }
		if err := json.Unmarshal(args, &a); err != nil {
			return err
		}
		return send(ctx, a.Tenant)
	})
}

// The calendars of docs/TASKS.md.
type ClosingController struct {
	_ annotations.Scheduled `method:"Close" cron:"CRON_TZ=Europe/Paris 0 18 * * *" lock:"closing" calendar:"eu-holidays" endAt:"2027-12-31" pauseAfterFailures:"3"`
}

func defineHolidays(ctx context.Context, s *scheduling.Scheduler) error {
	return s.CreateCalendar(ctx, taskstate.Calendar{
		Name:          "eu-holidays",
		CalendarRules: taskstate.CalendarRules{Dates: []string{"2026-12-25", "2027-01-01"}, Weekdays: []string{"sat", "sun"}},
		Note:          "closed on public holidays and weekends",
	})
}

func (c *ClosingController) Close(context.Context) error { return nil }

// The health options of docs/TASKS.md.
type WatchedController struct {
	_ annotations.Scheduled `method:"Close" cron:"0 18 * * *" lock:"closing" lateAfter:"5m" downAfter:"2h" failingAfter:"2" runBudget:"20m"`
}

func (c *WatchedController) Close(context.Context) error { return nil }

// The pager listener.
type pager struct {
	scheduling.NopListener
	skips sync.Map // task -> *atomic.Int32
}

func (p *pager) Skipped(e scheduling.Event) {
	n, _ := p.skips.LoadOrStore(e.Task, new(atomic.Int32))
	if n.(*atomic.Int32).Add(1) == 5 {
		go page(e.Task + ": 5 fires skipped: " + string(e.Outcome)) // hooks must return quickly
	}
}

func page(string) {}

var _ = []any{builderForm, onEtcd, manyNodes, ownClient, directLock, operated, kit, &pager{}, tenantReports, &ClosingController{}, &WatchedController{}, defineHolidays}

// pages are the documents whose Go blocks must compile: the README and the
// reference pages it links.
var pages = []string{"../README.md", "TASKS.md", "CLUSTER.md", "OPERATIONS.md", "PACKAGES.md"}

// TestReadmeBlocksCompile checks that every Go block of the pages appears
// in this file, line by line (each page line inside the matching line
// here, leading whitespace aside), so that what users copy compiles. A
// block that is a whole program (package main) is built on its own
// instead, by TestFirstProgramBuilds.
func TestReadmeBlocksCompile(t *testing.T) {
	here, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(here), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	blocks := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, block := range goBlocks(string(text)) {
			if strings.HasPrefix(block, "package main\n") {
				continue
			}
			var want []string
			for _, l := range strings.Split(block, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					want = append(want, l)
				}
			}
			blocks++
			if !containsRun(lines, want) {
				t.Errorf("%s block %d is not in docs/readme_test.go as written:\n%s", page, n+1, strings.Join(want, "\n"))
			}
		}
	}
	if blocks < 7 {
		t.Fatalf("%d Go blocks found in the pages, want at least 7", blocks)
	}
}

// goBlocks returns the Go code blocks of a Markdown text.
func goBlocks(text string) []string {
	var out []string
	for _, part := range strings.Split(text, "```go\n")[1:] {
		out = append(out, strings.SplitN(part, "```", 2)[0])
	}
	return out
}

// The README's first program, the one a new user copies into main.go,
// builds with the README's steps as written: its shell block's commands
// (go mod init, go mod edit pointing at the clone, here this checkout),
// then go mod tidy and go build, offline; and runs: it says what it
// schedules within seconds.
func TestFirstProgramBuilds(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0], "package main\n") {
		t.Fatal("the README's first Go block is not a whole program (package main)")
	}
	first := string(readme)[strings.Index(string(readme), "## Your first program"):]
	steps := strings.SplitN(strings.SplitN(first, "```sh\n", 2)[1], "```", 2)[0]
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "payroll")
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
	var ran []string
	for _, line := range strings.Split(strings.TrimSpace(steps), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		if cmd == "mkdir payroll && cd payroll" {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		args := strings.Fields(strings.ReplaceAll(cmd, "../ndigo", root))
		if len(args) < 2 || args[0] != "go" {
			t.Fatalf("the README's step %q is neither mkdir nor a go command", line)
		}
		run := exec.Command(args[0], args[1:]...)
		run.Dir, run.Env = dir, env
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("the README's step %q: %v\n%s", cmd, err, out)
		}
		ran = append(ran, args[1]+" "+args[2])
	}
	if !slices.Equal(ran, []string{"mod init", "mod edit"}) {
		t.Fatalf("the README's steps ran %q, want go mod init then go mod edit", ran)
	}
	if !strings.Contains(first, "Then `go mod tidy`") || !strings.Contains(first, "`go run .`") {
		t.Fatal("the README does not say to run go mod tidy, then go run .")
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(blocks[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "payroll")
	// Offline, tidy cannot reach the tests of ndigo's dependencies, which
	// it checks too (-e goes on past them); the build needs none of them.
	for _, args := range [][]string{{"mod", "tidy", "-e"}, {"build", "-o", bin, "."}} {
		run := exec.Command("go", args...)
		run.Dir, run.Env = dir, env
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the README's first program: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, bin)
	out, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run.Stderr = run.Stdout
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `msg="task scheduled" task=PayrollController.CloseBooks cron="0 2 * * *" lock=payroll-window`) {
			return
		}
	}
	t.Fatalf("the program ended without logging its task: %v", sc.Err())
}

// containsRun reports whether want appears in lines as a run of non-empty
// lines, each want line inside its line.
func containsRun(lines, want []string) bool {
	var nonEmpty []string
	for _, l := range lines {
		if l != "" {
			nonEmpty = append(nonEmpty, l)
		}
	}
	for i := range nonEmpty {
		ok := i+len(want) <= len(nonEmpty)
		for j := 0; ok && j < len(want); j++ {
			ok = strings.Contains(nonEmpty[i+j], want[j])
		}
		if ok {
			return true
		}
	}
	return false
}

// The quick start's program says what it runs within its first second.
func TestQuickStartPrintsItsTask(t *testing.T) {
	out, err := os.Create(t.TempDir() + "/log") // a file takes concurrent writes and reads
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	logged := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx,
			fx.Supply(fx.Annotate(out, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
			annotations.Provide(func() *PayrollController { return &PayrollController{} }),
		)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged(), "task=PayrollController.CloseBooks") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the log for the line, on the real clock
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := logged()
	for _, want := range []string{`msg="scheduler started"`, `msg="task scheduled" task=PayrollController.CloseBooks cron="0 2 * * *" lock=payroll-window`, `msg="scheduler stopped"`} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %s:\n%s", want, text)
		}
	}
}
