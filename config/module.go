package config

import (
	"reflect"

	"go.uber.org/fx"
)

// Module loads a T with [Load] and provides it, and its [Values] for
// placeholders. If T embeds [Framework] (it implements [HasFramework]), the
// module provides Framework as well, so that ndigo's own modules depend on
// Framework without knowing T.
//
// Loading happens during fx.New, even when nothing asks for T yet, so a bad
// file or variable fails fx.New with the load error rather than surfacing at
// the first use.
func Module[T any](opts LoadOptions) fx.Option {
	provides := []any{
		func() (T, error) { return Load[T](opts) },
		func(cfg T) Values { return ValuesOf(cfg) },
	}
	invoke := func(T) {}
	if _, ok := any(*new(T)).(HasFramework); ok && reflect.TypeFor[T]() != reflect.TypeFor[Framework]() {
		provides = append(provides, func(cfg T) Framework { return any(cfg).(HasFramework).FrameworkConfig() })
	}
	return fx.Module("config", fx.Provide(provides...), fx.Invoke(invoke))
}
