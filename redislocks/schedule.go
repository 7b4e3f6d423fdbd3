package redislocks

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/taskstate"
)

var (
	//go:embed schedule.lua
	scheduleSource string

	scheduleScript = redis.NewScript(scheduleSource)
)

// CreateSchedule stores sc unless a schedule of its name is stored, and
// moves the schedules' generation on, in one script.
func (s *Store) CreateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return s.putSchedule(ctx, "CreateSchedule", "create", sc, taskstate.ErrScheduleExists)
}

// UpdateSchedule replaces the stored schedule of sc's name, and moves the
// schedules' generation on if its encoding changed, in one script.
func (s *Store) UpdateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return s.putSchedule(ctx, "UpdateSchedule", "update", sc, taskstate.ErrNoSchedule)
}

// putSchedule runs schedule.lua's op on sc and returns an error wrapping
// refused if the script refused it.
func (s *Store) putSchedule(ctx context.Context, op, scriptOp string, sc taskstate.Schedule, refused error) error {
	if err := taskstate.CheckContext(ctx); err != nil {
		return err
	}
	b, err := taskstate.EncodeSchedule(sc)
	if err != nil {
		return err
	}
	n, err := s.schedule(ctx, op, scriptOp, sc.Name, b)
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: schedule %q in namespace %q", refused, sc.Name, s.ns)
	}
	return nil
}

// DeleteSchedule removes the stored schedule of name, and moves the
// schedules' generation on if there was one, in one script.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := taskstate.CheckScheduleName(ctx, name); err != nil {
		return false, err
	}
	n, err := s.schedule(ctx, "DeleteSchedule", "delete", name, nil)
	return n == 1, err
}

// schedule runs schedule.lua's scriptOp on the schedule of name, with a
// nonce of its own, and returns the script's answer.
func (s *Store) schedule(ctx context.Context, op, scriptOp, name string, b []byte) (int, error) {
	n, err := scheduleScript.Run(ctx, s.client, []string{s.schedules, s.scheduleGen, s.call()}, name, callTTL.Milliseconds(),
		scriptOp, b).Int()
	if err != nil {
		return 0, fmt.Errorf("%w: %s of schedule %q: %w", ErrRedis, op, name, err)
	}
	return n, nil
}

// Schedules returns the stored schedules, ordered by name: one HGETALL.
func (s *Store) Schedules(ctx context.Context) ([]taskstate.Schedule, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return nil, err
	}
	m, err := s.client.HGetAll(ctx, s.schedules).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: Schedules in namespace %q: %w", ErrRedis, s.ns, err)
	}
	out := make([]taskstate.Schedule, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		sc, err := taskstate.DecodeSchedule([]byte(m[name]))
		if err != nil {
			return nil, fmt.Errorf("redislocks: schedule %q in namespace %q: %w", name, s.ns, err)
		}
		out = append(out, sc)
	}
	return out, nil
}
