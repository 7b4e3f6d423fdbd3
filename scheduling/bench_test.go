package scheduling

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// noop is the task every benchmark schedules.
func noop(context.Context) error { return nil }

// manyTasks declares n tasks with distinct daily-or-rarer cron expressions,
// so that no parse is shared between them, and none fires soon.
func manyTasks(n int) []Task {
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = NewTask(noop, Cron(distinctCron(i)), Name("task-"+strconv.Itoa(i)))
	}
	return tasks
}

// distinctCron returns the i-th of 40,320 distinct monthly expressions.
func distinctCron(i int) string {
	return strconv.Itoa(i%60) + " " + strconv.Itoa(i/60%24) + " " + strconv.Itoa(i/1440%28+1) + " * *"
}

// BenchmarkIdleHeap reports the heap that 10,000 idle tasks keep alive in a
// started scheduler, per task.
func BenchmarkIdleHeap(b *testing.B) {
	const n = 10000
	var perTask float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := New(Config{Logger: slog.New(slog.DiscardHandler)})
		if err := s.Add(manyTasks(n)...); err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTask = float64(after.HeapAlloc-before.HeapAlloc) / n
		if err := s.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perTask, "B/task")
}

// BenchmarkAddValidate measures declaring, validating and scheduling 10,000
// specs, as a large application does at startup.
func BenchmarkAddValidate(b *testing.B) {
	for b.Loop() {
		s := New(Config{Logger: slog.New(slog.DiscardHandler)})
		if err := s.Add(manyTasks(10000)...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLateness runs 1,000 tasks due on the same second on the real
// clock and reports the lateness of their starts (start minus scheduled
// instant). Each iteration is one fire of all 1,000.
var lateExpr = "* * * * * *"

func BenchmarkLateness(b *testing.B) {
	const n = 1000
	s := New(Config{Logger: slog.New(slog.DiscardHandler)})
	var late []time.Duration
	samples := make([]time.Duration, n)
	var finished atomic.Int64
	done := make(chan struct{}, 1)
	for i := range n {
		err := s.Add(NewTask(func(ctx context.Context) error {
			r, _ := RunFromContext(ctx)
			samples[i] = time.Since(r.Fire)
			if finished.Add(1) == n {
				done <- struct{}{}
			}
			return nil
		}, Cron(lateExpr), Name("late-"+strconv.Itoa(i))))
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Stop(context.Background())
	for b.Loop() {
		<-done
		late = append(late, samples...)
		finished.Store(0)
	}
	reportLateness(b, late)
}

func reportLateness(b *testing.B, late []time.Duration) {
	if len(late) == 0 {
		return
	}
	slices.Sort(late)
	q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	b.ReportMetric(q(0), "min-ms")
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
