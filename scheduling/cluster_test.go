package scheduling

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/clockskew"
	"github.com/ndigo/ndigo/locks"
)

// TestEachFireRunsOnceAcrossSkewedNodes runs one locked task on two nodes
// whose clocks are up to 900ms apart, sharing one lock driver. With 1ms runs,
// the lock alone is free again long before the lagging node reaches the fire;
// the fire claim is what keeps it from running the fire a second time.
func TestEachFireRunsOnceAcrossSkewedNodes(t *testing.T) {
	for _, skew := range []time.Duration{600 * time.Millisecond, -600 * time.Millisecond, 900 * time.Millisecond, -900 * time.Millisecond} {
		t.Run(skew.String(), func(t *testing.T) { runsOnceAcrossSkew(t, skew) })
	}
}

// runsOnceAcrossSkew runs in a synctest bubble, whose clock the real clock
// reads: time passes only when every goroutine waits, so each fire is done
// before the next instant, without a harness that steps a fake clock.
func runsOnceAcrossSkew(t *testing.T, skew time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		rc := clockwork.NewRealClock()
		start := rc.Now()
		driver := &claimRecorder{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(rc))}
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
		for i, c := range []clockwork.Clock{rc, clockskew.New(rc, skew)} {
			s := New(Config{Driver: driver, Clock: c, Node: []string{"a", "b"}[i],
				Logger: slog.New(&logRecorder{})})
			mustAdd(t, s, NewTask(task, Cron("@every 1s"), Lock("report"), LockTTL(30*time.Second), Name("report")))
			mustStart(t, s)
			nodes = append(nodes, s)
		}
		const fires = 100
		time.Sleep(fires * time.Second)
		for _, s := range nodes {
			if err := s.Stop(context.Background()); err != nil {
				t.Error(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		first := start.Truncate(time.Second)
		lo, hi := first.Add(2*time.Second), first.Add((fires-2)*time.Second)
		for f := lo; !f.After(hi); f = f.Add(time.Second) {
			if got := ran[f.UnixMilli()]; len(got) != 1 {
				t.Errorf("fire %v ran on %v, want exactly one node", f.Sub(first), got)
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
		driver.mu.Lock()
		defer driver.mu.Unlock()
		for _, c := range driver.claims {
			if c.key != "@"+nodes[0].Tasks()[0].Name {
				t.Fatalf("claim on key %q: want one claim key per task", c.key)
			}
		}
	})
}

// claimRecorder is a driver that records the claims it grants.
type claimRecorder struct {
	*locks.InProcessDriver
	mu     sync.Mutex
	claims []claimCall
}

// AcquireClaims goes through Claim, so that the claims made with an
// acquisition are recorded too.
func (r *claimRecorder) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	return inTwoSteps(ctx, r, fires)
}

type claimCall struct {
	key string
	seq int64
}

func (r *claimRecorder) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	ok, err := r.InProcessDriver.Claim(ctx, key, seq, ttl)
	if ok {
		r.mu.Lock()
		r.claims = append(r.claims, claimCall{key, seq})
		r.mu.Unlock()
	}
	return ok, err
}

// TestClaimsKeepOneRecordPerTask: every fire of a task is claimed under the
// task's one claim key, with increasing sequence numbers (the fire instants),
// and the record lives ClaimTTL, so claims never pile up however many fires.
func TestClaimsKeepOneRecordPerTask(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &claimRecorder{InProcessDriver: locks.NewInProcessDriver(locks.WithClock(fc))}
	s := New(Config{Driver: d, Clock: fc, Logger: slog.New(&logRecorder{})})
	var f fires
	mustAdd(t, s, NewTask(f.task, Cron("@every 1h"), Lock("k"), Name("hourly")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, fc, 3*time.Hour, time.Hour, s)
	d.mu.Lock()
	defer d.mu.Unlock()
	want := []claimCall{{"@hourly", epoch.Add(time.Hour).UnixMilli()}, {"@hourly", epoch.Add(2 * time.Hour).UnixMilli()},
		{"@hourly", epoch.Add(3 * time.Hour).UnixMilli()}}
	if !slices.Equal(d.claims, want) {
		t.Fatalf("claims %v, want %v", d.claims, want)
	}
}
