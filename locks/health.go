package locks

import "context"

// A HealthChecker is a backend that can tell whether it works now: a lock
// driver, or a task state store (taskstate.Store) beside it. The admin
// endpoints' /healthz calls CheckHealth on the scheduler's driver (found
// through wrappers with [As]) and on its store whenever they implement it,
// so a driver of your own gets a health check by implementing the method.
// Drivers and stores that keep their state in the process (the in-process
// ones) need not: they cannot be down while the process runs.
type HealthChecker interface {
	// CheckHealth returns nil if the backend answers the calls the driver
	// or store makes, within ctx (its deadline bounds the check), and
	// otherwise an error that says what failed and where (the server's
	// address, never a password or a URL's userinfo). It costs about one
	// round trip and changes nothing.
	CheckHealth(ctx context.Context) error
}
