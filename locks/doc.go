// Package locks models a lock as a lease with a fencing token, the primitive
// that makes a scheduled task run on exactly one node.
//
// # Leases, not booleans
//
// Acquiring a key sets a TTL, and the holder must finish (or [Lease.Extend])
// inside it. Every acquisition receives a fresh fencing token, strictly
// greater than every token issued before for that key. Only the handle
// holding the current token can extend or release: a stale holder (its lease
// expired, or another node acquired since) gets [ErrLeaseLost] and can never
// touch a successor's lease. Expired leases simply expire: no sweeper, no
// leader, no coordinator.
//
// Acquire never blocks: a held key answers [ErrNotAcquired] at once, and the
// caller skips. [Wait] waits for a held key within a budget; drivers that
// implement [Watcher] wake waiters as soon as the key is released.
//
// Code running under a lease should stop when [Lease.Done] closes; [WithLease]
// gives it a context that is cancelled then, and [FromContext] hands it the
// token to pass to the storage it writes, so that storage can reject writes
// from a stale holder.
//
// # Drivers
//
// [InProcessDriver] keeps leases in this process: correct on one node,
// meaningless across nodes. Every InProcessDriver on the real clock shares one
// process-wide lease table, so two schedulers in one process never both run a
// locked task. The Redis driver in package redislocks coordinates nodes.
// Every driver passes the conformance suite in package lockstest. A driver
// whose backend can be down implements [HealthChecker], which the admin
// endpoints' /healthz calls.
//
// # Replacing the default driver
//
// [Module] provides the in-process driver as the app's [Driver]. A
// configuration module replaces it app-wide by decorating the same type at
// the root of the application; the in-process constructor is then never
// called:
//
//	fx.New(
//		locks.Module,
//		fx.Decorate(func(c *redis.Client) (locks.Driver, error) {
//			return redislocks.New(redislocks.Options{Client: c, Namespace: "prod"})
//		}),
//		// ...
//	)
//
// [Override] is that pattern for a driver package's own configuration
// module: it also registers the driver in [ConfiguredGroup], so that a
// replacement that did not reach the scheduler fails startup.
package locks
