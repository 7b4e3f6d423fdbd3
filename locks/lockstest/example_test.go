package lockstest_test

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

// A driver's tests run the suite with a harness that makes its drivers. A
// driver on a fake clock lets the suite advance time instead of sleeping;
// a driver on a server (Redis) leaves Clock nil and sets a TTL well above
// its round trip. NewDrivers pairs two drivers on one backend for the
// LostReply cases: a driver with a wire sets Loss and LoseReply (a proxy
// between A and its server that drops the reply to A's n-th command, as
// the Redis, PostgreSQL and etcd drivers' tests do) and Leaks; one without
// a wire, as here, is both nodes.
func Example() {
	testConformance := func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		driver := locks.NewInProcessDriver(locks.WithClock(clock))
		lockstest.Run(t, lockstest.Harness{
			NewDriver: func(*testing.T) locks.Driver { return driver },
			Clock:     clock,
			NewDrivers: func(*testing.T) lockstest.Drivers {
				return lockstest.Drivers{A: driver, B: driver, Loss: lockstest.NoWire}
			},
		})
	}
	_ = testConformance // in a _test.go file: func TestConformance(t *testing.T) { ... }
}
