package pglocks_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// TestClaimOnePerFire: nodes racing to claim each fire of a key: exactly one
// claim per fire succeeds, and a late node reaching an older fire is
// refused.
func TestClaimOnePerFire(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	const nodes, fires = 6, 20
	drivers := make([]locks.Claimer, nodes)
	for i := range drivers {
		drivers[i] = newDriver(t, p, "claim")
	}
	key := unique("fires")
	for fire := int64(1); fire <= fires; fire++ {
		var won atomic.Int64
		var wg sync.WaitGroup
		for _, d := range drivers {
			wg.Go(func() {
				ok, err := d.Claim(ctx, key, fire*1000, time.Minute)
				if err != nil {
					t.Errorf("Claim(%d): %v", fire, err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("fire %d claimed %d times, want once", fire, won.Load())
		}
		if ok, err := drivers[0].Claim(ctx, key, (fire-1)*1000, time.Minute); ok || err != nil {
			t.Fatalf("claim of the older fire %d = %v, %v; want false", fire-1, ok, err)
		}
	}
}

// TestRowsAreBounded: many acquisitions and claims on many fires of a few
// keys leave one lock row and one claim row per key.
func TestRowsAreBounded(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	const keys, fires = 4, 50
	ns := unique("bounded")
	d := newDriver(t, p, ns)
	for fire := range int64(fires) {
		for k := range keys {
			key := fmt.Sprintf("task-%d", k)
			if ok, err := d.Claim(ctx, key, fire, time.Minute); !ok || err != nil {
				t.Fatalf("Claim(%s, %d) = %v, %v", key, fire, ok, err)
			}
			l, err := d.Acquire(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, table := range []string{"ndigo_locks", "ndigo_locks_claims"} {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE ns = $1", ns).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != keys {
			t.Errorf("%s has %d rows for %d keys after %d fires, want %d", table, n, keys, fires, keys)
		}
	}
	var token int64
	if err := p.QueryRow(ctx, "SELECT token FROM ndigo_locks WHERE ns = $1 AND key = 'task-0'", ns).Scan(&token); err != nil || token != fires {
		t.Errorf("task-0's token column = %d, %v; want %d (one per acquisition)", token, err, fires)
	}
}
