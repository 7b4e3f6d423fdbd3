package redislocks_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// MinTTL is the largest TTL that the drift margin DriftRatio*ttl + MinDrift
// swallows whole; Acquire and Extend reject it, naming the key, the TTL and
// the rule, and accept the next TTL up, whose lease is live.
func TestMinTTL(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	for i, o := range []struct {
		ratio float64
		min   time.Duration
	}{{0, 0}, {0.2, 100 * time.Millisecond}, {0.49, time.Nanosecond}, {0.1, 3 * time.Millisecond}} {
		fc := clockwork.NewFakeClock()
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "minttl" + strconv.Itoa(i), Clock: fc, DriftRatio: o.ratio, MinDrift: o.min})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ratio, minDrift := o.ratio, o.min
		if ratio == 0 {
			ratio, minDrift = 0.01, 2*time.Millisecond
		}
		margin := func(ttl time.Duration) time.Duration { return time.Duration(float64(ttl)*ratio) + minDrift }
		m := d.MinTTL()
		if m-margin(m) > 0 || (m+1)-margin(m+1) <= 0 {
			t.Fatalf("%+v: MinTTL %v: live span %v at MinTTL, %v one nanosecond above; want <= 0, then > 0",
				o, m, m-margin(m), (m+1)-margin(m+1))
		}
		if got, ok := locks.As[locks.MinTTLer](d); !ok || got.MinTTL() != m {
			t.Fatalf("the driver is not found as a locks.MinTTLer")
		}
		_, err = d.Acquire(ctx, "k", m)
		if !errors.Is(err, locks.ErrInvalid) {
			t.Fatalf("%+v: Acquire(MinTTL %v) = %v, want ErrInvalid", o, m, err)
		}
		for _, want := range []string{`"k"`, m.String(), "MinTTL", "DriftRatio*ttl + MinDrift"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
		// A lease of MinTTL+1ns is granted; its live span is 1ns, so what
		// follows uses a lease that lasts.
		if _, err := d.Acquire(ctx, "k", m+1); err != nil {
			t.Fatalf("%+v: Acquire(MinTTL+1ns) = %v, want a lease", o, err)
		}
		l, err := d.Acquire(ctx, "k2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, m); !errors.Is(err, locks.ErrInvalid) {
			t.Fatalf("%+v: Extend(MinTTL) = %v, want ErrInvalid", o, err)
		}
		// The refused Extend changed nothing: the holder still releases.
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%+v: Release after a refused Extend: %v", o, err)
		}
	}
}
