package scheduling

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
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
	for _, c := range []struct {
		name  string
		marks bool
	}{{"lease-claims", false}, {"mark-claims", true}} {
		for _, skew := range []time.Duration{600 * time.Millisecond, -600 * time.Millisecond, 900 * time.Millisecond, -900 * time.Millisecond} {
			t.Run(c.name+"/"+skew.String(), func(t *testing.T) { runsOnceAcrossSkew(t, skew, c.marks) })
		}
	}
}

// markingDriver claims fires with marks, as the Redis driver does: its marks
// live in a table of their own and are never released.
type markingDriver struct {
	locks.Driver
	marks    locks.Driver
	mu       sync.Mutex
	marked   int
	acquired []string // keys passed to Acquire
}

func (m *markingDriver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	m.mu.Lock()
	m.acquired = append(m.acquired, key)
	m.mu.Unlock()
	return m.Driver.Acquire(ctx, key, ttl)
}

func (m *markingDriver) Mark(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	_, err := m.marks.Acquire(ctx, key, ttl)
	if errors.Is(err, locks.ErrNotAcquired) {
		return false, nil
	}
	m.mu.Lock()
	m.marked++
	m.mu.Unlock()
	return err == nil, err
}

func runsOnceAcrossSkew(t *testing.T, skew time.Duration, marks bool) {
	fc := clockwork.NewFakeClockAt(epoch)
	var driver locks.Driver = locks.NewInProcessDriver(locks.WithClock(fc))
	var marker *markingDriver
	if marks {
		marker = &markingDriver{Driver: driver, marks: locks.NewInProcessDriver(locks.WithClock(fc))}
		driver = marker
	}
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
	if marker != nil {
		marker.mu.Lock()
		defer marker.mu.Unlock()
		if marker.marked < fires-4 {
			t.Errorf("%d fires claimed with marks, want about one per fire", marker.marked)
		}
		for _, k := range marker.acquired {
			if k != "report" {
				t.Fatalf("claim taken as a lease (%q) from a driver with marks", k)
			}
		}
	}
}

// releaseRecorder is a driver that records the keys whose leases are
// released.
type releaseRecorder struct {
	locks.Driver
	mu       sync.Mutex
	released []string
}

func (r *releaseRecorder) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l, err := r.Driver.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &recordedLease{Lease: l, r: r}, nil
}

type recordedLease struct {
	locks.Lease
	r *releaseRecorder
}

func (l *recordedLease) Release(ctx context.Context) error {
	l.r.mu.Lock()
	l.r.released = append(l.r.released, l.Key())
	l.r.mu.Unlock()
	return l.Lease.Release(ctx)
}

func TestClaimsAreReleasedAtTheNextClaim(t *testing.T) {
	fc := clockwork.NewFakeClockAt(epoch)
	d := &releaseRecorder{Driver: locks.NewInProcessDriver(locks.WithClock(fc))}
	s := New(Config{Driver: d, Clock: fc, Logger: slog.New(&logRecorder{})})
	var f fires
	mustAdd(t, s, Scheduled(f.task, Cron("@every 1h"), Lock("k"), Name("hourly")))
	mustStart(t, s)
	defer s.Stop(context.Background())
	step(t, fc, 3*time.Hour, time.Hour, s)
	d.mu.Lock()
	defer d.mu.Unlock()
	claim := func(h int) string {
		return "k@" + strconv.FormatInt(epoch.Add(time.Duration(h)*time.Hour).UnixMilli(), 10) + ":hourly"
	}
	// Each fire: the lock is released after the run; the claim for the
	// previous fire when the next is claimed. The claim of the last fire
	// stays, to guard it against lagging nodes.
	want := []string{"k", claim(1), "k", claim(2), "k"}
	if !slices.Equal(d.released, want) {
		t.Fatalf("released %q, want %q", d.released, want)
	}
}
