package annotations

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

type Configured struct {
	_ Scheduled `method:"Run" cron:"${payroll.cron}" lock:"${payroll.lock:payroll-window}" lockTtl:"${payroll.ttl}"`
}

func (c *Configured) Run(context.Context) error { return nil }

func settings(m map[string]string) config.Values {
	return func(path string) (string, bool) {
		v, ok := m[path]
		return v, ok
	}
}

func TestPlaceholders(t *testing.T) {
	tasks, err := TasksWithValues(&Configured{}, settings(map[string]string{"payroll.cron": "0 2 * * *", "payroll.ttl": "45s"}))
	if err != nil {
		t.Fatal(err)
	}
	if sp := tasks[0].Spec(); sp.Cron != "0 2 * * *" || sp.Lock != "payroll-window" || sp.LockTTL != 45*time.Second {
		t.Fatalf("spec %+v", sp)
	}
	// Missing settings and missing configuration are reported, with the raw value.
	_, err = TasksWithValues(&Configured{}, settings(map[string]string{"payroll.ttl": "45s"}))
	if err == nil || !strings.Contains(err.Error(), `option cron = "${payroll.cron}": placeholder ${payroll.cron}: no setting payroll.cron`) {
		t.Fatalf("missing setting: %v", err)
	}
	_, err = Tasks(&Configured{})
	var ve *scheduling.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 2 || !strings.Contains(err.Error(), "needs configuration: provide an annotations.Resolver") {
		t.Fatalf("no configuration: %v", err)
	}
	for in, want := range map[string]string{"a${x}b${y:d}c": "a1bdc", "plain": "plain", "${x}": "1"} {
		got, err := expand(in, settings(map[string]string{"x": "1"}))
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${x", "${}", "${:d}"} {
		if _, err := expand(in, settings(nil)); err == nil {
			t.Errorf("expand(%q) accepted it", in)
		}
	}
}

// Controller resolves placeholders with the graph's Resolver (app.Module
// binds config.Values as one).
func TestControllerResolvesFromGraph(t *testing.T) {
	var s *scheduling.Scheduler
	app := fxtest.New(t,
		fx.Provide(func() *Configured { return &Configured{} }),
		fx.Supply(fx.Annotate(settings(map[string]string{"payroll.cron": "@hourly", "payroll.ttl": "2000"}), fx.As(new(Resolver)))),
		locks.Module,
		Controller[*Configured](),
		scheduling.Module,
		fx.Populate(&s),
	)
	app.RequireStart()
	defer app.RequireStop()
	if sp := s.Tasks()[0].Spec; sp.Cron != "@hourly" || sp.LockTTL != 2*time.Second {
		t.Fatalf("spec %+v", sp)
	}
}
