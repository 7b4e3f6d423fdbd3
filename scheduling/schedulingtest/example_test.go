package schedulingtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// Two nodes share a lock driver whose calls fail now and then; the fake
// clock is stepped a second at a time, and the nodes' recorders show each
// fire ran at most once.
func Example() {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := schedulingtest.NewDriver(locks.NewInProcessDriver(locks.WithClock(fc)))
	var calls atomic.Int32
	d.SetFaults(func(c schedulingtest.Call) schedulingtest.Fault {
		if calls.Add(1)%5 == 0 { // every fifth call fails
			return schedulingtest.Fault{Err: errors.New("connection reset")}
		}
		return schedulingtest.Fault{}
	})
	c, err := schedulingtest.StartCluster(scheduling.Config{Clock: fc, Logger: slog.New(slog.DiscardHandler)},
		[]locks.Driver{d.Node("a", fc), d.Node("b", fc)}, // StartCluster names the nodes a, b, …
		func() []scheduling.Task {
			return []scheduling.Task{scheduling.NewTask(func(context.Context) error { return nil },
				scheduling.Name("report"), scheduling.Cron("@every 1s"), scheduling.Lock("report"))}
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop(context.Background())
	if err := schedulingtest.Step(context.Background(), fc, 10*time.Second, time.Second, c.Schedulers...); err != nil {
		fmt.Println(err)
	}
	fmt.Println("fires run:", len(c.Runs()) > 0)
	fmt.Println("at most once:", c.AtMostOnce() == nil)
	// Output:
	// fires run: true
	// at most once: true
}
