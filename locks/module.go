package locks

import "go.uber.org/fx"

// Module provides the default Driver: an InProcessDriver on the process-wide
// lease table. To replace it app-wide, decorate locks.Driver at the root of
// the application; the in-process constructor is then never called:
//
//	fx.New(
//		locks.Module,
//		fx.Decorate(func(c *redis.Client) (locks.Driver, error) {
//			return redislocks.New(redislocks.Options{Client: c, Namespace: "prod"})
//		}),
//		...
//	)
var Module = fx.Module("locks",
	fx.Provide(func() Driver { return NewInProcessDriver() }),
)
