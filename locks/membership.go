package locks

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// A Membership is a Driver that keeps groups of live members, each member
// present while its heartbeats keep coming: a scheduler that spreads its
// tasks over a cluster's nodes (package scheduling, Config.Spread) learns
// from it which nodes are alive, and so which node owns which task. The
// in-process, Redis and PostgreSQL drivers are Memberships; a member's life
// is measured on the driver's clock (the server's, for a remote one).
type Membership interface {
	// Heartbeat records member as live in group until ttl from now and
	// returns the group's live members, sorted, member among them. A call
	// that the driver or its client retries after its first attempt took
	// effect answers the same. Bad input (an empty group or member, a ttl
	// out of (0, MaxTTL]) returns an error wrapping ErrInvalid.
	Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error)
	// Leave removes member from group at once: the other members' next
	// heartbeat no longer lists it. Leaving a group one is not in is no
	// error.
	Leave(ctx context.Context, group, member string) error
}

// CheckMembership validates the arguments of a Heartbeat (ttl > 0) or Leave
// (ttl 0) call, as [Check] does for Acquire.
func CheckMembership(ctx context.Context, group, member string, ttl time.Duration, leave bool) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: ctx must not be nil", ErrInvalid)
	case group == "":
		return fmt.Errorf("%w: membership group %q must not be empty", ErrInvalid, group)
	case member == "":
		return fmt.Errorf("%w: member %q of group %q must not be empty", ErrInvalid, member, group)
	case !leave && (ttl <= 0 || ttl > MaxTTL):
		return fmt.Errorf("%w: membership ttl %v for member %q of group %q must be in (0, %v]", ErrInvalid, ttl, member, group, MaxTTL)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("locks: group %q: %w", group, err)
	}
	return nil
}

// Heartbeat implements Membership.
func (d *InProcessDriver) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	if err := CheckMembership(ctx, group, member, ttl, false); err != nil {
		return nil, err
	}
	t := d.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		g = map[string]time.Duration{}
		t.groups[group] = g
	}
	g[member] = now + ttl
	live := make([]string, 0, len(g))
	for m, until := range g {
		if now < until {
			live = append(live, m)
		} else {
			delete(g, m)
		}
	}
	slices.Sort(live)
	return live, nil
}

// Leave implements Membership.
func (d *InProcessDriver) Leave(ctx context.Context, group, member string) error {
	if err := CheckMembership(ctx, group, member, 0, true); err != nil {
		return err
	}
	t := d.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.groups[group]; g != nil {
		delete(g, member)
		if len(g) == 0 {
			delete(t.groups, group)
		}
	}
	return nil
}
