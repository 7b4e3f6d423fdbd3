package redislocks_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
)

// Tokens keep increasing when Redis restarts without persistence and the
// token counter is gone.
func TestTokensIncreaseAcrossRestart(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	ctx := context.Background()
	d := newDriver(t, c, "fence")
	l, err := d.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Token()
	// The holder does not release: the restart loses the lease and the
	// counter alike.
	s.Restart()
	if n, err := c.Exists(ctx, "ndigo:{fence:payroll}:token", "ndigo:{fence:payroll}:lock").Result(); err != nil || n != 0 {
		t.Fatalf("after restart %d keys exist (%v); the test needs the counter lost", n, err)
	}
	l2, err := d.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
	if l2.Token() <= first {
		t.Fatalf("token after restart %d, not above %d from before", l2.Token(), first)
	}
}

// Tokens keep increasing when the counter is flushed between acquisitions,
// and they follow the counter when it is ahead of the server clock (a
// clock stepped back).
func TestTokensIncreaseAfterFlushAndClockStepBack(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fence")
	var last uint64
	for i := range 5 {
		l, err := d.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d after FLUSHALL: token %d, not above %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ahead := last + uint64(time.Hour/time.Microsecond)
	if err := c.Set(ctx, "ndigo:{fence:k}:token", strconv.FormatUint(ahead, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != ahead+1 {
		t.Fatalf("token with the counter ahead of TIME = %d, want %d", l.Token(), ahead+1)
	}
}

// The token is the server time in microseconds, stored as the lease's
// value, and the counter expires instead of living forever.
func TestTokenLayout(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fence")
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := c.Time(ctx).Result()
	if tok := int64(l.Token()); tok < before.UnixMicro() || tok > after.UnixMicro() {
		t.Fatalf("token %d not within server TIME [%d, %d]", tok, before.UnixMicro(), after.UnixMicro())
	}
	if v, err := c.Get(ctx, "ndigo:{fence:k}:lock").Result(); err != nil || v != strconv.FormatUint(l.Token(), 10) {
		t.Fatalf("lock value = %q, %v; want the token %d", v, err, l.Token())
	}
	if ttl, err := c.PTTL(ctx, "ndigo:{fence:k}:lock").Result(); err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("lock PTTL = %v, %v; want (0, 30s]", ttl, err)
	}
	ttl, err := c.PTTL(ctx, "ndigo:{fence:k}:token").Result()
	if err != nil || ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("counter PTTL = %v, %v; want about 24h", ttl, err)
	}
	long := 48 * time.Hour
	if err := l.Extend(ctx, long); err != nil {
		t.Fatal(err)
	}
	ttl, err = c.PTTL(ctx, "ndigo:{fence:k}:token").Result()
	if err != nil || ttl < long-time.Minute {
		t.Fatalf("counter PTTL after Extend(%v) = %v, %v; the counter must outlive the lease", long, ttl, err)
	}
}
