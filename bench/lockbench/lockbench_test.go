package lockbench_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/locks"
)

// inProcess is the in-process driver behind locks.Wait, counting the
// holders of each lock so that a test sees any overlap.
func inProcess(t *testing.T, holders *atomic.Int64, overlaps *atomic.Int64) *lockbench.Contender {
	t.Helper()
	d := locks.NewInProcessDriver()
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l, err := locks.Wait(ctx, d, key, time.Minute, locks.WaitOptions{Budget: time.Minute})
			if err != nil {
				return nil, err
			}
			if holders.Add(1) > 1 {
				overlaps.Add(1)
			}
			return func(ctx context.Context) error {
				holders.Add(-1)
				return l.Release(ctx)
			}, nil
		},
		Close: func() {},
	}
}

func TestCyclesSharedKey(t *testing.T) {
	var holders, overlaps atomic.Int64
	c := inProcess(t, &holders, &overlaps)
	keys := lockbench.Keys(4, true)
	if err := lockbench.Warm(context.Background(), c, keys); err != nil {
		t.Fatal(err)
	}
	cell, err := lockbench.Cycles(context.Background(), c, keys, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d acquisitions overlapped another holder of the shared key", overlaps.Load())
	}
	counted := int64(cell.PerSec * 0.05)
	if cell.Acquired == 0 || counted > cell.Acquired {
		t.Fatalf("Acquired %d, cycles counted within the time %d: want 0 < counted <= Acquired", cell.Acquired, counted)
	}
	if cell.OwnerMoves < 0 || cell.OwnerMoves > 1 || cell.P50 > cell.P99 {
		t.Fatalf("owner moves %v (want a share), p50 %v > p99 %v?", cell.OwnerMoves, cell.P50, cell.P99)
	}
}

func TestCyclesDistinctKeysNeverMoveOwner(t *testing.T) {
	var holders, overlaps atomic.Int64
	c := inProcess(t, &holders, &overlaps)
	cell, err := lockbench.Cycles(context.Background(), c, lockbench.Keys(1, false), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// One goroutine: only its first acquisition changes the owner.
	if want := 1 / float64(cell.Acquired); cell.OwnerMoves != want {
		t.Fatalf("owner moves %v over %d acquisitions, want %v", cell.OwnerMoves, cell.Acquired, want)
	}
}

func TestCyclesReturnsTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	c := &lockbench.Contender{
		Lock: func(context.Context, string) (func(context.Context) error, error) { return nil, boom },
	}
	if _, err := lockbench.Cycles(context.Background(), c, lockbench.Keys(3, false), time.Millisecond); !errors.Is(err, boom) {
		t.Fatalf("Cycles: %v, want %v", err, boom)
	}
	if err := lockbench.Warm(context.Background(), c, lockbench.Keys(1, false)); !errors.Is(err, boom) {
		t.Fatalf("Warm: %v, want %v", err, boom)
	}
}

func TestHandoffMeasuresEachHandoff(t *testing.T) {
	var holders, overlaps atomic.Int64
	c := inProcess(t, &holders, &overlaps)
	cell, err := lockbench.Handoff(context.Background(), c, 20)
	if err != nil {
		t.Fatal(err)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("the waiter held the key while the holder did, %d times", overlaps.Load())
	}
	if cell.P50 <= 0 || cell.P50 > cell.P99 {
		t.Fatalf("p50 %v, p99 %v: want 0 < p50 <= p99", cell.P50, cell.P99)
	}
}

func TestQuantileAndMedian(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4}
	if got := lockbench.Quantile(d, 0.5); got != 3 {
		t.Errorf("Quantile(1..4, 0.5) = %v, want 3", got)
	}
	if got := lockbench.Quantile(d, 0.99); got != 4 {
		t.Errorf("Quantile(1..4, 0.99) = %v, want 4", got)
	}
	if got := lockbench.Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile(nil) = %v, want 0", got)
	}
	if got := lockbench.Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median(3, 1, 2) = %v, want 2", got)
	}
	if _, err := lockbench.ParseGoroutines("1, 0"); err == nil {
		t.Error("ParseGoroutines accepted a count of 0")
	}
}

func TestSelect(t *testing.T) {
	all := []string{"ndigo pglocks", "ndigo pglocks (Acquire loop)", "advisory try-lock loop", "same SQL loop"}
	id := func(s string) string { return s }
	if got := lockbench.Select(all, id, ""); len(got) != len(all) {
		t.Errorf("Select with no -only = %q, want all", got)
	}
	got := lockbench.Select(all, id, "Acquire loop, same SQL")
	if len(got) != 2 || got[0] != all[1] || got[1] != all[3] {
		t.Errorf("Select(%q) = %q, want %q and %q", "Acquire loop, same SQL", got, all[1], all[3])
	}
}

func TestTableWithoutOursHasNoRatio(t *testing.T) {
	var r lockbench.Results
	r.Add(lockbench.Scenario(1, true), "peer", lockbench.Cell{PerSec: 1000})
	var b strings.Builder
	lockbench.Table{Ours: "ours", Names: []string{"ours", "peer"}}.Write(&b, &r)
	if want := "| peer | 1000 | 0s | 0s | 0% | 0 | — |\n"; !strings.Contains(b.String(), want) {
		t.Fatalf("table without ours:\n%s\nwant the row %q", b.String(), want)
	}
}
