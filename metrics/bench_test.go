package metrics

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/tracing"
)

// BenchmarkAcquireRelease measures one Acquire+Release cycle on the
// in-process driver and on the Redis driver (a private redis-server), bare
// and wrapped by InstrumentDriver.
func BenchmarkAcquireRelease(b *testing.B) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	srv := redistest.Start(b)
	rd, err := redislocks.New(redislocks.Options{Client: srv.Client(), Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	ctx := context.Background()
	for _, d := range []struct {
		name   string
		driver locks.Driver
	}{{"inprocess", locks.NewInProcessDriver()}, {"redis", rd}} {
		for _, variant := range []string{"bare", "instrumented"} {
			driver := d.driver
			if variant == "instrumented" {
				driver = m.InstrumentDriver(driver)
			}
			b.Run(d.name+"/"+variant, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					l, err := driver.Acquire(ctx, "bench-key", 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkLateness is scheduling's BenchmarkLateness (1,000 tasks due on
// the same second, real clock, each iteration one fire of all 1,000) with
// no listener, with the metrics listener, and with metrics and a tracer
// without a provider. It reports the lateness quantiles of the run starts.
func BenchmarkLateness(b *testing.B) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		listeners []scheduling.Listener
	}{
		{"bare", nil},
		{"nop-listener", []scheduling.Listener{scheduling.NopListener{}}},
		{"metrics", []scheduling.Listener{m}},
		{"metrics+tracing", []scheduling.Listener{m, tracing.New(nil)}},
	} {
		b.Run(c.name, func(b *testing.B) { lateness(b, c.listeners) })
	}
}

func lateness(b *testing.B, listeners []scheduling.Listener) {
	const n = 1000
	s := scheduling.New(scheduling.Config{Listeners: listeners})
	var late []time.Duration
	samples := make([]time.Duration, n)
	var finished atomic.Int64
	done := make(chan struct{}, 1)
	for i := range n {
		err := s.Add(scheduling.NewTask(func(ctx context.Context) error {
			r, _ := scheduling.RunFromContext(ctx)
			samples[i] = time.Since(r.Fire)
			if finished.Add(1) == n {
				done <- struct{}{}
			}
			return nil
		}, scheduling.Cron("* * * * * *"), scheduling.Name("late-"+strconv.Itoa(i))))
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Stop(context.Background())
	<-done // one discarded fire: first-run costs (label children, stacks)
	finished.Store(0)
	for b.Loop() {
		<-done
		late = append(late, samples...)
		finished.Store(0)
	}
	slices.Sort(late)
	q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
