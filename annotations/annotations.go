package annotations

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"

	"go.uber.org/fx"

	"github.com/ndigo/ndigo/internal/declare"
	"github.com/ndigo/ndigo/scheduling"
)

// Scheduled is the marker field type that declares one scheduled task on a
// controller struct; its tags name the method and set the options. It has no
// size, so markers cost the controller nothing.
type Scheduled struct{}

// ErrNoController reports a value that is not a controller: not a struct or
// a pointer to one, or nil.
var ErrNoController = errors.New("annotations: not a controller")

var (
	scheduledType = reflect.TypeFor[Scheduled]()
	taskFuncType  = reflect.TypeFor[func(context.Context) error]()
)

// Tasks reads controller's Scheduled fields, in field order, and returns one
// task per field bound to controller's methods. controller is a struct or,
// usually, a pointer to one (pointer-receiver methods need the pointer).
// Problems in the tags, missing methods and wrong signatures ride in the
// tasks as declaration errors, so that adding them to a scheduler reports
// them beside every other problem; Tasks also returns them, with the spec
// validation of scheduling.Validate, as one *scheduling.ValidationError.
func Tasks(controller any) ([]scheduling.Task, error) {
	return TasksWithValues(controller, nil)
}

// A Resolver gives the value of a ${path} placeholder: the setting at
// path, and whether there is one. config.Values is one.
type Resolver interface {
	Lookup(path string) (string, bool)
}

// A SourceResolver is a Resolver that also says where each setting was
// set, as a phrase for messages: "env APP_PAYROLL_CRON", "app.yaml:3". A
// bad value that a placeholder supplied is then reported with its setting
// and that source, e.g. option cron = "every 5s" (from ${payroll.cron},
// set by env APP_PAYROLL_CRON). app.Module's Resolver is one, from
// config.Module's Values and Sources; with a plain Resolver the message
// names the setting alone.
type SourceResolver interface {
	Resolver
	Source(path string) (string, bool)
}

// ResolverFunc is a function used as a [Resolver].
type ResolverFunc func(path string) (string, bool)

// Lookup returns f(path).
func (f ResolverFunc) Lookup(path string) (string, bool) { return f(path) }

// TasksWithValues is [Tasks] with ${path} placeholders in tag values
// resolved by values, as [Controller] does with the Resolver in the graph.
// A placeholder without a value, and without a default (${path:default}),
// is a problem like any other; so is any placeholder when values is nil.
// A problem with a value that placeholders supplied names them, the
// settings they read and, if values is a [SourceResolver], where those
// were set.
func TasksWithValues(controller any, values Resolver) ([]scheduling.Task, error) {
	tasks, err := declared(controller, values)
	if err != nil {
		return nil, err
	}
	return tasks, scheduling.Validate(tasks...)
}

// declared returns the tasks declared on controller, not yet validated:
// problems ride in them, for the scheduler they are added to (or Tasks) to
// list. Its error wraps ErrNoController.
func declared(controller any, values Resolver) ([]scheduling.Task, error) {
	v := reflect.ValueOf(controller)
	if !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, fmt.Errorf("%w: %T is nil", ErrNoController, controller)
	}
	st := v.Type()
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %T is not a struct or a pointer to one", ErrNoController, controller)
	}
	var tasks []scheduling.Task
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Type != scheduledType {
			continue
		}
		tasks = append(tasks, fieldTask(v, st, f, values))
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%w: %s has no annotations.Scheduled field", ErrNoController, st)
	}
	return tasks, nil
}

// Controller registers the tasks declared on T with scheduling.Module. T
// must be in the fx graph; usually it is a pointer type (*PayrollController)
// so that pointer-receiver methods bind. ${path} placeholders in tag values
// are resolved with the [Resolver] in the graph, if any (app.Module provides
// config.Module's values as one). Registration order is the order of Controller calls, then
// field order.
func Controller[T any]() fx.Option {
	return fx.Options(scheduling.Provide(func(p controllerParams[T]) ([]scheduling.Task, error) {
		// Problems ride in the tasks; scheduling.Module validates and lists
		// them all, once.
		return declared(p.Controller, p.Values)
	}), registers(reflect.TypeFor[T]()))
}

// Provide provides the controller that constructor returns to the fx graph,
// as fx.Provide does, and registers its tasks, as [Controller] does: one
// call per controller instead of two.
//
//	annotations.Provide(NewPayrollController) // func(...) *PayrollController
//
// constructor is a function whose first result is the controller type,
// optionally followed by an error; its parameters come from the graph.
func Provide(constructor any) fx.Option {
	ct := reflect.TypeOf(constructor)
	if ct == nil || ct.Kind() != reflect.Func || ct.NumOut() < 1 || ct.NumOut() > 2 ||
		(ct.NumOut() == 2 && ct.Out(1) != errorType) || reflect.ValueOf(constructor).IsNil() {
		return fx.Error(fmt.Errorf("annotations.Provide: constructor %T must be a non-nil function returning a controller, optionally followed by error", constructor))
	}
	params := reflect.StructOf([]reflect.StructField{
		{Name: "In", Type: reflect.TypeFor[fx.In](), Anonymous: true},
		{Name: "Controller", Type: ct.Out(0)},
		{Name: "Values", Type: reflect.TypeFor[Resolver](), Tag: `optional:"true"`},
	})
	register := reflect.MakeFunc(reflect.FuncOf([]reflect.Type{params},
		[]reflect.Type{reflect.TypeFor[[]scheduling.Task](), errorType}, false),
		func(args []reflect.Value) []reflect.Value {
			var values Resolver
			if v := args[0].Field(2); !v.IsNil() {
				values = v.Interface().(Resolver)
			}
			tasks, err := declared(args[0].Field(1).Interface(), values)
			errV := reflect.Zero(errorType)
			if err != nil {
				errV = reflect.ValueOf(&err).Elem()
			}
			return []reflect.Value{reflect.ValueOf(tasks), errV}
		})
	return fx.Options(fx.Provide(constructor), scheduling.Provide(register.Interface()), registers(ct.Out(0)))
}

