package redislocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

// On the real clock, Done closes while Redis still holds the key: the holder
// stops before anyone else could acquire.
func TestDoneBeforeRedisExpiry(t *testing.T) {
	c := redistest.Start(t).Client()
	// A wide margin keeps the test independent of scheduling delays.
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "done", MinDrift: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	l, err := d.Acquire(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, l.Done(), "Done")
	ttl, err := c.PTTL(ctx, "ndigo:{done:k}:lock").Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("when Done closed Redis PTTL = %v, %v; want the key still held", ttl, err)
	}
	// Redis still holds it, so Release frees it at once.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the local deadline, before Redis expiry: %v", err)
	}
	if _, err := d.Acquire(ctx, "k", time.Minute); err != nil {
		t.Fatalf("Acquire after that Release: %v", err)
	}
}
