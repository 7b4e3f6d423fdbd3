package app_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
)

// Reports is a controller with one locked task.
type Reports struct{ sent chan uint64 }

// Send runs once per fire, on one node, holding the "reports" lease.
func (r *Reports) Send(ctx context.Context) error {
	lease, _ := locks.FromContext(ctx)
	r.sent <- lease.Token()
	return nil
}

// An application: the framework's modules plus a controller whose task is
// declared with builder options. A fake clock stands in for time.
func ExampleNew() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 8, 59, 59, 0, time.UTC))
	reports := &Reports{sent: make(chan uint64, 1)}
	a := app.New(
		fx.Supply(fx.Annotate(clock, fx.As(new(clockwork.Clock)))),
		fx.Supply(fx.Annotate(io.Discard, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		fx.Supply(reports),
		scheduling.Provide(func(r *Reports) scheduling.Task {
			return scheduling.NewTask(r.Send,
				scheduling.Cron("CRON_TZ=UTC 0 9 * * *"),
				scheduling.Lock(fmt.Sprintf("reports-%d", time.Now().UnixNano())))
		}),
	)
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = clock.BlockUntilContext(ctx, 1) // the scheduler waits for 09:00
	clock.Advance(time.Second)
	fmt.Println("sent with a fencing token:", <-reports.sent > 0)
	fmt.Println(a.Stop(ctx))
	// Output:
	// sent with a fencing token: true
	// <nil>
}

// A spec that breaks a rule fails the application before anything starts.
func ExampleRun_invalidSpec() {
	err := app.Run(context.Background(),
		fx.Supply(fx.Annotate(io.Discard, fx.As(new(io.Writer)), fx.ResultTags(`name:"`+app.LogOutputName+`"`))),
		fx.Supply(&Reports{}),
		scheduling.Provide(func(r *Reports) scheduling.Task {
			return scheduling.NewTask(r.Send, scheduling.Cron("@every 1h"), scheduling.LockTTL(time.Minute))
		}),
	)
	fmt.Println(err)
	// Output:
	// app: scheduling: invalid task spec: 1 problem
	// 	Reports.Send: option lockTtl = "1m0s": needs lock: it only applies to a locked task
}
