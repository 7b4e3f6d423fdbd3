package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzCheck feeds lock keys and TTLs, as they come from struct tags,
// configuration or callers, to Check: it never panics, accepts exactly the
// non-empty keys of at most MaxKeyLen bytes with TTLs in (0, MaxTTL], and
// every rejection wraps ErrInvalid and quotes the key (its start, for a key
// over MaxKeyLen).
func FuzzCheck(f *testing.F) {
	for _, seed := range []struct {
		key string
		ttl int64
	}{
		{"payroll-window", int64(time.Minute)}, {"", int64(time.Second)}, {"k", 0}, {"k", -1},
		{"{tag}", 1}, {"a\x00b", 1}, {"ключ", int64(time.Hour)}, {"\xff\xfe", 1}, {strings.Repeat("k", 4096), 1},
		{"k", int64(^uint64(0) >> 1)}, {" ", 1}, {"a:b:c", 1}, {"*", 1}, {"k", int64(MaxTTL)}, {"k", int64(MaxTTL) + 1},
		{strings.Repeat("k", MaxKeyLen), 1}, {strings.Repeat("ключ", MaxKeyLen/8+1), 1},
	} {
		f.Add(seed.key, seed.ttl)
	}
	f.Fuzz(func(t *testing.T, key string, ttl int64) {
		err := Check(context.Background(), key, time.Duration(ttl))
		valid := key != "" && len(key) <= MaxKeyLen && ttl > 0 && ttl <= int64(MaxTTL)
		if valid != (err == nil) {
			t.Fatalf("Check(%.80q, %v) = %.200v; valid input is a non-empty key of at most MaxKeyLen bytes and a TTL in (0, MaxTTL]", key, time.Duration(ttl), err)
		}
		named := strconv.Quote(key)
		if len(key) > MaxKeyLen {
			named = fmt.Sprintf("is %d bytes long, the limit is locks.MaxKeyLen", len(key))
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), named)) {
			t.Fatalf("Check(%.80q, %v) = %.200v; want ErrInvalid naming the key", key, time.Duration(ttl), err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := Check(ctx, key, time.Duration(ttl)); valid && (!errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalid)) {
			t.Fatalf("Check(cancelled, %q, %v) = %v; want the context's error", key, time.Duration(ttl), err)
		}
	})
}
