package docs

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

var update = flag.Bool("update", false, "rewrite BAD-INPUT.md's table from the errors")

// A badInput is one bad input and the sentinel its error must wrap (nil:
// the API has none, any error will do).
type badInput struct {
	where, input string
	sentinel     error
	call         func() error
}

// day is a past instant on the hour.
var day = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// backfill asks for a backfill of [from, to] of an hourly locked task.
func backfill(from, to time.Time, opts scheduling.BackfillOptions) func() error {
	return func() error {
		st, _ := taskstate.NewInProcess(0)
		s := scheduling.New(scheduling.Config{Driver: locks.NewInProcessDriver(), State: st})
		if err := s.Add(scheduling.NewTask((&Payroll{}).Close, scheduling.Cron("@hourly"), scheduling.Lock("k"),
			scheduling.Name("close"))); err != nil {
			return err
		}
		_, err := s.Backfill(context.Background(), "close", from, to, opts)
		return err
	}
}

// stored creates sc on a scheduler with the handler "report" and a task
// declared in code, "close".
func stored(sc taskstate.Schedule) func() error {
	return func() error {
		st, _ := taskstate.NewInProcess(0)
		s := scheduling.New(scheduling.Config{Driver: locks.NewInProcessDriver(), State: st})
		if err := s.Add(scheduling.NewTask((&Payroll{}).Close, scheduling.Cron("@hourly"), scheduling.Lock("k"),
			scheduling.Name("close"))); err != nil {
			return err
		}
		if err := s.Handle("report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
			return err
		}
		return s.CreateSchedule(context.Background(), sc)
	}
}

func task(opts ...scheduling.Option) func() error {
	return func() error {
		return scheduling.Validate(scheduling.NewTask((&Payroll{}).Close, opts...))
	}
}

// tagged returns a call that reads controller's tags.
func tagged(controller any) func() error {
	return func() error {
		_, err := annotations.Tasks(controller)
		return err
	}
}

type appConfig struct {
	app.Framework `yaml:",inline"`
}

func load(yaml string) func() error {
	return func() error {
		_, err := config.Load[appConfig](config.LoadOptions{Data: []byte(yaml), Path: "app.yaml",
			Env: func(string) (string, bool) { return "", false }})
		return err
	}
}

type payrollConfig struct {
	app.Framework `yaml:",inline"`
	Payroll       struct {
		Cron string `yaml:"cron"`
	} `yaml:"payroll"`
}

