package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// callCounter is an in-process driver that counts its lock-step calls
// (AcquireClaims batches, single Acquires and Claims) and the fires they
// carry.
type callCounter struct {
	*locks.InProcessDriver
	calls, fires atomic.Int64
}

func (c *callCounter) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	c.calls.Add(1)
	c.fires.Add(int64(len(fires)))
	out := make([]locks.FireLease, len(fires))
	for i, f := range fires {
		l, err := locks.AcquireClaim(ctx, c.InProcessDriver, f.Key, f.TTL, f.Claim)
		out[i] = locks.FireLease{Lease: l, Err: err}
	}
	return out
}

func (c *callCounter) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	c.calls.Add(1)
	return c.InProcessDriver.Acquire(ctx, key, ttl)
}

// BenchmarkSpreadSchedules runs 1,000 locked tasks for a simulated minute
// on one node, all on "0 * * * * *" (every minute at :00) and then on
// "H * * * * *" (every minute at a second of each task's own), and reports
// the lock-step calls per fire (one call takes up to 256 fires due at one
// instant) and the fires due in the busiest second. H trades a few more
// calls per fire for a sixtieth of the peak.
//
//	go test -run '^$' -bench SpreadSchedules ./scheduling
func BenchmarkSpreadSchedules(b *testing.B) {
	for _, cron := range []string{"0 * * * * *", "H * * * * *"} {
		b.Run(fmt.Sprintf("cron=%s", cron[:1]), func(b *testing.B) {
			fc := clockwork.NewFakeClockAt(epoch)
			d := &callCounter{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(fc))}
			s := New(Config{Clock: fc, Driver: d, Location: time.UTC, Logger: slog.New(slog.DiscardHandler)})
			const n = 1000
			var mu sync.Mutex
			perSecond := map[int64]int{}
			for i := range n {
				mustAdd(b, s, NewTask(func(ctx context.Context) error {
					r, _ := RunFromContext(ctx)
					mu.Lock()
					perSecond[r.Fire.Unix()]++
					mu.Unlock()
					return nil
				}, Cron(cron), Lock(fmt.Sprintf("k%04d", i)), Name(fmt.Sprintf("report-%04d", i))))
			}
			mustStart(b, s)
			defer s.Stop(context.Background())
			b.ResetTimer()
			for range b.N {
				step(b, fc, time.Minute, time.Second, s)
			}
			b.StopTimer()
			peak, fired := 0, 0
			for _, c := range perSecond {
				peak = max(peak, c)
				fired += c
			}
			b.ReportMetric(float64(d.calls.Load())/float64(fired), "calls/fire")
			b.ReportMetric(float64(peak), "peak-fires/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
