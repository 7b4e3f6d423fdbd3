package locks

import (
	"context"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
)

// stubDriver stands in for a durable driver registered by a configuration
// module.
type stubDriver struct{ Driver }

func countDefault(t *testing.T) *int {
	calls := new(int)
	orig := newDefaultDriver
	newDefaultDriver = func() Driver { *calls++; return orig() }
	t.Cleanup(func() { newDefaultDriver = orig })
	return calls
}

func TestModuleProvidesInProcessDefault(t *testing.T) {
	calls := countDefault(t)
	var d Driver
	fxtest.New(t, Module, fx.Populate(&d)).RequireStart().RequireStop()
	if _, ok := d.(*InProcessDriver); !ok {
		t.Fatalf("default driver is %T, want *InProcessDriver", d)
	}
	if *calls != 1 {
		t.Fatalf("default constructor called %d times, want 1", *calls)
	}
	l, err := d.Acquire(context.Background(), "module-default", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
}

func TestRootDecorateReplacesDriverAppWide(t *testing.T) {
	calls := countDefault(t)
	durable := &stubDriver{}
	var fromRoot Driver
	var fromModule Driver
	fxtest.New(t,
		Module,
		fx.Module("consumer", fx.Invoke(func(d Driver) { fromModule = d })),
		fx.Decorate(func() Driver { return durable }),
		fx.Populate(&fromRoot),
	).RequireStart().RequireStop()
	if fromRoot != durable || fromModule != durable {
		t.Fatalf("root sees %T, a child module sees %T; want the decorated driver in both", fromRoot, fromModule)
	}
	if *calls != 0 {
		t.Fatalf("in-process constructor called %d times under an override, want 0", *calls)
	}
}
