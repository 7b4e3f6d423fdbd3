package scheduling_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/annotations"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

type PayrollController struct {
	closed chan scheduling.Run
}

func (c *PayrollController) CloseBooks(ctx context.Context) error {
	run, _ := scheduling.RunFromContext(ctx)
	c.closed <- run
	return nil
}

// The builder form, run on a fake clock: the task fires at 02:00 and runs
// under the payroll-window lease.
func Example() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 1, 59, 0, 0, time.UTC))
	s := scheduling.New(scheduling.Config{
		Driver:   locks.NewInProcessDriver(locks.WithClock(clock)),
		Clock:    clock,
		Logger:   slog.New(slog.DiscardHandler),
		Node:     "node-1",
		Location: time.UTC,
	})
	c := &PayrollController{closed: make(chan scheduling.Run, 1)}
	err := s.Add(scheduling.NewTask(c.CloseBooks,
		scheduling.Cron("0 2 * * *"),
		scheduling.Lock("payroll-window"),
		scheduling.LockTTL(time.Minute)))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Start()

	_ = clock.BlockUntilContext(context.Background(), 1) // the scheduler's one timer
	clock.Advance(time.Minute)
	run := <-c.closed
	fmt.Println(run.Task, run.Fire.Format(time.RFC3339), run.Node, run.Lease.Key())
	// The next fire is computed once the due fires have started; after Stop
	// (which waits for the loop and the runs) it is settled.
	_ = s.Stop(context.Background())
	fmt.Println("next:", s.Tasks()[0].Next.Format(time.RFC3339))
	// Output:
	// PayrollController.CloseBooks 2026-03-02T02:00:00Z node-1 payroll-window
	// next: 2026-03-03T02:00:00Z
}

// Invalid specs are all reported at once, each naming the controller type,
// the method, the option, the value and the rule.
func ExampleScheduler_Add() {
	c := &PayrollController{}
	s := scheduling.New(scheduling.Config{Driver: locks.NewInProcessDriver()})
	err := s.Add(
		scheduling.NewTask(c.CloseBooks, scheduling.Cron("0 25 * * *")),
		scheduling.NewTask(c.CloseBooks, scheduling.Cron("@daily"), scheduling.Name("close-early"),
			scheduling.LockTTL(time.Minute)),
	)
	fmt.Println(errors.Is(err, scheduling.ErrInvalidSpec))
	fmt.Println(err)
	// Output:
	// true
	// scheduling: invalid task spec: 2 problems
	// 	PayrollController.CloseBooks: option cron = "0 25 * * *": must be a valid cron expression (the hour field "25" (0-23): end of range (25) above maximum (23): 25)
	// 	PayrollController.CloseBooks (task "close-early"): option lockTtl = "1m0s": needs lock: it only applies to a locked task
}

// With fx, constructors registered with Provide feed Module, which validates
// every task when the application is built and runs them between OnStart
// and OnStop.
func ExampleModule() {
	app := fx.New(
		fx.NopLogger,
		locks.Module,
		fx.Provide(func() *PayrollController { return &PayrollController{closed: make(chan scheduling.Run, 1)} }),
		scheduling.Provide(func(c *PayrollController) scheduling.Task {
			return scheduling.NewTask(c.CloseBooks, scheduling.Cron("0 2 * * *"), scheduling.Lock("payroll-window"))
		}),
		scheduling.Module,
		fx.Invoke(func(s *scheduling.Scheduler) {
			for _, t := range s.Tasks() {
				fmt.Println(t.Name, t.Spec.Cron, t.Spec.Lock, t.Spec.LockTTL)
			}
		}),
	)
	fmt.Println(app.Err())
	// Output:
	// PayrollController.CloseBooks 0 2 * * * payroll-window 1m0s
	// <nil>
}

type LedgerController struct {
	_ annotations.Scheduled `method:"Close" cron:"0 2 * * *" lock:"ledger" lockTtl:"30s"`
}

func (c *LedgerController) Close(context.Context) error { return nil }

