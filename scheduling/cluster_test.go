package scheduling

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// TestEachFireRunsOnceAcrossSkewedNodes runs one locked task on two nodes
// whose clocks are 600ms apart, sharing one lock driver. With 1ms runs, the
// lock alone is free again long before the lagging node reaches the fire; the
// fire claim is what keeps it from running the fire a second time.
func TestEachFireRunsOnceAcrossSkewedNodes(t *testing.T) {
	for _, skew := range []time.Duration{600 * time.Millisecond, -600 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(skew.String(), func(t *testing.T) {
			fc := clockwork.NewFakeClockAt(epoch)
			driver := locks.NewInProcessDriver(locks.WithClock(fc))
			var mu sync.Mutex
			ran := map[int64][]string{} // by fire, in Unix ms
			task := func(ctx context.Context) error {
				r, _ := RunFromContext(ctx)
				mu.Lock()
				ran[r.Fire.UnixMilli()] = append(ran[r.Fire.UnixMilli()], r.Node)
				mu.Unlock()
				return nil
			}
			var nodes []*Scheduler
			for i, c := range []clockwork.Clock{fc, offsetClock{FakeClock: fc, off: skew}} {
				s := New(Config{Driver: driver, Clock: c, Node: []string{"a", "b"}[i],
					Logger: slog.New(&logRecorder{})})
				mustAdd(t, s, Scheduled(task, Cron("@every 1s"), Lock("report"), LockTTL(30*time.Second)))
				mustStart(t, s)
				t.Cleanup(func() { _ = s.Stop(context.Background()) })
				nodes = append(nodes, s)
			}
			const fires = 100
			step(t, fc, fires*time.Second, 100*time.Millisecond, nodes...)
			mu.Lock()
			defer mu.Unlock()
			lo, hi := epoch.Add(2*time.Second), epoch.Add((fires-2)*time.Second)
			for f := lo; !f.After(hi); f = f.Add(time.Second) {
				if got := ran[f.UnixMilli()]; len(got) != 1 {
					t.Errorf("fire %v ran on %v, want exactly one node", f.Sub(epoch), got)
				}
			}
			skipped := 0
			for _, s := range nodes {
				for _, info := range s.Tasks() {
					skipped += int(info.Skips)
				}
			}
			if skipped < fires-4 {
				t.Errorf("%d skips across nodes, want about one per fire", skipped)
			}
		})
	}
}
