package scheduler

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/robfig/cron/v3"

	"github.com/ndigo/ndigo/scheduling"
)

// An engine is one scheduler under test: add registers n tasks, the i-th
// on expr(i) running fn, and returns a stop function.
type engine struct {
	name string
	add  func(tb testing.TB, n int, expr func(int) string, fn func()) (stop func())
}

var engines = []engine{
	{"ndigo", func(tb testing.TB, n int, expr func(int) string, fn func()) func() {
		s := scheduling.New(scheduling.Config{Logger: slog.New(slog.DiscardHandler)})
		tasks := make([]scheduling.Task, n)
		for i := range tasks {
			tasks[i] = scheduling.NewTask(func(context.Context) error { fn(); return nil },
				scheduling.Cron(expr(i)), scheduling.Name("task-"+strconv.Itoa(i)))
		}
		if err := s.Add(tasks...); err != nil {
			tb.Fatal(err)
		}
		if err := s.Start(); err != nil {
			tb.Fatal(err)
		}
		return func() { _ = s.Stop(context.Background()) }
	}},
	{"gocron", func(tb testing.TB, n int, expr func(int) string, fn func()) func() {
		s, err := gocron.NewScheduler()
		if err != nil {
			tb.Fatal(err)
		}
		for i := range n {
			e := expr(i)
			if _, err := s.NewJob(gocron.CronJob(e, len(strings.Fields(e)) == 6), gocron.NewTask(fn)); err != nil {
				tb.Fatal(err)
			}
		}
		s.Start()
		return func() { _ = s.Shutdown() }
	}},
	{"robfig", func(tb testing.TB, n int, expr func(int) string, fn func()) func() {
		c := cron.New(cron.WithParser(cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
			cron.Dom | cron.Month | cron.Dow | cron.Descriptor)))
		for i := range n {
			if _, err := c.AddFunc(expr(i), fn); err != nil {
				tb.Fatal(err)
			}
		}
		c.Start()
		return func() { <-c.Stop().Done() }
	}},
}

// monthly returns the i-th of 40,320 distinct monthly expressions, so that
// no task shares a parse with another and none fires during the benchmark.
func monthly(i int) string {
	return strconv.Itoa(i%60) + " " + strconv.Itoa(i/60%24) + " " + strconv.Itoa(i/1440%28+1) + " * *"
}

// BenchmarkIdleHeap reports the heap that 10,000 idle tasks keep alive in a
// started scheduler, per task, and the goroutines they add.
func BenchmarkIdleHeap(b *testing.B) {
	const n = 10000
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var perTask, goroutines float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				g0 := runtime.NumGoroutine()
				runtime.ReadMemStats(&before)
				stop := e.add(b, n, monthly, func() {})
				runtime.GC()
				runtime.ReadMemStats(&after)
				goroutines = float64(runtime.NumGoroutine() - g0)
				perTask = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
				stop()
			}
			b.ReportMetric(perTask, "B/task")
			b.ReportMetric(goroutines, "goroutines")
		})
	}
}

// BenchmarkRegister measures registering 10,000 tasks and starting the
// scheduler (ndigo validates every spec on the way).
func BenchmarkRegister(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			for b.Loop() {
				e.add(b, 10000, monthly, func() {})()
			}
		})
	}
}

// BenchmarkLateness runs 1,000 tasks due every second on the real clock and
// reports how late they start (start minus the second they were due); each
// iteration is one fire of all 1,000. Lateness is measured alike for every
// engine: the time since the start of the current second.
func BenchmarkLateness(b *testing.B) {
	const n = 1000
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			samples := make([]time.Duration, n)
			var started atomic.Int64
			done := make(chan struct{}, 1)
			stop := e.add(b, n, func(int) string { return "* * * * * *" }, func() {
				now := time.Now()
				late := now.Sub(now.Truncate(time.Second))
				i := started.Add(1) - 1
				if i < n {
					samples[i] = late
				}
				if i == n-1 {
					done <- struct{}{}
				}
			})
			defer stop()
			var late []time.Duration
			<-done // the first round may start mid-registration: discard it
			started.Store(0)
			for b.Loop() {
				<-done
				late = append(late, samples...)
				started.Store(0)
			}
			slices.Sort(late)
			q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
