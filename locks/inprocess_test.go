package locks_test

import (
	"context"
	"fmt"
	"time"

	"testing"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInProcessConformance(t *testing.T) {
	fc := clockwork.NewFakeClock()
	drivers := locks.NewInProcessDriver(locks.WithClock(fc))
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(*testing.T) locks.Driver { return drivers },
		Clock:      fc,
		NewDrivers: inProcessPair(func() *locks.InProcessDriver { return drivers }),
	})
}

func TestInProcessConformanceRealClock(t *testing.T) {
	lockstest.Run(t, lockstest.Harness{
		NewDriver:  func(*testing.T) locks.Driver { return locks.NewInProcessDriver() },
		NewDrivers: inProcessPair(func() *locks.InProcessDriver { return locks.NewInProcessDriver() }),
	})
}

// inProcessPair makes the in-process driver both nodes of the LostReply
// cases: it has no wire, so no reply is lost, and the cases check that a
// call followed by the other node's leaves the state they expect of a
// call whose reply was lost and resent. Its state is a map in the
// process, which holds nothing that Leaks would look for.
func inProcessPair(newDriver func() *locks.InProcessDriver) func(*testing.T) lockstest.Drivers {
	return func(*testing.T) lockstest.Drivers {
		d := newDriver()
		return lockstest.Drivers{A: d, B: d, Loss: lockstest.NoWire}
	}
}

// Leases of keys that expire and are never taken again do not pile up.
func TestInProcessForgetsExpiredKeys(t *testing.T) {
	fc := clockwork.NewFakeClock()
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	ctx := context.Background()
	for i := range 10_000 {
		if _, err := d.Acquire(ctx, fmt.Sprintf("once-%d", i), time.Second); err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Second)
	}
	if n := d.Len(); n > 128 {
		t.Fatalf("%d leases in the table after 10,000 expired keys, want at most 128", n)
	}
}
