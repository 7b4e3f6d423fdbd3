package scheduling

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/locks"
)

type Ledger struct{}

func (l *Ledger) Close(context.Context) error { return nil }
func (l *Ledger) Audit(context.Context) error { return nil }

func TestModuleRegistersInProvideOrder(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	var s *Scheduler
	// Many registrations, so that an unordered value group would show.
	var opts []fx.Option
	for i := range 20 {
		name := string(rune('a' + i))
		opts = append(opts, Provide(func(l *Ledger) Task {
			return NewTask(l.Close, Cron("@every 1s"), Name(name), Lock("ledger"))
		}))
	}
	app := fxtest.New(t,
		fx.Supply(&Ledger{}),
		fx.Provide(func() clockwork.Clock { return fc }),
		fx.Provide(func() locks.Driver { return locks.NewInProcessDriver(locks.WithClock(fc)) }),
		fx.Provide(func() *slog.Logger { return slog.New(&logRecorder{}) }),
		fx.Provide(fx.Annotate(func() string { return "node-7" }, fx.ResultTags(`name:"scheduling.node"`))),
		fx.Options(opts...),
		Provide(func(l *Ledger) ([]Task, error) {
			return []Task{NewTask(l.Audit, Cron("@hourly"))}, nil
		}),
		Module,
		fx.Populate(&s),
	)
	app.RequireStart()
	infos := s.Tasks()
	if len(infos) != 21 {
		t.Fatalf("%d tasks, want 21", len(infos))
	}
	for i := range 20 {
		if want := string(rune('a' + i)); infos[i].Name != want {
			t.Fatalf("task %d is %s, want %s: registration order lost", i, infos[i].Name, want)
		}
	}
	if infos[20].Name != "Ledger.Audit" {
		t.Fatalf("last task %s", infos[20].Name)
	}
	waitIdle(t, s)
	fc.Advance(time.Second)
	waitIdle(t, s)
	// All twenty share a lock on one tick: the first registered ran.
	for i, info := range s.Tasks()[:20] {
		want := OutcomeLockHeld
		if i == 0 {
			want = OutcomeOK
		}
		if info.Last.Outcome != want || info.Last.Node != "node-7" {
			t.Fatalf("task %s: last %+v, want %s on node-7", info.Name, info.Last, want)
		}
	}
	app.RequireStop()
}

func TestModuleFailsListingEveryProblem(t *testing.T) {
	app := fx.New(
		fx.NopLogger,
		fx.Supply(&Ledger{}),
		Provide(func(l *Ledger) Task { return NewTask(l.Close, Cron("not cron"), Lock("k")) }),
		Provide(func(l *Ledger) []Task {
			return []Task{NewTask(l.Audit, Cron("@daily"), LockTTL(time.Second))}
		}),
		Module,
	)
	err := app.Err()
	if !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("fx.New: %v, want ErrInvalidSpec", err)
	}
	for _, frag := range []string{
		`Ledger.Close: option cron = "not cron": must be a valid cron expression`,
		`Ledger.Close: option lock = "k": needs a lock driver`,
		`Ledger.Audit: option lockTtl = "1s": needs lock`,
	} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("fx.New error lacks %q:\n%v", frag, err)
		}
	}
}

func TestProvideRejectsBadConstructors(t *testing.T) {
	for _, c := range []any{nil, 42, func() int { return 0 }, func() (Task, int) { return Task{}, 0 }} {
		app := fx.New(fx.NopLogger, Provide(c), Module)
		if err := app.Err(); err == nil || !strings.Contains(err.Error(), "scheduling.Provide") {
			t.Errorf("Provide(%T): %v", c, err)
		}
	}
	app := fx.New(fx.NopLogger, Provide(func() (Task, error) { return Task{}, errors.New("no tasks today") }), Module)
	if err := app.Err(); err == nil || !strings.Contains(err.Error(), "no tasks today") {
		t.Errorf("constructor error not surfaced: %v", err)
	}
}
