package redislocks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/locks/lockstest"
	"github.com/ndigo/ndigo/redislocks"
)

// oddKeys are lock keys with hash-tag braces, glob and Lua metacharacters,
// quotes, NUL, non-ASCII and a long one. On a Cluster a key layout that
// split one lock over two slots would answer CROSSSLOT.
var oddKeys = []string{
	"{", "}", "}{", "{}", "{{}}", "}x", "a}b{c", "ns:k}:lock",
	"*", "?", "[a-z]", "\\", "%d", "%s%s", "'", "\"", "]]", "--", "[[", "]=]",
	"\x00", "a\nb", "ключ", " ", strings.Repeat("k", 10_000),
}

func TestOddKeys(t *testing.T) {
	t.Run("SingleServer", func(t *testing.T) {
		testOddKeys(t, newDriver(t, redistest.Start(t).Client(), "odd"))
	})
	t.Run("Cluster", func(t *testing.T) {
		testOddKeys(t, newDriver(t, redistest.StartCluster(t, 3).Client(), "odd"))
	})
}

func testOddKeys(t *testing.T, d *redislocks.Driver) {
	ctx := context.Background()
	held := map[string]locks.Lease{}
	for _, k := range oddKeys {
		l, err := d.Acquire(ctx, k, time.Minute)
		if err != nil {
			t.Fatalf("Acquire(%.20q): %v", k, err)
		}
		held[k] = l
	}
	// Every key is held on its own: none of the odd keys aliases another.
	for _, k := range oddKeys {
		if _, err := d.Acquire(ctx, k, time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatalf("second Acquire(%.20q) = %v, want ErrNotAcquired", k, err)
		}
		if err := held[k].Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend(%.20q): %v", k, err)
		}
	}
	// A release wakes the waiters of that exact key only: "*" and "[a-z]"
	// are not patterns here.
	star, stopStar := d.Watch("*")
	defer stopStar()
	other, stopOther := d.Watch("[a-z]")
	defer stopOther()
	probe, stopProbe := d.Watch("ключ")
	defer stopProbe()
	if err := held["*"].Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, star, `watch of "*"`)
	// The probe's release is published later; once it arrives, a wrong
	// wake of "[a-z]" would have happened.
	if err := held["ключ"].Release(ctx); err != nil {
		t.Fatal(err)
	}
	lockstest.Closes(t, probe, `watch of "ключ"`)
	if !lockstest.IsOpen(other) {
		t.Fatal(`a release of "*" woke the waiter of "[a-z]"`)
	}
	for _, k := range oddKeys {
		if k == "*" || k == "ключ" {
			continue
		}
		if err := held[k].Release(ctx); err != nil {
			t.Fatalf("Release(%.20q): %v", k, err)
		}
		l, err := d.Acquire(ctx, k, time.Minute)
		if err != nil {
			t.Fatalf("Acquire(%.20q) after Release: %v", k, err)
		}
		if l.Token() <= held[k].Token() {
			t.Fatalf("token of %.20q went from %d to %d", k, held[k].Token(), l.Token())
		}
		_ = l.Release(ctx)
	}
}
