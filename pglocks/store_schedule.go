package pglocks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/taskstate"
)

// The statements of the stored schedules, $1 the namespace, $2 the
// schedule's name, $3 its encoding. Each that changes them does so in its
// CTE changed, which returns a row if it changed them, and moves the
// namespace's generation on in the same statement (scheduleMoved). The
// generation is a row, not a sequence as the pause generation is, so that
// a Poll sees it move only with the change, once committed: a node that
// reads the schedules after a Poll reads at least what that Poll's
// generation stands for. Each answers whether it created, found or deleted
// the schedule.
const (
	scheduleMoved = `, moved AS (
	INSERT INTO $GENERATIONS (ns, schedules) SELECT $1::text, 1 FROM changed
	ON CONFLICT (ns) DO UPDATE SET schedules = $GENERATIONS.schedules + 1
)
`
	// createScheduleSQL inserts the schedule unless its name is stored.
	createScheduleSQL = `WITH changed AS (
	INSERT INTO $SCHEDULES (ns, name, body) VALUES ($1::text, $2::text, $3::bytea) ON CONFLICT DO NOTHING RETURNING name
)` + scheduleMoved + `SELECT EXISTS (SELECT FROM changed)`
	// updateScheduleSQL replaces the body of the schedule its snapshot
	// finds, if it differs: a body that a racing update committed since is
	// compared again once that update's row lock is released, and replaced
	// if it still differs, so that the later call's body holds.
	updateScheduleSQL = `WITH found AS (
	SELECT FROM $SCHEDULES WHERE ns = $1::text AND name = $2::text
), changed AS (
	UPDATE $SCHEDULES SET body = $3::bytea WHERE ns = $1::text AND name = $2::text AND body <> $3::bytea RETURNING name
)` + scheduleMoved + `SELECT EXISTS (SELECT FROM found)`
	// deleteScheduleSQL deletes the schedule.
	deleteScheduleSQL = `WITH changed AS (
	DELETE FROM $SCHEDULES WHERE ns = $1::text AND name = $2::text RETURNING name
)` + scheduleMoved + `SELECT EXISTS (SELECT FROM changed)`
	// schedulesSQL reads the namespace's schedules, ordered by name as Go
	// orders strings (bytewise: collation C), whatever the database's
	// collation.
	schedulesSQL = `SELECT name, body FROM $SCHEDULES WHERE ns = $1::text ORDER BY name COLLATE "C"`
)

// CreateSchedule stores sc unless a schedule of its name is stored, and
// moves the schedules' generation on, in one statement.
func (s *Store) CreateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return s.putSchedule(ctx, "CreateSchedule", s.sql.createSchedule, sc, taskstate.ErrScheduleExists)
}

// UpdateSchedule replaces the stored schedule of sc's name, and moves the
// schedules' generation on if its encoding changed, in one statement.
func (s *Store) UpdateSchedule(ctx context.Context, sc taskstate.Schedule) error {
	return s.putSchedule(ctx, "UpdateSchedule", s.sql.updateSchedule, sc, taskstate.ErrNoSchedule)
}

// putSchedule runs q on sc and returns an error wrapping refused if q
// answers false.
func (s *Store) putSchedule(ctx context.Context, op, q string, sc taskstate.Schedule, refused error) error {
	if err := taskstate.CheckContext(ctx); err != nil {
		return err
	}
	b, err := taskstate.EncodeSchedule(sc)
	if err != nil {
		return err
	}
	ok, err := s.schedule(ctx, op, q, sc.Name, b)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: schedule %q in namespace %q", refused, sc.Name, s.ns)
	}
	return nil
}

// DeleteSchedule removes the stored schedule of name, and moves the
// schedules' generation on if there was one, in one statement.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := taskstate.CheckScheduleName(ctx, name); err != nil {
		return false, err
	}
	return s.schedule(ctx, "DeleteSchedule", s.sql.deleteSchedule, name)
}

// schedule runs q, one of the statements that change the schedules, on
// the schedule of name with args after it, and returns its answer.
func (s *Store) schedule(ctx context.Context, op, q, name string, args ...any) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, q, append([]any{pgx.QueryExecModeExec, s.ns, name}, args...)...).Scan(&ok); err != nil {
		return false, fmt.Errorf("%w: %s of schedule %q: %w", ErrDatabase, op, name, withContext(ctx, err))
	}
	return ok, nil
}

// Schedules returns the stored schedules, ordered by name, in one
// statement.
func (s *Store) Schedules(ctx context.Context) ([]taskstate.Schedule, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql.schedules, pgx.QueryExecModeExec, s.ns)
	if err != nil {
		return nil, fmt.Errorf("%w: Schedules in namespace %q: %w", ErrDatabase, s.ns, withContext(ctx, err))
	}
	out := []taskstate.Schedule{}
	var name string
	var body []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &body}, func() error {
		sc, err := taskstate.DecodeSchedule(body)
		if err != nil {
			return fmt.Errorf("schedule %q: %w", name, err)
		}
		out = append(out, sc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: Schedules in namespace %q: %w", ErrDatabase, s.ns, withContext(ctx, err))
	}
	return out, nil
}
