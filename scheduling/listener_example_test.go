package scheduling_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// pager pages once a task has skipped five fires.
type pager struct {
	scheduling.NopListener
	skips sync.Map // task -> *atomic.Int32
	page  func(msg string)
}

func (p *pager) Skipped(e scheduling.Event) {
	n, _ := p.skips.LoadOrStore(e.Task, new(atomic.Int32))
	if n.(*atomic.Int32).Add(1) == 5 {
		p.page(e.Task + ": 5 fires skipped: " + string(e.Outcome)) // hooks must return quickly
	}
}

// A listener of your own: page when a task keeps being skipped because
// another holder keeps its lock.
func ExampleListener() {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := locks.NewInProcessDriver(locks.WithClock(fc))
	paged := make(chan string, 1)
	s := scheduling.New(scheduling.Config{Driver: d, Clock: fc, Logger: slog.New(slog.DiscardHandler),
		Listeners: []scheduling.Listener{&pager{page: func(msg string) { paged <- msg }}}})
	_ = s.Add(scheduling.NewTask(func(context.Context) error { return nil },
		scheduling.Cron("@every 1s"), scheduling.Lock("payroll-window"), scheduling.Name("close-books")))
	stuck, _ := d.Acquire(context.Background(), "payroll-window", time.Hour) // another holder
	defer stuck.Release(context.Background())
	_ = s.Start()
	defer s.Stop(context.Background())

	for {
		// Advance a second, and wait until the fire due then is done.
		_ = schedulingtest.Step(context.Background(), fc, time.Second, 0, s)
		select {
		case msg := <-paged:
			fmt.Println(msg)
			return
		default:
		}
	}
	// Output:
	// close-books: 5 fires skipped: skipped: lock held
}
