package locks_test

import (
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
		NewDriver: func(*testing.T) locks.Driver { return drivers },
		Clock:     fc,
	})
}

func TestInProcessConformanceRealClock(t *testing.T) {
	lockstest.Run(t, lockstest.Harness{
		NewDriver: func(*testing.T) locks.Driver { return locks.NewInProcessDriver() },
	})
}
