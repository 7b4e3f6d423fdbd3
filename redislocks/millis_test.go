package redislocks

import (
	"math"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// millis rounds up, and cannot overflow for any TTL: every TTL locks.Check
// accepts, and the largest Duration too.
func TestMillis(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Nanosecond, 1}, {time.Millisecond, 1}, {time.Millisecond + 1, 2}, {time.Second, 1000},
		{locks.MaxTTL, 365 * 24 * 3600 * 1000}, {locks.MaxTTL + 1, 365*24*3600*1000 + 1},
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1},
	} {
		if got := millis(c.ttl); got != c.want {
			t.Errorf("millis(%v) = %d, want %d", c.ttl, got, c.want)
		}
	}
}
