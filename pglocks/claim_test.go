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
// keys leave one claim row per key, and one lock row in all: each Acquire
// and Release reclaims the free rows of the other keys, so only the key
// released last keeps its row. Each key's tokens rise with its
// acquisitions, whether its row was kept or taken again.
func TestRowsAreBounded(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	const keys, fires = 4, 50
	ns := unique("bounded")
	d := newDriver(t, p, ns)
	last := make([]uint64, keys)
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
			if l.Token() <= last[k] {
				t.Fatalf("fire %d: %s's token %d not above its previous %d", fire, key, l.Token(), last[k])
			}
			last[k] = l.Token()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for table, want := range map[string]int{"ndigo_locks": 1, "ndigo_locks_claims": keys} {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE ns = $1", ns).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows for %d keys after %d fires, want %d", table, n, keys, fires, want)
		}
	}
}