var errorType = reflect.TypeFor[error]()

type controllerParams[T any] struct {
	fx.In
	Controller T
	Values     Resolver `optional:"true"`
}

// fieldTask builds the task that the Scheduled field f of struct type st
// declares on controller v.
func fieldTask(v reflect.Value, st reflect.Type, f reflect.StructField, values Resolver) scheduling.Task {
	typeName := st.Name()
	if typeName == "" {
		typeName = st.String()
	}
	pairs, err := parseTag(string(f.Tag))
	if err != nil {
		// The tag's options are unknown; validation reports the tag alone
		// rather than every option it seems to lack.
		return scheduling.NewTask(unbound, origin(typeName, fmt.Sprintf("field %d", f.Index[0])),
			invalid("tag", string(f.Tag), err.Error()))
	}
	var method string
	for _, p := range pairs {
		if p.key == "method" {
			method = p.value
		}
	}
	where := method
	if where == "" {
		where = fmt.Sprintf("field %d", f.Index[0])
	}
	opts := []scheduling.Option{origin(typeName, where)}
	fn := bindMethod(v, typeName, method, &opts)
	for _, p := range pairs {
		if p.key == "method" {
			continue
		}
		raw := p.value
		var from string
		if p.value, from, err = expand(p.value, values); err != nil {
			// Validation reports this alone, not the rules that depend on
			// the option (cron is required, lock options need a lock).
			opts = append(opts, invalid(p.key, raw, err.Error()))
			continue
		}
		if from != "" {
			// Every problem with the value, here or in validation, says
			// which settings supplied it.
			opts = append(opts, declare.From(p.key, from).(scheduling.Option))
		}
		opts = append(opts, option(p))
	}
	return scheduling.NewTask(fn, opts...)
}

// unbound stands in for a method that cannot be bound; its task always
// fails validation, so it never runs.
func unbound(context.Context) error { return errors.New("annotations: unbound method") }

// bindMethod returns v's method name as a task func, or unbound with the
// problem appended to opts.
func bindMethod(v reflect.Value, typeName, name string, opts *[]scheduling.Option) func(context.Context) error {
	want := "func(context.Context) error"
	if name == "" {
		*opts = append(*opts, invalid("method", "", "is required: name the method to run, of type "+want))
		return unbound
	}
	m := v.MethodByName(name)
	if !m.IsValid() {
		rule := fmt.Sprintf("%s has no method %s; want a method %s(ctx context.Context) error", typeName, name, name)
		if v.Kind() != reflect.Pointer {
			if _, ok := reflect.PointerTo(v.Type()).MethodByName(name); ok {
				rule = fmt.Sprintf("%s has method %s only on *%s: register a *%s", typeName, name, typeName, typeName)
			}
		}
		*opts = append(*opts, invalid("method", name, rule))
		return unbound
	}
	if m.Type() != taskFuncType {
		*opts = append(*opts, invalid("method", name,
			fmt.Sprintf("%s.%s has signature %s; want %s", typeName, name, m.Type(), want)))
		return unbound
	}
	if d := declaringType(v.Type(), name); d != typeName {
		// Named as the method value would be; problems still point at the
		// controller whose tag declared the task.
		*opts = append(*opts, scheduling.Name(d+"."+name))
	}
	return m.Interface().(func(context.Context) error)
}

// declaringType names the type that declares method name of t, the rule
// by which a method value names a task in scheduling.NewTask: a method
// promoted from an embedded base is base's, whichever controller embeds it.
// Go's method sets do not say where a method is declared, but a promoted
// one is a compiler-generated wrapper, so the search descends through
// embedded fields, shallowest first, until it finds the method's own body.
func declaringType(t reflect.Type, name string) string {
	level := []reflect.Type{t}
	for len(level) > 0 {
		var next []reflect.Type
		for _, t := range level {
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if declares(t, name) || declares(reflect.PointerTo(t), name) {
				return bareName(t)
			}
			if t.Kind() != reflect.Struct {
				continue
			}
			for i := range t.NumField() {
				if f := t.Field(i); f.Anonymous {
					if _, ok := reflect.PointerTo(f.Type).MethodByName(name); ok {
						next = append(next, f.Type)
					} else if _, ok := f.Type.MethodByName(name); ok {
						next = append(next, f.Type)
					}
				}
			}
		}
		level = next
	}
	return bareName(t)
}

// declares reports whether t's method name has a body of its own, rather
// than being a wrapper the compiler generated for a promoted method or for
// a value method called through a pointer.
func declares(t reflect.Type, name string) bool {
	m, ok := t.MethodByName(name)
	if !ok || t.Kind() == reflect.Interface {
		return ok
	}
	f := runtime.FuncForPC(m.Func.Pointer())
	if f == nil {
		return false
	}
	file, _ := f.FileLine(f.Entry())
	return file != "<autogenerated>"
}

func bareName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

// invalid and origin are the tag reader's options (package declare).
func invalid(option, value, rule string) scheduling.Option {
	return declare.Invalid(option, value, rule).(scheduling.Option)
}

func origin(controllerType, method string) scheduling.Option {
	return declare.Origin(controllerType, method).(scheduling.Option)
}
