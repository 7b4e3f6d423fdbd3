package annotations

import (
	"fmt"
	"reflect"
	"strings"

	"go.uber.org/fx"
)

// registeredGroup is the value group in which Controller and Provide name
// the controller types whose tasks they register.
const registeredGroup = "annotations.registered"

// registered names a controller type whose tasks are registered.
type registered struct{ t reflect.Type }

func registers(t reflect.Type) fx.Option {
	return fx.Supply(fx.Annotate(registered{t}, fx.ResultTags(`group:"`+registeredGroup+`"`)))
}

type registeredParams struct {
	fx.In
	Registered []registered `group:"annotations.registered"`
}

// CheckRegistered returns an option that fails the application's start
// when one of opts provides (fx.Provide, fx.Supply, in any fx.Options or
// fx.Module) a type that declares annotations.Scheduled fields without
// registering its tasks ([Provide], [Controller]): those tasks would never
// run, and nothing else would say so. The error names the type and the
// fix. app.New (and app.Run) apply it to the options they are given.
//
// It reads the options through reflection of fx's own types: should a
// future fx change them, it finds nothing and checks nothing, rather than
// fail an application.
func CheckRegistered(opts ...fx.Option) fx.Option {
	var declaring []reflect.Type
	seen := map[reflect.Type]bool{}
	for _, t := range providedTypes(opts) {
		if !seen[t] && declaresTasks(t) {
			seen[t] = true
			declaring = append(declaring, t)
		}
	}
	if len(declaring) == 0 {
		return fx.Options()
	}
	return fx.Invoke(func(p registeredParams) error {
		// T and *T are one controller: a registration of either counts.
		done := map[reflect.Type]bool{}
		for _, r := range p.Registered {
			done[r.t] = true
			if r.t.Kind() == reflect.Pointer {
				done[r.t.Elem()] = true
			} else {
				done[reflect.PointerTo(r.t)] = true
			}
		}
		var missing []string
		for _, t := range declaring {
			if !done[t] {
				missing = append(missing, t.String())
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s declares scheduled tasks (annotations.Scheduled fields) but is provided with fx.Provide or fx.Supply, "+
			"so its tasks would never run: provide it with annotations.Provide(its constructor) instead, "+
			"or add annotations.Controller[%s]()", ErrNoController, strings.Join(missing, ", "), missing[0])
	})
}

// declaresTasks reports whether t, or what it points to, is a struct with an
// annotations.Scheduled field.
func declaresTasks(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).Type == scheduledType {
			return true
		}
	}
	return false
}

var optionType = reflect.TypeFor[fx.Option]()

// providedTypes returns the types that opts' fx.Provide constructors
// return and fx.Supply values have, read through reflection of fx's
// option types (fields Targets, Target and options).
func providedTypes(opts []fx.Option) []reflect.Type {
	var out []reflect.Type
	var walk func(v reflect.Value, depth int)
	target := func(v reflect.Value) {
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct { // fx.Annotate's annotated{Target: ...}
			if f := v.FieldByName("Target"); f.IsValid() {
				v = f
				for v.Kind() == reflect.Interface && !v.IsNil() {
					v = v.Elem()
				}
			}
		}
		if !v.IsValid() {
			return
		}
		t := v.Type()
		if t.Kind() != reflect.Func {
			out = append(out, t) // a supplied value
			return
		}
		for i := range t.NumOut() {
			out = append(out, t.Out(i))
		}
	}
	walk = func(v reflect.Value, depth int) {
		if depth > 32 || !v.IsValid() {
			return
		}
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), depth+1)
			}
		case reflect.Slice:
			if v.Type().Elem() == optionType {
				for i := range v.Len() {
					walk(v.Index(i), depth+1)
				}
			}
		case reflect.Struct:
			if f := v.FieldByName("Targets"); f.IsValid() && f.Kind() == reflect.Slice {
				for i := range f.Len() {
					target(f.Index(i))
				}
			}
			if f := v.FieldByName("options"); f.IsValid() {
				walk(f, depth+1)
			}
		}
	}
	for _, o := range opts {
		walk(reflect.ValueOf(&o).Elem(), 0)
	}
	return out
}
