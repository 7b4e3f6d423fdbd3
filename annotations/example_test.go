package annotations_test

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
)

type PayrollController struct {
	_ annotations.Scheduled `method:"CloseBooks" cron:"0 2 * * *" lock:"payroll-window" lockTtl:"60s"`
	_ annotations.Scheduled `method:"SendPayslips" cron:"0 8 1 * *" lock:"payslips" lockWait:"500"`

	done chan string
}

func (c *PayrollController) CloseBooks(ctx context.Context) error {
	lease, _ := locks.FromContext(ctx)
	c.done <- "closed books under " + lease.Key()
	return nil
}

func (c *PayrollController) SendPayslips(context.Context) error {
	c.done <- "sent payslips"
	return nil
}

// The struct-tag form, beside one task in the builder form, run on a fake
// clock without fx.
func Example() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC))
	c := &PayrollController{done: make(chan string, 2)}
	tasks, err := annotations.Tasks(c)
	if err != nil {
		fmt.Println(err)
		return
	}
	tasks = append(tasks, scheduling.NewTask(c.SendPayslips, scheduling.Name("payslips-reminder"),
		scheduling.Cron("0 9 28 * *")))
	s := scheduling.New(scheduling.Config{
		Driver:   locks.NewInProcessDriver(locks.WithClock(clock)),
		Clock:    clock,
		Logger:   slog.New(slog.DiscardHandler),
		Location: time.UTC,
	})
	if err := s.Add(tasks...); err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Start()
	defer s.Stop(context.Background())
	for _, t := range s.Tasks() {
		fmt.Println(t.Name, "next", t.Next.Format(time.RFC3339), "lock", t.Spec.Lock, t.Spec.LockTTL, t.Spec.LockWait)
	}
	_ = clock.BlockUntilContext(context.Background(), 1)
	clock.Advance(time.Hour)
	fmt.Println(<-c.done)
	// Output:
	// PayrollController.CloseBooks next 2026-03-01T02:00:00Z lock payroll-window 1m0s 0s
	// PayrollController.SendPayslips next 2026-03-01T08:00:00Z lock payslips 1m0s 500ms
	// payslips-reminder next 2026-03-28T09:00:00Z lock  0s 0s
	// closed books under payroll-window
}

type Reports struct {
	_ annotations.Scheduled `method:"Daily" cron:"@daily" lock:"reports" lockTTL:"5m"`
}

func (r *Reports) Daily(context.Context) error { return nil }

// With fx, Controller registers a controller's tasks; a typo in a tag key
// fails fx.New.
func ExampleController() {
	app := fx.New(
		fx.NopLogger,
		locks.Module,
		fx.Provide(func() *Reports { return &Reports{} }),
		annotations.Controller[*Reports](),
		scheduling.Module,
	)
	var invalid *scheduling.ValidationError
	if errors.As(app.Err(), &invalid) {
		fmt.Println(invalid)
	}
	// Output:
	// scheduling: invalid task spec: 1 problem
	// 	Reports.Daily: option lockTTL = "5m": unknown tag key; did you mean "lockTtl"?
}
