package redislocks

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
)

var (
	//go:embed member.lua
	memberSource string
	memberScript = redis.NewScript(memberSource)
)

// groupKey is the sorted set of group's members.
func (d *Driver) groupKey(group string) string { return "ndigo:{" + d.ns + "}:members:" + group }

// Heartbeat implements locks.Membership in one round trip: the group is a
// sorted set, ndigo:{ns}:members:<group>, of each member's end of life on
// the server's clock, whose expired members the heartbeat drops; the set
// expires with its longest-lived member.
func (d *Driver) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	if err := locks.CheckMembership(ctx, group, member, ttl, false); err != nil {
		return nil, err
	}
	members, err := memberScript.Run(ctx, d.client, []string{d.groupKey(group)}, member, millis(ttl)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrRedis, member, group, withContext(ctx, err))
	}
	slices.Sort(members)
	return members, nil
}

// Leave implements locks.Membership in one round trip.
func (d *Driver) Leave(ctx context.Context, group, member string) error {
	if err := locks.CheckMembership(ctx, group, member, 0, true); err != nil {
		return err
	}
	if err := memberScript.Run(ctx, d.client, []string{d.groupKey(group)}, member, 0).Err(); err != nil && err != redis.Nil {
		return fmt.Errorf("%w: %q leaving group %q: %w", ErrRedis, member, group, withContext(ctx, err))
	}
	return nil
}
