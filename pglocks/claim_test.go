package pglocks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
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
// keys leave one claim row per key and one lock row per key, never one per
// fire: the first Acquires of the keys reclaim the free rows of the others,
// which put theirs back once without reclaiming (keys the driver acquired
// lately), and from then on each key's Acquire takes its own free row. Each
// key's tokens rise with its acquisitions, whether its row was kept or
// taken again.
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
	for table, want := range map[string]int{"ndigo_locks": keys, "ndigo_locks_claims": keys} {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE ns = $1", ns).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows for %d keys after %d fires, want %d", table, n, keys, fires, want)
		}
	}
}

// TestAcquireClaimOnAnEarlierSchema: on tables whose CreateSchema predates
// the acquire-and-claim functions (a node of this version started before
// the schema was upgraded), AcquireClaims still acquires and claims, with
// the same answers: by the one-fire function when only the many-fire one
// is missing, in two statements (Acquire, then Claim) when both are.
func TestAcquireClaimOnAnEarlierSchema(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	for _, c := range []struct{ name, drop string }{
		{"without acquire_claims", "ndigo_acquire_claims_%"},
		{"without either", "ndigo_acquire_claim%"},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := newSchema(t, p, "earlier")
			d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "earlier", Table: schema + ".locks"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			if err := d.CreateSchema(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Exec(ctx, `DO $$ DECLARE f regprocedure; BEGIN
				FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = '`+schema+`' AND p.proname LIKE '`+c.drop+`' LOOP
					EXECUTE 'DROP FUNCTION ' || f;
				END LOOP; END $$`); err != nil {
				t.Fatal(err)
			}
			var left int
			if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
				WHERE n.nspname = $1 AND p.proname LIKE $2`, schema, c.drop).Scan(&left); err != nil || left != 0 {
				t.Fatalf("functions %s left in %s: %d, %v; want none", c.drop, schema, left, err)
			}
			fire := locks.FireClaim{Key: "k@task", Seq: 10, TTL: time.Minute}
			got := locks.AcquireClaims(ctx, d, []locks.FireLock{
				{Key: "k", TTL: time.Minute, Claim: fire},
				{Key: "k", TTL: time.Minute, Claim: locks.FireClaim{Key: "k@task", Seq: 11, TTL: time.Minute}},
				{Key: "other", TTL: time.Minute, Claim: locks.FireClaim{Key: "other@task", Seq: 10, TTL: time.Minute}},
			})
			if got[0].Err != nil || got[2].Err != nil {
				t.Fatalf("AcquireClaims without the functions: %v, %v; want the leases of k and other", got[0].Err, got[2].Err)
			}
			if !errors.Is(got[1].Err, locks.ErrNotAcquired) {
				t.Fatalf("AcquireClaims of k, held by the fire before it: %v, want ErrNotAcquired", got[1].Err)
			}
			if err := got[0].Lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := locks.AcquireClaim(ctx, d, "k", time.Minute, fire); !errors.Is(err, locks.ErrClaimed) {
				t.Fatalf("AcquireClaim of a claimed fire: %v, want ErrClaimed", err)
			}
		})
	}
}
