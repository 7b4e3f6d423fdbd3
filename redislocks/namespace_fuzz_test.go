package redislocks_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// FuzzNamespace feeds namespaces, as they come from configuration, to New:
// it never panics, accepts exactly 1 to 64 bytes of [A-Za-z0-9_.-], and
// every rejection wraps ErrInvalidNamespace and locks.ErrInvalid and quotes
// the namespace.
func FuzzNamespace(f *testing.F) {
	for _, seed := range []string{"prod", "", "a", strings.Repeat("n", 64), strings.Repeat("n", 65), "prod env", "a:b",
		"{x}", "a*", "ns\x00", "é", "\xff", "release-1.2_3", "-", "..", "a\nb"} {
		f.Add(seed)
	}
	// New does not contact Redis; the client is never used.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	f.Fuzz(func(t *testing.T, ns string) {
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns})
		valid := len(ns) >= 1 && len(ns) <= 64 && strings.Trim(ns,
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == ""
		if valid != (err == nil) {
			t.Fatalf("New(Namespace %q) = %v; valid is 1 to 64 bytes of [A-Za-z0-9_.-]", ns, err)
		}
		if err != nil {
			if !errors.Is(err, redislocks.ErrInvalidNamespace) || !errors.Is(err, locks.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(ns)) {
				t.Fatalf("New(Namespace %q) = %v; want ErrInvalidNamespace naming the namespace", ns, err)
			}
			return
		}
		if d.Namespace() != ns {
			t.Fatalf("Namespace() = %q, want %q", d.Namespace(), ns)
		}
		_ = d.Close()
	})
}
