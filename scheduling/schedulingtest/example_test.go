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
// clock is stepped a second at a time, and the recorders show each fire ran
// at most once.
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
	var recs []*schedulingtest.Recorder
	var nodes []*scheduling.Scheduler
	for _, name := range []string{"a", "b"} {
		rec := &schedulingtest.Recorder{}
		s := scheduling.New(scheduling.Config{Clock: fc, Driver: d.Node(name, fc), Node: name,
			Listeners: []scheduling.Listener{rec}, Logger: slog.New(slog.DiscardHandler)})
		_ = s.Add(scheduling.NewTask(func(context.Context) error { return nil },
			scheduling.Name("report"), scheduling.Cron("@every 1s"), scheduling.Lock("report")))
		_ = s.Start()
		defer s.Stop(context.Background())
		recs, nodes = append(recs, rec), append(nodes, s)
	}
	if err := schedulingtest.Step(context.Background(), fc, 10*time.Second, time.Second, nodes...); err != nil {
		fmt.Println(err)
	}
	fmt.Println("fires run:", len(schedulingtest.Runs(recs...)) > 0)
	fmt.Println("at most once:", schedulingtest.AtMostOnce(recs...) == nil)
	// Output:
	// fires run: true
	// at most once: true
}
