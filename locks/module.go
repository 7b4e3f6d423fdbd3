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
