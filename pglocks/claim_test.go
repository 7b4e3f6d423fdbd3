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

// TestAcquireClaimOnAnEarlierSchema: on tables whose CreateSchema predates
// the acquire-and-claim function (a node of this version started before the
// schema was upgraded), AcquireClaim still acquires and claims, in two
// statements, with the same answers.
func TestAcquireClaimOnAnEarlierSchema(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	schema := newSchema(t, p, "earlier")
	d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: "earlier", Table: schema + ".locks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := d.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	var dropped int
	if err := p.QueryRow(ctx, `WITH f AS (SELECT p.oid::regprocedure AS fn FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND p.proname LIKE 'ndigo_acquire_claim_%') SELECT count(*) FROM f`, schema).Scan(&dropped); err != nil || dropped != 1 {
		t.Fatalf("acquire-and-claim functions in %s: %d, %v; want 1", schema, dropped, err)
	}
	if _, err := p.Exec(ctx, `DO $$ DECLARE f regprocedure; BEGIN
		SELECT p.oid::regprocedure INTO f FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = '`+schema+`' AND p.proname LIKE 'ndigo_acquire_claim_%';
		EXECUTE 'DROP FUNCTION ' || f; END $$`); err != nil {
		t.Fatal(err)
	}
	fire := locks.FireClaim{Key: "k@task", Seq: 10, TTL: time.Minute}
	l, err := d.AcquireClaim(ctx, "k", time.Minute, fire)
	if err != nil {
		t.Fatalf("AcquireClaim without the function: %v, want the lease", err)
	}
	if _, err := d.AcquireClaim(ctx, "k", time.Minute, locks.FireClaim{Key: "k@task", Seq: 11, TTL: time.Minute}); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("AcquireClaim of a held key: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AcquireClaim(ctx, "k", time.Minute, fire); !errors.Is(err, locks.ErrClaimed) {
		t.Fatalf("AcquireClaim of a claimed fire: %v, want ErrClaimed", err)
	}
}
