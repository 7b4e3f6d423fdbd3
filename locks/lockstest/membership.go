package lockstest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// membership checks locks.Membership, which every driver of this project
// implements: heartbeats list the live members sorted, a member lives ttl
// after its last heartbeat, Leave removes it at once, groups are
// independent, a retried heartbeat answers alike, and bad input is
// ErrInvalid.
func (s *suite) membership(t *testing.T) {
	d := s.h.NewDriver(t)
	m, ok := d.(locks.Membership)
	if !ok {
		t.Fatalf("%T does not implement locks.Membership", d)
	}
	ctx := context.Background()
	group, other := s.key(t), s.key(t)
	beat := func(g, member string, ttl time.Duration, want ...string) {
		t.Helper()
		got, err := m.Heartbeat(ctx, g, member, ttl)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Heartbeat(%q, %v) = %q, %v; want %q", member, ttl, got, err, want)
		}
	}
	beat(group, "b", long, "b")
	beat(group, "b", long, "b") // a retry, or the next heartbeat: the same
	beat(group, "a", s.h.TTL, "a", "b")
	beat(group, "c/{x}:1", long, "a", "b", "c/{x}:1")
	beat(other, "z", long, "z") // another group
	s.pastTTL()                 // a missed its heartbeats
	beat(group, "b", long, "b", "c/{x}:1")
	if err := m.Leave(ctx, group, "b"); err != nil {
		t.Fatal(err)
	}
	if err := m.Leave(ctx, group, "b"); err != nil {
		t.Fatalf("Leave of a member that left: %v, want nil", err)
	}
	beat(group, "c/{x}:1", long, "c/{x}:1")
	beat(other, "z", long, "z")
	for _, bad := range []struct {
		group, member string
		ttl           time.Duration
	}{{"", "a", long}, {group, "", long}, {group, "a", 0}, {group, "a", -time.Second}, {group, "a", locks.MaxTTL + 1}} {
		if _, err := m.Heartbeat(ctx, bad.group, bad.member, bad.ttl); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("Heartbeat(%q, %q, %v) = %v, want ErrInvalid", bad.group, bad.member, bad.ttl, err)
		}
	}
	if err := m.Leave(ctx, "", "a"); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Leave with no group = %v, want ErrInvalid", err)
	}
	if err := m.Leave(ctx, group, ""); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("Leave with no member = %v, want ErrInvalid", err)
	}
}
