package locks

import "go.uber.org/fx"

// Module provides the default [Driver]: an [InProcessDriver] on the
// process-wide lease table. Decorate locks.Driver at the root of the app to
// replace it; see the package documentation.
var Module = fx.Module("locks",
	fx.Provide(func() Driver { return newDefaultDriver() }),
)

// newDefaultDriver makes the default driver; tests count its calls.
var newDefaultDriver = func() Driver { return NewInProcessDriver() }

// ConfiguredGroup is the fx value group in which a configuration module that
// replaces the lock driver (as redislocks.Module does) also puts the driver
// it built. The scheduler's module checks that the driver it was given is
// that one, so that a replacement that did not reach it (a decoration
// inside a nested fx.Module applies to that module only) fails startup
// instead of leaving the app on in-process locks.
const ConfiguredGroup = "locks.configured"

// Override returns the options with which a configuration module (as
// redislocks.Module and pglocks.Module are) replaces the default Driver:
// an fx.Module named module holding opts and newDriver, an fx constructor
// of the replacement Driver, which is provided under the name
// `name:"<module>.driver"`, put in ConfiguredGroup, and decorates Driver.
// The decoration returns the replacement without asking for the default,
// so the default's constructor is never called.
//
// Include the result at the root of the app, beside Module, not inside
// another fx.Module: fx applies a decoration to the module that declares
// it and that module's children only; ConfiguredGroup makes a nested one
// fail startup naming the fix.
func Override(module string, newDriver any, opts ...fx.Option) fx.Option {
	name := `name:"` + module + `.driver"`
	same := func(d Driver) Driver { return d }
	return fx.Options(
		fx.Module(module, append(opts,
			fx.Provide(fx.Annotate(newDriver, fx.ResultTags(name))),
			fx.Provide(fx.Annotate(same, fx.ParamTags(name), fx.ResultTags(`group:"`+ConfiguredGroup+`"`))),
		)...),
		fx.Decorate(fx.Annotate(same, fx.ParamTags(name))),
	)
}
