package redislocks_test

import (
	"context"
	"strconv"
	"strings"
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

// A token is the server time in microseconds (or one above the last, if
// that is later); the lease's value is the token and the Acquire's nonce,
// and the counter expires
// instead of living forever.
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
		t.Fatalf("first token %d not within server TIME [%d, %d]", tok, before.UnixMicro(), after.UnixMicro())
	}
	v, err := c.Get(ctx, "ndigo:{fence:k}:lock").Result()
	tok, nonce, _ := strings.Cut(v, ":")
	if err != nil || tok != strconv.FormatUint(l.Token(), 10) || nonce == "" || strings.ContainsAny(nonce, ":+ ") {
		t.Fatalf("lock value = %q, %v; want the token %d, ':' and the Acquire's nonce", v, err, l.Token())
	}
	if ttl, err := c.PTTL(ctx, "ndigo:{fence:k}:lock").Result(); err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("lock PTTL = %v, %v; want (0, 30s]", ttl, err)
	}
	ttl, err := c.PTTL(ctx, "ndigo:{fence:k}:token").Result()
	if err != nil || ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("counter PTTL = %v, %v; want about 24h", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := d.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("second token %d, not above %d", next.Token(), l.Token())
	}
	// A lease longer than a day gets a counter that lives as long.
	long, err := d.Acquire(ctx, "long", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Release(ctx)
	if ttl, err := c.PTTL(ctx, "ndigo:{fence:long}:token").Result(); err != nil || ttl < 47*time.Hour {
		t.Fatalf("counter PTTL for a 48h lease = %v, %v; want about 48h", ttl, err)
	}
}

// A lost counter restarts from TIME, above tokens minted from the old one.
func TestTokensIncreaseWhenCounterExpires(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fence")
	var last uint64
	for range 3 {
		l, err := d.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Del(ctx, "ndigo:{fence:k}:token").Err(); err != nil { // as its TTL would
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= last {
		t.Fatalf("token after the counter expired %d, not above %d", l.Token(), last)
	}
}

// A promoted replica that missed the last mints has a counter behind the
// tokens already handed out; the next token is still above them.
func TestTokensIncreaseWithStaleCounter(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	d := newDriver(t, c, "fence")
	var first, last uint64
	for i := range 5 {
		l, err := d.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l.Token()
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The replica saw only the first mint.
	if err := c.Set(ctx, "ndigo:{fence:k}:token", strconv.FormatUint(first, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := d.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= last {
		t.Fatalf("token with a stale counter %d, not above %d handed out before", l.Token(), last)
	}
}
