package pglocks_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// claimRows counts the claim rows of namespace ns, and those of them whose
// record expired.
func claimRows(t *testing.T, p *pgxpool.Pool, ns string) (all, expired int) {
	t.Helper()
	err := p.QueryRow(context.Background(),
		"SELECT count(*), count(*) FILTER (WHERE expires_at <= clock_timestamp()) FROM ndigo_locks_claims WHERE ns = $1", ns).
		Scan(&all, &expired)
	if err != nil {
		t.Fatal(err)
	}
	return all, expired
}

// TestClaimReclaimsExpiredRows: a claim deletes at most 8 expired claim
// rows of its namespace besides writing its own, never a live row, never
// another namespace's; expired rows of keys no longer claimed are gone
// after a few claims; a key whose row was reclaimed claims again as if it
// had expired.
func TestClaimReclaimsExpiredRows(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	ns, other := unique("reclaim"), unique("reclaim_other")
	d, od := newDriver(t, p, ns), newDriver(t, p, other)
	const stale = 100
	// Rows of keys no longer claimed, as a removed task's, expired an hour
	// ago.
	for i := range stale {
		if _, err := p.Exec(ctx, "INSERT INTO ndigo_locks_claims (ns, key, seq, expires_at) VALUES ($1, $2, 7, clock_timestamp() - interval '1 hour')",
			ns, fmt.Sprint("gone-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := od.Claim(ctx, "foreign", 1, time.Microsecond); !ok || err != nil {
		t.Fatalf("Claim in the other namespace = %v, %v", ok, err)
	}
	if ok, err := d.Claim(ctx, "live", 1, time.Hour); !ok || err != nil {
		t.Fatalf("Claim(live) = %v, %v", ok, err)
	}
	if all, expired := claimRows(t, p, ns); all != stale+1-8 || expired != stale-8 {
		t.Fatalf("after one claim: %d rows, %d expired; want %d, %d (8 reclaimed)", all, expired, stale+1-8, stale-8)
	}
	for seq := int64(2); ; seq++ {
		if _, expired := claimRows(t, p, ns); expired == 0 {
			// ceil(100/8) claims in all: each reclaims 8 until none is left.
			if want := int64(stale+7) / 8; seq-1 != want {
				t.Errorf("the expired rows took %d claims to reclaim, want %d", seq-1, want)
			}
			break
		}
		if seq > stale {
			t.Fatal("expired rows are not reclaimed")
		}
		if ok, err := d.Claim(ctx, "live", seq, time.Hour); !ok || err != nil {
			t.Fatalf("Claim(live, %d) = %v, %v", seq, ok, err)
		}
	}
	if all, _ := claimRows(t, p, ns); all != 1 {
		t.Errorf("%d claim rows left, want the live one", all)
	}
	if ok, err := d.Claim(ctx, "live", 1, time.Hour); ok || err != nil {
		t.Errorf("Claim of an older seq on the live row = %v, %v; want false: a live row was reclaimed", ok, err)
	}
	if all, _ := claimRows(t, p, other); all != 1 {
		t.Errorf("the other namespace has %d claim rows, want its 1 (expired, but not this namespace's to reclaim)", all)
	}
	if ok, err := d.Claim(ctx, "gone-3", 1, time.Hour); !ok || err != nil {
		t.Errorf("Claim of seq 1 on a reclaimed key (seq 7 before) = %v, %v; want true, as on an expired record", ok, err)
	}
}

// TestReclaimRacesClaims: claims of keys whose records keep expiring, from
// several drivers at once, each reclaiming the others' rows: every claim
// answers without an error (no deadlock, no row both deleted and
// upserted), every fire has a winning claim, and the rows stay one per key.
func TestReclaimRacesClaims(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	ns := unique("reclaim_race")
	const nodes, keys, fires = 4, 6, 40
	var wg sync.WaitGroup
	wins := make([][]int, keys)
	var mu sync.Mutex
	for i := range keys {
		wins[i] = make([]int, fires)
	}
	for range nodes {
		d := newDriver(t, p, ns)
		wg.Go(func() {
			for f := range fires {
				for k := range keys {
					// Short records: most have expired when the next
					// claim of any key reclaims them.
					ok, err := d.Claim(ctx, fmt.Sprint("k", k), int64(f), time.Millisecond)
					if err != nil {
						t.Errorf("Claim(k%d, %d): %v", k, f, err)
						return
					}
					if ok {
						mu.Lock()
						wins[k][f]++
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		for f, n := range wins[k] {
			if n == 0 {
				t.Errorf("fire %d of key k%d: no claim won", f, k)
			}
		}
	}
	if all, _ := claimRows(t, p, ns); all > keys {
		t.Errorf("%d claim rows for %d keys", all, keys)
	}
}