// Both spec forms side by side in one application: struct tags read by
// package annotations, and builder options. They become the same validated
// spec and run in one scheduler, in registration order.
func Example_bothForms() {
	var s *scheduling.Scheduler
	app := fx.New(
		fx.NopLogger,
		locks.Module,
		fx.Provide(func() *LedgerController { return &LedgerController{} }),
		annotations.Controller[*LedgerController](),
		scheduling.Provide(func(c *LedgerController) scheduling.Task {
			return scheduling.NewTask(c.Close, scheduling.Name("ledger-audit"),
				scheduling.Cron("30 2 * * *"), scheduling.Lock("ledger"), scheduling.LockWait(5*time.Second))
		}),
		scheduling.Module,
		fx.Populate(&s),
	)
	if err := app.Err(); err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range s.Tasks() {
		fmt.Printf("%s: cron %q lock %s ttl %v wait %v\n", t.Name, t.Spec.Cron, t.Spec.Lock, t.Spec.LockTTL, t.Spec.LockWait)
	}
	// Output:
	// LedgerController.Close: cron "0 2 * * *" lock ledger ttl 30s wait 0s
	// ledger-audit: cron "30 2 * * *" lock ledger ttl 1m0s wait 5s
}

// Pause a task on every node that shares the task state, and run it by hand
// meanwhile: the manual run is fenced by the task's lock like any fire.
func ExampleScheduler_RunNow() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	state, _ := taskstate.NewInProcess(0)
	s := scheduling.New(scheduling.Config{Clock: clock, State: state, Logger: slog.New(slog.DiscardHandler),
		Driver: locks.NewInProcessDriver(locks.WithClock(clock))})
	ran := make(chan scheduling.Run, 1)
	_ = s.Add(scheduling.NewTask(func(ctx context.Context) error {
		run, _ := scheduling.RunFromContext(ctx)
		ran <- run
		return nil
	}, scheduling.Cron("@hourly"), scheduling.Lock("payroll-window"), scheduling.Name("close-books")))
	_ = s.Start()
	defer s.Stop(context.Background())

	ctx := context.Background()
	_ = s.Pause(ctx, "close-books")
	_ = s.RunNow(ctx, "close-books")  // the node asked looks for it at once
	_ = schedulingtest.Settle(ctx, s) // until the run and its record are done
	run := <-ran
	fmt.Println("manual:", run.Manual, "fenced:", run.Lease.Token() > 0)

	history, _ := s.History(ctx, "close-books")
	fmt.Println("history:", len(history), "run, manual:", history[0].Manual)
	// Output:
	// manual: true fenced: true
	// history: 1 run, manual: true
}

// A task's health on a fake clock: its run fails, and it is failing; its
// node stops, and once the next fire is past its grace it is down after
// the third.
func ExampleScheduler_Health() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	state, _ := taskstate.NewInProcess(0)
	s := scheduling.New(scheduling.Config{Clock: clock, State: state, Logger: slog.New(slog.DiscardHandler),
		Driver: locks.NewInProcessDriver(locks.WithClock(clock))})
	_ = s.Add(scheduling.NewTask(func(context.Context) error { return errors.New("ledger locked") },
		scheduling.Cron("@every 1m"), scheduling.Lock("payroll-window"), scheduling.Name("close-books"),
		scheduling.LateAfter(30*time.Second)))
	_ = s.Start()
	ctx := context.Background()
	_ = schedulingtest.Step(ctx, clock, time.Minute, time.Second, s) // 09:01 runs and fails
	h, _ := s.Health(ctx, "close-books")
	fmt.Println(h.State, "since", h.Since.Format("15:04:05"))

	_ = s.Stop(ctx)
	clock.Advance(4 * time.Minute) // 09:05: 09:02, 09:03 and 09:04 did not start
	h, _ = s.Health(ctx, "close-books")
	fmt.Println(h.State, "since", h.Since.Format("15:04:05"))
	// Output:
	// failing since 09:01:00
	// down since 09:04:30
}
