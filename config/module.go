package config

import (
	"reflect"

	"go.uber.org/fx"
)

// Module loads a T with [Load] and provides it, its [Values] for
// placeholders and the [Sources] of those values, and each struct T
// embeds (an anonymous field, usually `yaml:",inline"`) as a value of its
// own type: modules that read one section, such as app.Module reading
// app.Framework, depend on that type without knowing T.
//
// Loading happens during fx.New, even when nothing asks for T yet, so a bad
// file or variable fails fx.New with the load error rather than surfacing at
// the first use.
func Module[T any](opts LoadOptions) fx.Option {
	provides := []any{
		func() (T, Sources, error) { return loadSources[T](opts) },
		func(cfg T) Values { return ValuesOf(cfg) },
	}
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.Anonymous || !f.IsExported() || f.Type.Kind() != reflect.Struct {
				continue
			}
			section := reflect.FuncOf([]reflect.Type{t}, []reflect.Type{f.Type}, false)
			provides = append(provides, reflect.MakeFunc(section, func(args []reflect.Value) []reflect.Value {
				return []reflect.Value{args[0].Field(i)}
			}).Interface())
		}
	}
	return fx.Module("config", fx.Provide(provides...), fx.Invoke(func(T) {}))
}