// configured returns a call that starts an application whose configuration
// (app.yaml holding data, and env) fills the placeholders of Placeholder's tag.
func configured(data string, env map[string]string) func() error {
	return func() error {
		return app.Run(context.Background(),
			fx.Supply(fx.Annotate(io.Discard, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
			config.Module[payrollConfig](config.LoadOptions{Path: "app.yaml", Data: []byte(data), EnvPrefix: "APP_",
				Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }}),
			annotations.Provide(func() *Placeholder { return &Placeholder{} }),
		)
	}
}

func badInputs() []badInput {
	var nilCtx context.Context
	bg := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	ns := func(namespace string) func() error {
		return func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: namespace})
			return err
		}
	}
	d := locks.NewInProcessDriver()
	return []badInput{
		{"locks.Check (every driver's Acquire, Extend)", `key ""`, locks.ErrInvalid, func() error { return locks.Check(bg, "", time.Second) }},
		{"locks.Check", `ttl 0`, locks.ErrInvalid, func() error { return locks.Check(bg, "k", 0) }},
		{"locks.Check", `ttl -1s`, locks.ErrInvalid, func() error { return locks.Check(bg, "k", -time.Second) }},
		{"locks.Check", `ttl locks.MaxTTL+1ns`, locks.ErrInvalid, func() error { return locks.Check(bg, "k", locks.MaxTTL+1) }},
		{"locks.Check", `key of locks.MaxKeyLen+1 bytes`, locks.ErrInvalid, func() error {
			return locks.Check(bg, strings.Repeat("k", locks.MaxKeyLen+1), time.Second)
		}},
		{"locks.Check", `nil context`, locks.ErrInvalid, func() error { return locks.Check(nilCtx, "k", time.Second) }},
		{"locks.Wait", `nil driver`, locks.ErrInvalid, func() error { _, err := locks.Wait(bg, nil, "k", time.Second, locks.WaitOptions{}); return err }},
		{"locks.Wait", `Budget -1s`, locks.ErrInvalid, func() error {
			_, err := locks.Wait(bg, d, "k", time.Second, locks.WaitOptions{Budget: -time.Second})
			return err
		}},
		{"locks.Wait", `Step -1ms`, locks.ErrInvalid, func() error {
			_, err := locks.Wait(bg, d, "k", time.Second, locks.WaitOptions{Budget: time.Second, Step: -time.Millisecond})
			return err
		}},
		{"redislocks.New", `Client nil`, locks.ErrInvalid, func() error { _, err := redislocks.New(redislocks.Options{Namespace: "prod"}); return err }},
		{"redislocks.New", `Namespace ""`, redislocks.ErrInvalidNamespace, ns("")},
		{"redislocks.New", `Namespace of 65 bytes`, redislocks.ErrInvalidNamespace, ns(strings.Repeat("n", 65))},
		{"redislocks.New", `Namespace "prod env"`, redislocks.ErrInvalidNamespace, ns("prod env")},
		{"redislocks.New", `Namespace "a:b"`, redislocks.ErrInvalidNamespace, ns("a:b")},
		{"redislocks.New", `Namespace "{x}"`, redislocks.ErrInvalidNamespace, ns("{x}")},
		{"redislocks.New", `DriftRatio 0.5`, locks.ErrInvalid, func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", DriftRatio: 0.5})
			return err
		}},
		{"redislocks.New", `MinDrift -1ms`, locks.ErrInvalid, func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", MinDrift: -time.Millisecond})
			return err
		}},
		{"redislocks.Driver.Acquire, Extend", `ttl 2ms, at or below MinTTL`, locks.ErrInvalid, func() error {
			rd, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod"})
			if err != nil {
				return err
			}
			_, err = rd.Acquire(bg, "k", 2*time.Millisecond)
			return err
		}},
		{"redislocks.New", `MinReplicas -1`, locks.ErrInvalid, func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", MinReplicas: -1})
			return err
		}},
		{"redislocks.New", `MinReplicasTimeout -1ms`, locks.ErrInvalid, func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", MinReplicas: 1, MinReplicasTimeout: -time.Millisecond})
			return err
		}},
		{"redislocks.New", `MinReplicasTimeout 1s without MinReplicas`, locks.ErrInvalid, func() error {
			_, err := redislocks.New(redislocks.Options{Client: client, Namespace: "prod", MinReplicasTimeout: time.Second})
			return err
		}},
		{"redislocks.New", `MinReplicas 1 on a *redis.Ring`, locks.ErrInvalid, func() error {
			ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}) // never contacted
			defer ring.Close()
			_, err := redislocks.New(redislocks.Options{Client: ring, Namespace: "prod", MinReplicas: 1})
			return err
		}},
		{"scheduling.Scheduler.Start", `Config.Heartbeat 1ms`, scheduling.ErrInvalidConfig, func() error {
			return scheduling.New(scheduling.Config{Driver: locks.NewInProcessDriver(), Spread: true, Heartbeat: time.Millisecond}).Start()
		}},
		{"scheduling.Scheduler.Start", `Config.Spread on a driver without memberships`, scheduling.ErrInvalidConfig, func() error {
			return scheduling.New(scheduling.Config{Driver: plainDriver{}, Spread: true}).Start()
		}},
		{"scheduling.Validate", `no Cron`, scheduling.ErrInvalidSpec, task()},
		{"scheduling.Validate", `Cron("61 * * * *")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("61 * * * *"))},
		{"scheduling.Validate", `Cron("0 2 * *")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("0 2 * *"))},
		{"scheduling.Validate", `Cron("CRON_TZ=Nowhere 0 2 * * *")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("CRON_TZ=Nowhere 0 2 * * *"))},
		{"scheduling.Validate", `Cron("@every 0s")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@every 0s"))},
		{"scheduling.Validate", `Cron("0 0 30 2 *")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("0 0 30 2 *"))},
		{"scheduling.Validate", `Lock("")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@daily"), scheduling.Lock(""))},
		{"scheduling.Validate", `a func literal without Name`, scheduling.ErrInvalidSpec, func() error {
			return scheduling.Validate(scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Cron("@daily")))
		}},
		{"scheduling.Validate", `LockWaitStep(time.Microsecond)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.LockWaitStep(time.Microsecond))},
		{"scheduling.Validate", `LockTTL(50*time.Millisecond), Renew()`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.LockTTL(50*time.Millisecond), scheduling.Renew())},
		{"scheduling.Validate", `LockTTL(5s) without Lock`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@daily"), scheduling.LockTTL(5*time.Second))},
		{"scheduling.Validate", `LockTTL(-1s)`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.LockTTL(-time.Second))},
		{"scheduling.Validate", `LockWait(-1s)`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.LockWait(-time.Second))},
		{"scheduling.Validate", `MaxRunTime(2m) over LockTTL(1m)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.LockTTL(time.Minute), scheduling.MaxRunTime(2*time.Minute))},
		{"scheduling.Validate", `CatchUp(time.Hour) without Lock`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@hourly"), scheduling.CatchUp(time.Hour))},
		{"scheduling.Validate", `CatchUp(24*time.Hour)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.CatchUp(24*time.Hour))},
		{"scheduling.Validate", `Retry(3) without Lock`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@hourly"), scheduling.Retry(3))},
		{"scheduling.Validate", `Retry(101)`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Retry(101))},
		{"scheduling.Validate", `RetryBackoff(math.MaxInt64)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Retry(1), scheduling.RetryBackoff(math.MaxInt64))},
		{"scheduling.Validate", `RetryMaxBackoff below RetryBackoff`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Retry(1), scheduling.RetryBackoff(time.Minute), scheduling.RetryMaxBackoff(time.Second))},
		{"scheduling.Validate", `Overlap("queue")`, scheduling.ErrInvalidSpec, task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Overlap("queue"))},
		{"scheduling.Validate", `Overlap("allow") without MaxConcurrent`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Overlap(scheduling.OverlapAllow))},
		{"scheduling.Validate", `MaxConcurrent(65)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.Lock("k"), scheduling.Overlap(scheduling.OverlapAllow), scheduling.MaxConcurrent(65))},
		{"scheduling.Validate", `LateAfter(time.Hour), DownAfter(time.Minute)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.LateAfter(time.Hour), scheduling.DownAfter(time.Minute))},
		{"scheduling.Validate", `MaxRunTime(time.Minute), RunBudget(time.Hour)`, scheduling.ErrInvalidSpec,
			task(scheduling.Cron("@hourly"), scheduling.MaxRunTime(time.Minute), scheduling.RunBudget(time.Hour))},
		{"locks.AcquireSlot", `n 0`, locks.ErrInvalid, func() error { _, err := locks.AcquireSlot(bg, d, "k", 0, time.Second, nil); return err }},
		{"locks.AcquireSlot", `n locks.MaxSlots+1`, locks.ErrInvalid, func() error {
			_, err := locks.AcquireSlot(bg, d, "k", locks.MaxSlots+1, time.Second, nil)
			return err
		}},
		{"Scheduler.Backfill", "`to` before `from`", scheduling.ErrInvalidBackfill, backfill(day, day.Add(-time.Hour), scheduling.BackfillOptions{})},
		{"Scheduler.Backfill", "a range holding no instant", scheduling.ErrInvalidBackfill, backfill(day.Add(time.Minute), day.Add(2*time.Minute), scheduling.BackfillOptions{})},
		{"Scheduler.Backfill", "`Overlap: \"cancel-previous\"`", scheduling.ErrInvalidBackfill,
			backfill(day, day.Add(24*time.Hour), scheduling.BackfillOptions{Overlap: scheduling.OverlapCancelPrevious})},
		{"taskstate.Store.StartBackfill", "an empty ID", taskstate.ErrInvalid, func() error {
			st, _ := taskstate.NewInProcess(0)
			return st.StartBackfill(bg, taskstate.Backfill{Task: "t", From: day, To: day, Total: 1, Node: "n"}, nil)
		}},
		{"Scheduler.CreateSchedule", "`Options: {\"lockTtl\": \"-1s\"}`", scheduling.ErrInvalidSpec,
			stored(taskstate.Schedule{Name: "report-acme", Handler: "report", Cron: "@daily", Lock: "r", Options: map[string]string{"lockTtl": "-1s"}})},
		{"Scheduler.CreateSchedule", "`Options: {\"failingAfter\": \"0\"}`", scheduling.ErrInvalidSpec,
			stored(taskstate.Schedule{Name: "report-acme", Handler: "report", Cron: "@daily", Options: map[string]string{"failingAfter": "0"}})},
		{"Scheduler.CreateSchedule", "`Options: {\"lockTTL\": \"5s\"}`", scheduling.ErrInvalidSpec,
			stored(taskstate.Schedule{Name: "report-acme", Handler: "report", Cron: "@daily", Options: map[string]string{"lockTTL": "5s"}})},
		{"Scheduler.CreateSchedule", "`Handler: \"export\"`, not registered", scheduling.ErrUnknownHandler,
			stored(taskstate.Schedule{Name: "export-acme", Handler: "export", Cron: "@daily"})},
		{"Scheduler.CreateSchedule", "`Name: \"close\"`, a task declared in code", scheduling.ErrDeclaredInCode,
			stored(taskstate.Schedule{Name: "close", Handler: "report", Cron: "@daily"})},
		{"Scheduler.CreateSchedule", "`Args: {\"tenant\":`", taskstate.ErrInvalid,
			stored(taskstate.Schedule{Name: "report-acme", Handler: "report", Cron: "@daily", Args: json.RawMessage(`{"tenant":`)})},
		{"scheduling.Validate", `nil func`, scheduling.ErrInvalidSpec, func() error { return scheduling.Validate(scheduling.NewTask(nil, scheduling.Cron("@daily"))) }},
		{"annotations.Tasks", "`lockTtl:\"soon\"`", scheduling.ErrInvalidSpec, tagged(&TTLSoon{})},
		{"annotations.Tasks", "`lockTTL:\"5s\"`", scheduling.ErrInvalidSpec, tagged(&MisspelledKey{})},
		{"annotations.Tasks", "`renew:\"yes\"`", scheduling.ErrInvalidSpec, tagged(&RenewYes{})},
		{"annotations.Tasks", "`catchUp:\"later\"`", scheduling.ErrInvalidSpec, tagged(&CatchUpLater{})},
		{"annotations.Tasks", "`method:\"Open\"`", scheduling.ErrInvalidSpec, tagged(&NoMethod{})},
		{"annotations.Tasks", "`cron:\"${payroll.cron}\"` without values", scheduling.ErrInvalidSpec, tagged(&Placeholder{})},
		{"annotations.Provide (app.Run, config.Module)", "`cron:\"${payroll.cron}\"`, app.yaml holding `payroll: {cron: every 5s}`", scheduling.ErrInvalidSpec,
			configured("node: n1\npayroll: {cron: every 5s}\n", nil)},
		{"annotations.Provide (app.Run, config.Module)", "`cron:\"${payroll.cron}\"`, `APP_PAYROLL_CRON=\"0 2 * *\"`", scheduling.ErrInvalidSpec,
			configured("", map[string]string{"APP_PAYROLL_CRON": "0 2 * *"})},
		{"annotations.ParseDuration", `"5 s"`, nil, func() error { _, err := annotations.ParseDuration("5 s"); return err }},
		{"annotations.ParseDuration", `""`, nil, func() error { _, err := annotations.ParseDuration(""); return err }},
		{"annotations.ParseDuration", `"99999999999999999999"`, nil, func() error { _, err := annotations.ParseDuration("99999999999999999999"); return err }},
		{"config.Load", "`node: [`", config.ErrInvalid, load("node: [\n")},
		{"config.Load", "`log: {format: xml}`", config.ErrInvalid, load("log: {format: xml}\n")},
		{"config.Load", "`redis: {namespace: prod env}`", config.ErrInvalid, load("redis: {namespace: prod env}\n")},
		{"config.Load", "`redis: {url: http://h:6379}`", config.ErrInvalid, load("redis: {url: \"http://h:6379\"}\n")},
		{"config.Load", "`redis: {url: \"redis://:secret@h:6379/x\"}`", config.ErrInvalid, load("redis: {url: \"redis://:secret@h:6379/x\"}\n")},
		{"config.Load", "`nodes: a`", config.ErrInvalid, load("nodes: a\n")},
		{"config.Load", "`zone: Mars/Olympus`", config.ErrInvalid, load("zone: Mars/Olympus\n")},
		{"config.Load", "`stop-timeout: -1s`", config.ErrInvalid, load("stop-timeout: -1s\n")},
		{"config.Load", "`spread: yes`", config.ErrInvalid, load("spread: yes\n")},
		{"config.Load", "`ping: {url: \"ftp://hc-ping.com/a-check-uuid\"}`", config.ErrInvalid, load("ping: {url: \"ftp://hc-ping.com/a-check-uuid\"}\n")},
		{"config.Load", "`ping: {every: 10ms}`", config.ErrInvalid, load("ping: {every: 10ms}\n")},
		{"config.Load", "`notify: {webhook: {url: \"https://hooks.example.com/a-secret\"}}`", config.ErrInvalid,
			load("notify: {webhook: {url: \"https://hooks.example.com/a-secret\"}}\n")},
		{"config.Load", "`notify: {slack: {url: \"hooks.slack.com/services/T/B/X\"}}`", config.ErrInvalid,
			load("notify: {slack: {url: \"hooks.slack.com/services/T/B/X\"}}\n")},
	}
}

