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
		NewDriver: func(*testing.T) locks.Driver { return drivers },
		Clock:     fc,
	})
}

func TestInProcessConformanceRealClock(t *testing.T) {
	lockstest.Run(t, lockstest.Harness{
		NewDriver: func(*testing.T) locks.Driver { return locks.NewInProcessDriver() },
	})
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
