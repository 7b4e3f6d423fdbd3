package schedulingtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/clockskew"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/internal/testhook"
)

// SkewedClock returns a clock that reads c shifted by off, to model a node
// whose clock runs ahead (off > 0) or behind. Timers, tickers and sleeps are
// c's own: a duration lasts as long on both.
func SkewedClock(c clockwork.Clock, off time.Duration) clockwork.Clock {
	return clockskew.New(c, off)
}

// Settle waits until every scheduler in ss (started) has dispatched each fire due by
// its clock's now and no fire is in flight: each ran, was skipped or failed,
// and its record, logs and listener calls are done. A fire whose task blocks
// keeps Settle waiting; so does a lock wait, until its budget passes on the
// clock. It returns ctx's error if ctx ends first.
func Settle(ctx context.Context, ss ...*scheduling.Scheduler) error {
	for _, s := range ss {
		if err := testhook.WaitIdle(ctx, s); err != nil {
			return fmt.Errorf("schedulingtest: scheduler did not settle: %w", err)
		}
	}
	return nil
}

// Step advances fc by d in increments of inc (all of d at once if inc is 0
// or larger than d), and settles every scheduler in ss before the first
// increment and after each one. Schedulers may read fc through
// [SkewedClock]s. Fires fall due in increments, as they would in real time:
// a step of a minute in increments of a second runs each fire of a task that
// fires every second. It returns ctx's error if ctx ends first.
func Step(ctx context.Context, fc *clockwork.FakeClock, d, inc time.Duration, ss ...*scheduling.Scheduler) error {
	if inc <= 0 || inc > d {
		inc = d
	}
	if err := Settle(ctx, ss...); err != nil {
		return err
	}
	for done := time.Duration(0); done < d; done += inc {
		fc.Advance(min(inc, d-done))
		if err := Settle(ctx, ss...); err != nil {
			return err
		}
	}
	return nil
}