// table renders the bad inputs and their errors as a Markdown table.
func table(t *testing.T) string {
	t.Helper()
	cell := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(strings.ReplaceAll(s, "\n\t", "<br>"), "\n", "<br>")
	}
	var b strings.Builder
	b.WriteString("| where | input | error |\n|---|---|---|\n")
	for _, c := range badInputs() {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s %s panicked: %v", c.where, c.input, r)
				}
			}()
			err = c.call()
		}()
		switch {
		case err == nil:
			t.Errorf("%s accepted %s", c.where, c.input)
			continue
		case c.sentinel != nil && !errors.Is(err, c.sentinel):
			t.Errorf("%s %s: %v does not wrap %v", c.where, c.input, err, c.sentinel)
		}
		input := c.input
		if !strings.HasPrefix(input, "`") {
			input = "`" + input + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(c.where), cell(input), "`"+cell(err.Error())+"`")
	}
	return b.String()
}

const (
	tableStart = "<!-- table: generated by TestBadInputTable; go test ./docs -run TestBadInputTable -update -->\n"
	tableEnd   = "<!-- end of table -->\n"
)

// Every bad input gets an error (never a panic) wrapping its package's
// sentinel, and BAD-INPUT.md shows exactly those errors.
func TestBadInputTable(t *testing.T) {
	got := table(t)
	doc, err := os.ReadFile("BAD-INPUT.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("BAD-INPUT.md lacks the table markers %q and %q", tableStart, tableEnd)
	}
	current := s[i+len(tableStart) : j]
	if current == got {
		return
	}
	if *update {
		if err := os.WriteFile("BAD-INPUT.md", []byte(s[:i+len(tableStart)]+got+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("BAD-INPUT.md's table is out of date; run go test ./docs -run TestBadInputTable -update. Want:\n%s", got)
}

// plainDriver is a lock driver with no optional capability.
type plainDriver struct{}

func (plainDriver) Acquire(context.Context, string, time.Duration) (locks.Lease, error) {
	return nil, locks.ErrNotAcquired
}
