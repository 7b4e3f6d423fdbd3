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
