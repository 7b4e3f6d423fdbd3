package pglocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

// TestExpiryOnDatabaseClock: leases expire on the database's clock, not on
// the nodes': a node whose clock is a century ahead of the holder's cannot
// take a held key, and the row's expiry is the database's time plus the
// TTL, whatever either node's clock reads.
func TestExpiryOnDatabaseClock(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	ns, key := unique("dbclock"), "k"
	node := func(at time.Time) *pglocks.Driver {
		d, err := pglocks.New(pglocks.Options{Pool: p, Namespace: ns, Clock: clockwork.NewFakeClockAt(at)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	behind, ahead := node(time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)), node(time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC))
	var before time.Time
	if err := p.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	l, err := behind.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var expires, after time.Time
	err = p.QueryRow(ctx, "SELECT expires_at, clock_timestamp() FROM ndigo_locks WHERE ns = $1 AND key = $2", ns, key).Scan(&expires, &after)
	if err != nil {
		t.Fatal(err)
	}
	if expires.Before(before.Add(time.Minute)) || expires.After(after.Add(time.Minute)) {
		t.Errorf("expires_at %v, want the database's time of the Acquire (between %v and %v) plus the TTL", expires, before, after)
	}
	if _, err := ahead.Acquire(ctx, key, time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		t.Errorf("Acquire by a node a century ahead of the holder = %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := ahead.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	if next.Token() <= l.Token() {
		t.Errorf("token %d after the release, not above %d", next.Token(), l.Token())
	}
}
