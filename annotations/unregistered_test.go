package annotations

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/fx"
)

type ledgerRepo struct{} // declares no task

func newPayroll() *PayrollController { return &PayrollController{} }

// A type that declares scheduled tasks but is only fx.Provided (or
// Supplied), wherever the option sits, fails startup naming the type and
// the fix; registered with Provide or Controller, or declaring no task, it
// starts.
func TestCheckRegisteredFindsUnregisteredControllers(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []fx.Option
		fail bool
	}{
		{"fx.Provide", []fx.Option{fx.Provide(newPayroll)}, true},
		{"nested in a module", []fx.Option{fx.Options(fx.Module("billing", fx.Provide(newPayroll)))}, true},
		{"annotated", []fx.Option{fx.Provide(fx.Annotate(newPayroll, fx.ResultTags(`name:"p"`)))}, true},
		{"supplied", []fx.Option{fx.Supply(&PayrollController{})}, true},
		{"annotations.Provide", []fx.Option{Provide(newPayroll)}, false},
		{"annotations.Provide in a module", []fx.Option{fx.Module("billing", Provide(newPayroll))}, false},
		{"Controller in another module", []fx.Option{fx.Provide(newPayroll), fx.Module("billing", Controller[*PayrollController]())}, false},
		{"Controller", []fx.Option{fx.Provide(newPayroll), Controller[*PayrollController]()}, false},
		{"no task", []fx.Option{fx.Provide(func() *ledgerRepo { return &ledgerRepo{} })}, false},
		{"provided as T, registered as *T", []fx.Option{fx.Supply(PayrollController{}), fx.Provide(newPayroll), Controller[*PayrollController]()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := fx.New(fx.NopLogger, fx.Options(c.opts...), CheckRegistered(c.opts...))
			err := app.Err()
			switch {
			case !c.fail && err != nil:
				t.Fatalf("err = %v, want none", err)
			case c.fail && (!errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), "*annotations.PayrollController declares scheduled tasks") ||
				!strings.Contains(err.Error(), "annotations.Provide(its constructor)")):
				t.Fatalf("err = %v, want the type named and the fix", err)
			}
		})
	}
}
