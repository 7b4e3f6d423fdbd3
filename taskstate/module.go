package taskstate

import "go.uber.org/fx"

// Module provides the default [Store]: an [InProcess] store of the
// application, keeping [DefaultHistory] runs per task. A module that
// replaces it (redislocks.Module) decorates taskstate.Store at the root of
// the application, as it does locks.Driver; the default is then never
// built.
var Module = fx.Module("taskstate",
	fx.Provide(func() (Store, error) { return NewInProcess(0) }),
)
