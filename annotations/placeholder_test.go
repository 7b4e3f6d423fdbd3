package annotations

import (
	"context"
	"errors"
	"slices"
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
		got, _, err := expand(in, settings(map[string]string{"x": "1"}))
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${x", "${}", "${:d}"} {
		if _, _, err := expand(in, settings(nil)); err == nil {
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

// sourced is a SourceResolver over settings and their sources.
type sourced struct {
	config.Values
	sources map[string]string
}

func (s sourced) Source(path string) (string, bool) {
	src, ok := s.sources[path]
	return src, ok
}

type BadPlaceholders struct {
	_ Scheduled `method:"Run" cron:"${payroll.cron}" lock:"${payroll.lock:payroll-window}" lockTtl:"${payroll.ttl}" maxRunTime:"${payroll.max:1m}${payroll.unit:x}"`
}

func (c *BadPlaceholders) Run(context.Context) error { return nil }

// A bad value that placeholders supplied is reported with the settings
// they read and, from a SourceResolver, where each was set; the rules
// found by the tag reader (a duration) and by validation (a cron
// expression) alike.
func TestPlaceholderProblemsNameTheSetting(t *testing.T) {
	values := settings(map[string]string{"payroll.cron": "every 5s", "payroll.ttl": "soon"})
	_, err := TasksWithValues(&BadPlaceholders{}, sourced{values, map[string]string{
		"payroll.cron": "env APP_PAYROLL_CRON",
		"payroll.ttl":  "app.yaml:7",
	}})
	var ve *scheduling.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("err = %v; want 3 problems", err)
	}
	for _, want := range []string{
		`BadPlaceholders.Run: option cron = "every 5s" (from ${payroll.cron}, set by env APP_PAYROLL_CRON): must be a valid cron expression (`,
		`; did you mean "@every 5s"?)`,
		`BadPlaceholders.Run: option lockTtl = "soon" (from ${payroll.ttl}, set by app.yaml:7): duration "soon": want a Go duration`,
		`BadPlaceholders.Run: option maxRunTime = "1mx" (from ${payroll.max:1m}, the placeholder's default: no setting payroll.max; ` +
			`${payroll.unit:x}, the placeholder's default: no setting payroll.unit): duration "1mx"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %s", err, want)
		}
	}
	if i := slices.IndexFunc(ve.Problems, func(p scheduling.Problem) bool { return p.Option == "cron" }); i < 0 ||
		ve.Problems[i].From != "${payroll.cron}, set by env APP_PAYROLL_CRON" {
		t.Errorf("Problems = %+v; want cron's From the placeholder and its source", ve.Problems)
	}
	// A plain Resolver names the setting alone.
	_, err = TasksWithValues(&BadPlaceholders{}, values)
	if want := `option cron = "every 5s" (from ${payroll.cron}): must be`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to contain %s", err, want)
	}
	// A good value says nothing of where it came from.
	if _, err := TasksWithValues(&Configured{}, sourced{settings(map[string]string{"payroll.cron": "@hourly", "payroll.ttl": "45s"}), nil}); err != nil {
		t.Errorf("good values: %v", err)
	}
}
