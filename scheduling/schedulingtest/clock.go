package schedulingtest

import (
	"context"
	"errors"
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

// SettleBlocked is [Settle] for schedulers some of whose runs block until
// the test lets them go: it waits until every scheduler in ss (started) has
// dispatched each fire, request poll and heartbeat due by its clock's now,
// and the fires in flight across them are just the runs that blocked
// counts, each of which must be a run of one of ss that is blocked now (a
// [Gate]'s Blocked, as a task's run waits in [Gate.Wait]). A run that ends
// or blocks changes what SettleBlocked waits for: it waits for the fires
// that a blocked run holds back, and for the run that is about to block. A
// nil blocked counts none: SettleBlocked is then Settle. It polls the
// schedulers on the real clock and returns ctx's error if ctx ends first.
func SettleBlocked(ctx context.Context, blocked func() int, ss ...*scheduling.Scheduler) error {
	if blocked == nil {
		return Settle(ctx, ss...)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		quiet, flying := true, 0
		for _, s := range ss {
			q, n := testhook.Quiet(s)
			quiet, flying = quiet && q, flying+n
		}
		// Read after the schedulers: while they are quiet, a run that blocks
		// now was in flight then.
		held := blocked()
		if quiet && flying == held {
			return nil
		}
		if quiet && held > flying {
			return fmt.Errorf("schedulingtest: %d runs blocked, %d fires in flight: blocked counts runs of other schedulers", held, flying)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("schedulingtest: scheduler did not settle (%d fires in flight, %d of them blocked): %w", flying, held, ctx.Err())
		case <-tick.C:
		}
	}
}

// Step advances fc by d in increments of inc (all of d at once if inc is 0
// or larger than d), and settles every scheduler in ss before the first
// increment and after each one. Schedulers may read fc through
// [SkewedClock]s. Fires fall due in increments, as they would in real time:
// a step of a minute in increments of a second runs each fire of a task that
// fires every second. It returns ctx's error if ctx ends first.
func Step(ctx context.Context, fc *clockwork.FakeClock, d, inc time.Duration, ss ...*scheduling.Scheduler) error {
	return StepBlocked(ctx, fc, d, inc, nil, ss...)
}

// StepBlocked is [Step] for schedulers some of whose runs block: it settles
// with [SettleBlocked] and blocked. Each increment thus ends only once every
// fire, poll and record that the clock's move started has ended, but for
// the runs blocked; a run that blocks from its start settles as blocked in
// the increment that fired it.
func StepBlocked(ctx context.Context, fc *clockwork.FakeClock, d, inc time.Duration, blocked func() int, ss ...*scheduling.Scheduler) error {
	if inc <= 0 || inc > d {
		inc = d
	}
	if err := SettleBlocked(ctx, blocked, ss...); err != nil {
		return err
	}
	for done := time.Duration(0); done < d; done += inc {
		fc.Advance(min(inc, d-done))
		if err := SettleBlocked(ctx, blocked, ss...); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops each scheduler in ss in turn, advancing fc meanwhile: a
// spreading node's Stop hands its tasks over for two heartbeats on its
// clock, which on a fake clock pass only when the test moves it. It returns
// the schedulers' errors joined.
func Stop(ctx context.Context, fc *clockwork.FakeClock, ss ...*scheduling.Scheduler) error {
	var errs []error
	for _, s := range ss {
		done := make(chan error, 1)
		go func() { done <- s.Stop(ctx) }()
		tick := time.NewTicker(time.Millisecond) // no result depends on the period
	wait:
		for {
			select {
			case err := <-done:
				errs = append(errs, err)
				break wait
			case <-tick.C:
				fc.Advance(100 * time.Millisecond)
			}
		}
		tick.Stop()
	}
	return errors.Join(errs...)
}
