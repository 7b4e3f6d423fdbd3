package pglocks

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/taskstate"
)

var (
	//go:embed store_schema.sql
	storeSchemaSQL string
	//go:embed store_record.sql
	storeRecordSQL string
	//go:embed store_take.sql
	storeTakeSQL string
	//go:embed store_takeretry.sql
	storeTakeRetrySQL string
	//go:embed store_retry.sql
	storeRetrySQL string
	//go:embed store_leavewaiting.sql
	storeLeaveWaitingSQL string
	//go:embed store_startbackfill.sql
	storeStartBackfillSQL string
	//go:embed store_takebackfill.sql
	storeTakeBackfillSQL string
	//go:embed store_takerun.sql
	storeTakeRunSQL string
	//go:embed store_appendevent.sql
	storeAppendEventSQL string
)

const defaultStoreTable = "ndigo_tasks"

// StoreOptions configures a Store made by NewStore.
type StoreOptions struct {
	// Pool is the pool to borrow. Required.
	Pool *pgxpool.Pool
	// Namespace isolates this store's tasks from those of other
	// environments sharing the database, with [CheckNamespace]'s rule.
	Namespace string
	// Table is the prefix of the store's tables, "table" or
	// "schema.table" as Options.Table; "" means ndigo_tasks (tables
	// ndigo_tasks_paused, ndigo_tasks_resumed, ndigo_tasks_requests,
	// ndigo_tasks_retries, ndigo_tasks_runs, ndigo_tasks_backfills, ndigo_tasks_ran,
	// ndigo_tasks_schedules, ndigo_tasks_generations,
	// ndigo_tasks_runcounts, ndigo_tasks_events and ndigo_tasks_eventseq,
	// and the sequence ndigo_tasks_pauses).
	Table string
	// History is how many runs per task the store keeps; zero means
	// taskstate.DefaultHistory.
	History int
	// Trail is how many events of the namespace's trail of control
	// actions the store keeps, the newest; zero means
	// taskstate.DefaultTrail, at most taskstate.MaxTrail.
	Trail int
}

// A Store is a taskstate.Store in PostgreSQL, shared by every node on the
// same database and namespace. Make one with NewStore and call
// CreateSchema once; it is safe for concurrent use. Each operation is one
// statement, with the namespace and the task's or schedule's name as bind
// parameters, sent unprepared (pgx.QueryExecModeExec, whatever the pool's
// default mode), as the driver's: it works through PgBouncer in
// transaction mode. A take
// deletes the request or retry, or moves the backfill's cursor, and inserts
// the placeholder run in one statement; a manual run's, a retry's or a
// backfill run's record deletes its placeholder, inserts the run, trims the
// history and leaves the run's retry in one; LeaveWaiting inserts or
// updates the task's retry row in one, the row lock ordering it with the
// takes and records of the task's retry. A placeholder's JSON has
// "fire_ns", the request's instant in Unix nanoseconds, in place of "fire".
// Each task's last backfill is a row of its own, which a take updates (the
// row lock orders racing takes) and a start replaces unless it is running;
// the instants known to have run are rows of (task, fire) in Unix
// nanoseconds. The stored schedules are rows of (name, body), body being
// taskstate.EncodeSchedule's bytes; a schedule call changes its row and
// moves the namespace's schedules generation (a row of its own, which
// Poll reads) on in one statement, if it changed the schedules. A paused
// task is a row of the paused table, with its pause's note, by and at; a
// task resumed since, a row of the resumed table with its resume's. The
// runs that TakeRun counts are a row per task (how many, and its last
// taskstate.MaxRunTakes takes), which a take inserts or updates in one
// statement, the row lock ordering the takes of the task. The trail of
// control actions is a row per entry, numbered from a counter row per
// namespace that each append updates in its statement
// (store_appendevent.sql): its row lock, held to the commit, makes the
// appends commit in the order of their Seqs (a sequence would not: a later
// nextval may commit first), and the Key's unique index stores each Key
// once. CreateSchema of
// this version adds these tables and columns to those of an earlier one.
//
// pgx never resends a query: a call whose reply was lost (the connection
// broke after the statement ran) returns an error wrapping ErrDatabase, and
// its statement ran once (committed before the reply) or not at all, never
// twice; once its context ended, the error wraps the context's error too.
// A Record sent again with the same run IDs (taskstate.TaskRun.ID) keeps
// each run once: a run's JSON ends with its ID, which the record statement
// looks for among the task's rows, under a transaction-scoped advisory
// lock per task that orders a resend after a first attempt still running.
// No row expires (store_schema.sql says which stay).
type Store struct {
	pool    *pgxpool.Pool
	ns      string
	table   string
	history int
	keep    int // the trail's length
	sql     storeStatements
}

type storeStatements struct {
	schema, pause, resume, paused, request, poll, take, takeRetry, record, retry, records, runs string
	leaveWaiting, takeRun, appendEvent, events                                                  string
	startBackfill, takeBackfill, endBackfill                                                    string
	createSchedule, updateSchedule, deleteSchedule, schedules                                   string
}

var _ taskstate.Store = (*Store)(nil)

// NewStore returns a store on opts.Pool. It does not contact the database.
func NewStore(opts StoreOptions) (*Store, error) {
	if opts.Pool == nil {
		return nil, fmt.Errorf("%w: pglocks: StoreOptions.Pool must not be nil", taskstate.ErrInvalid)
	}
	if err := CheckNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: pglocks: StoreOptions.Namespace %q %v", taskstate.ErrInvalid, opts.Namespace, err)
	}
	n, err := taskstate.CheckHistory("pglocks: StoreOptions.History", opts.History)
	if err != nil {
		return nil, err
	}
	keep, err := taskstate.CheckTrail("pglocks: StoreOptions.Trail", opts.Trail)
	if err != nil {
		return nil, err
	}
	table := opts.Table
	if table == "" {
		table = defaultStoreTable
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: pglocks: StoreOptions.Table %q has more than one '.': use table or schema.table", taskstate.ErrInvalid, table)
	}
	for _, p := range parts {
		if !tablePart.MatchString(p) {
			return nil, fmt.Errorf("%w: pglocks: StoreOptions.Table %q: %q must be 1 to 56 characters of [a-z0-9_], not starting with a digit",
				taskstate.ErrInvalid, table, p)
		}
	}
	name := func(suffix string) string {
		q := append([]string(nil), parts...)
		q[len(q)-1] += suffix
		return pgx.Identifier(q).Sanitize()
	}
	r := strings.NewReplacer("$PAUSED", name("_paused"), "$RESUMED", name("_resumed"), "$REQUESTS", name("_requests"), "$RUNS", name("_runs"), "$RETRIES", name("_retries"),
		"$PAUSES", name("_pauses"), "$RECORD1", name("_record1"), "$RECORD", name("_record"),
		"$BACKFILLS", name("_backfills"), "$RAN", name("_ran"), "$STARTBACKFILL", name("_startbackfill"),
		"$SCHEDULES", name("_schedules"), "$GENERATIONS", name("_generations"), "$RUNCOUNTS", name("_runcounts"),
		"$EVENTSEQ", name("_eventseq"), "$EVENTS", name("_events"),
		"$HISTORYLOCK", strconv.Itoa(int(int32(schemaLock([]string{"store record", table})))))
	s := &Store{pool: opts.Pool, ns: opts.Namespace, table: table, history: n, keep: keep, sql: storeStatements{
		schema: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n", schemaLock([]string{"store", table})) +
			r.Replace(storeSchemaSQL) + r.Replace(storeFunctionsSQL(storeRecordSQL, storeRetrySQL, storeStartBackfillSQL)),
		pause: r.Replace(`WITH g AS (SELECT nextval('$PAUSES')),
			d AS (DELETE FROM $RESUMED WHERE ns = $1::text AND task = $2::text)
			INSERT INTO $PAUSED (ns, task, note, who, at) SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint FROM g
			ON CONFLICT (ns, task) DO UPDATE SET note = EXCLUDED.note, who = EXCLUDED.who, at = EXCLUDED.at`),
		resume: r.Replace(`WITH g AS (SELECT nextval('$PAUSES')),
			d AS (DELETE FROM $PAUSED WHERE ns = $1::text AND task = $2::text)
			INSERT INTO $RESUMED (ns, task, note, who, at) SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint FROM g
			ON CONFLICT (ns, task) DO UPDATE SET note = EXCLUDED.note, who = EXCLUDED.who, at = EXCLUDED.at`),
		paused: r.Replace(`SELECT true, note, who, at FROM $PAUSED WHERE ns = $1::text AND task = $2::text
			UNION ALL SELECT false, note, who, at FROM $RESUMED WHERE ns = $1::text AND task = $2::text
			ORDER BY 1 DESC LIMIT 1`),
		request: r.Replace(`INSERT INTO $REQUESTS (ns, task, at) VALUES ($1::text, $2::text, $3::bigint) ON CONFLICT DO NOTHING`),
		poll: r.Replace(`SELECT 'request', task, at, 0, 0, false, NULL::text FROM $REQUESTS WHERE ns = $1::text
			UNION ALL SELECT 'retry', task, fire, attempt, due, manual, NULL FROM $RETRIES WHERE ns = $1::text AND NOT taken
			UNION ALL SELECT 'backfill', task, 0, 0, 0, false, to_jsonb(b)::text FROM $BACKFILLS b WHERE ns = $1::text
			UNION ALL SELECT 'runs', task, taken, 0, 0, false, NULL FROM $RUNCOUNTS WHERE ns = $1::text
			UNION ALL SELECT 'pauses', NULL::text, CASE WHEN is_called THEN last_value ELSE 0 END, 0, 0, false, NULL FROM $PAUSES
			UNION ALL SELECT 'schedules', NULL, schedules, 0, 0, false, NULL FROM $GENERATIONS WHERE ns = $1::text`),
		take:         r.Replace(storeTakeSQL),
		takeRetry:    r.Replace(storeTakeRetrySQL),
		leaveWaiting: r.Replace(storeLeaveWaitingSQL),
		takeRun:      r.Replace(storeTakeRunSQL),
		appendEvent:  r.Replace(storeAppendEventSQL),
		events: r.Replace(`SELECT seq, key, at, node, actor, action, target, note, before, after
			FROM $EVENTS WHERE ns = $1::text AND seq > $2::bigint ORDER BY seq LIMIT $3::bigint`),
		record:        r.Replace(storeRecordSQL),
		retry:         r.Replace(storeRetrySQL),
		records:       r.Replace(`SELECT $RECORD($1::text, $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])`),
		runs:          r.Replace(`SELECT run FROM $RUNS WHERE ns = $1::text AND task = $2::text ORDER BY id DESC LIMIT $3::bigint`),
		startBackfill: r.Replace(`SELECT $STARTBACKFILL($1::text, $2::text, $3::jsonb, $4::bigint[])`),
		takeBackfill:  r.Replace(storeTakeBackfillSQL),
		endBackfill: r.Replace(`UPDATE $BACKFILLS SET state = $4::text
			WHERE ns = $1::text AND task = $2::text AND id = $3::text AND state = 'running'`),
		createSchedule: r.Replace(createScheduleSQL),
		updateSchedule: r.Replace(updateScheduleSQL),
		deleteSchedule: r.Replace(deleteScheduleSQL),
		schedules:      r.Replace(schedulesSQL),
	}}
	return s, nil
}

// CreateSchema creates the store's tables if they do not exist. It is
// idempotent and safe to call from several nodes at once.
func (s *Store) CreateSchema(ctx context.Context) error {
	if err := taskstate.CheckContext(ctx); err != nil {
		return err
	}
	var err error
	for range 3 {
		_, err = s.pool.Exec(ctx, s.sql.schema, pgx.QueryExecModeSimpleProtocol)
		// As in Driver.CreateSchema: a concurrent creation fails one session
		// on the catalog, and the next try sees the tables.
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P07" && pgErr.Code != "42710") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: create the task state schema (tables %s_*): %w", ErrDatabase, s.table, err)
	}
	return nil
}

// String names the store and its namespace.
func (s *Store) String() string { return "pglocks store (namespace " + s.ns + ")" }

// fail wraps a database error with ErrDatabase and the operation's task,
// and with ctx's error once ctx ended (see withContext).
func (s *Store) fail(ctx context.Context, op, task string, err error) error {
	return fmt.Errorf("%w: %s of task %q: %w", ErrDatabase, op, task, withContext(ctx, err))
}

// withContext returns err, wrapping ctx's error too once ctx ended: pgx
// reports the broken connection of a call whose context ended as it
// learnt of it (the reply's read failed), and a caller tells a call that
// ran out of its time by errors.Is(err, context.DeadlineExceeded) whatever
// pgx saw first.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// SetPaused sets task's pause in one statement: a pause upserts the task's
// row of the paused table, with its note, by (column who) and at, and
// deletes its last resume; a resume deletes that row and upserts the last
// resume's. Both draw from the pauses sequence. A node of the version
// before notes reads and sets the same rows of the paused table (its pause
// taking no note); but its resume leaves the last resume of this version,
// which Paused then returns, until the next SetPaused of this version.
func (s *Store) SetPaused(ctx context.Context, task string, p taskstate.Pause) error {
	if err := taskstate.CheckSetPaused(ctx, task, p); err != nil {
		return err
	}
	q := s.sql.resume
	if p.Paused {
		q = s.sql.pause
	}
	var at *int64
	if !p.At.IsZero() {
		at = new(p.At.UnixNano())
	}
	if _, err := s.pool.Exec(ctx, q, pgx.QueryExecModeExec, s.ns, task, p.Note, p.By, at); err != nil {
		return s.fail(ctx, "SetPaused", task, err)
	}
	return nil
}

// Paused returns task's pause: its row of the paused table, or else its
// last resume's, in one statement.
func (s *Store) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return taskstate.Pause{}, err
	}
	var p taskstate.Pause
	var at *int64
	err := s.pool.QueryRow(ctx, s.sql.paused, pgx.QueryExecModeExec, s.ns, task).Scan(&p.Paused, &p.Note, &p.By, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return taskstate.Pause{}, nil
	case err != nil:
		return taskstate.Pause{}, s.fail(ctx, "Paused", task, err)
	}
	if at != nil {
		p.At = time.Unix(0, *at).UTC()
	}
	return p, nil
}

// RequestRun records a pending run of task, merged into one already
// pending.
func (s *Store) RequestRun(ctx context.Context, task string, at time.Time) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.request, pgx.QueryExecModeExec, s.ns, task, at.UnixNano()); err != nil {
		return s.fail(ctx, "RequestRun", task, err)
	}
	return nil
}

// Poll returns the pending requests and retries, the backfills, the runs
// taken, the pause generation and the schedules' generation, in one statement.
// The pause generation is the last value of a sequence that SetPaused draws
// from, of every namespace in the tables (a change in one namespace makes the
// others' nodes read their flags again, which costs a read and changes
// nothing), and 0 before the first draw, whose value is 1 too. The schedules'
// generation is the namespace's row, 0 before the first change.
func (s *Store) Poll(ctx context.Context) (taskstate.Poll, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return taskstate.Poll{}, err
	}
	rows, err := s.pool.Query(ctx, s.sql.poll, pgx.QueryExecModeExec, s.ns)
	if err != nil {
		return taskstate.Poll{}, fmt.Errorf("%w: Poll in namespace %q: %w", ErrDatabase, s.ns, withContext(ctx, err))
	}
	out := taskstate.Poll{Requests: map[string]time.Time{}}
	var kind string
	var task *string
	var at, due int64
	var attempt int
	var manual bool
	var backfill *string
	_, err = pgx.ForEachRow(rows, []any{&kind, &task, &at, &attempt, &due, &manual, &backfill}, func() error {
		switch kind {
		case "pauses":
			out.Pauses = at
		case "schedules":
			out.Schedules = at
		case "request":
			out.Requests[*task] = time.Unix(0, at).UTC()
		case "runs":
			if out.Runs == nil {
				out.Runs = map[string]int{}
			}
			out.Runs[*task] = int(at)
		case "retry":
			if out.Retries == nil {
				out.Retries = map[string]taskstate.Retry{}
			}
			out.Retries[*task] = taskstate.Retry{Fire: time.Unix(0, at).UTC(), Manual: manual, Attempt: attempt, Due: time.Unix(0, due).UTC()}
		case "backfill":
			var r backfillRow
			if err := json.Unmarshal([]byte(*backfill), &r); err != nil {
				return fmt.Errorf("backfill of task %q: %w", *task, err)
			}
			if out.Backfills == nil {
				out.Backfills = map[string]taskstate.Backfill{}
			}
			out.Backfills[*task] = r.backfill(*task)
		}
		return nil
	})
	if err != nil {
		return taskstate.Poll{}, fmt.Errorf("%w: Poll in namespace %q: %w", ErrDatabase, s.ns, withContext(ctx, err))
	}
	return out, nil
}

// TakeRequest removes task's pending request and adds node's placeholder
// run, in one statement.
func (s *Store) TakeRequest(ctx context.Context, task, node string) (time.Time, bool, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	if err := taskstate.CheckNode(node); err != nil {
		return time.Time{}, false, err
	}
	var at int64
	err := s.pool.QueryRow(ctx, s.sql.take, pgx.QueryExecModeExec, s.ns, task, node, s.history).Scan(&at)
	switch {
	case err == nil:
		return time.Unix(0, at).UTC(), true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, false, nil
	}
	return time.Time{}, false, s.fail(ctx, "TakeRequest", task, err)
}

// TakeRetry marks task's pending retry taken if it is r and adds node's
// placeholder run, in one statement.
func (s *Store) TakeRetry(ctx context.Context, task, node string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckTakeRetry(ctx, task, node, r); err != nil {
		return false, err
	}
	p, err := json.Marshal(placeholderOf{FireNano: r.Fire.UnixNano(), Node: node, Outcome: taskstate.OutcomeTaken,
		Attempt: r.Attempt, Manual: r.Manual})
	if err != nil {
		return false, fmt.Errorf("pglocks: TakeRetry of task %q: %w", task, err)
	}
	var n int
	err = s.pool.QueryRow(ctx, s.sql.takeRetry, pgx.QueryExecModeExec, s.ns, task, string(p), r.Fire.UnixNano(), r.Attempt, s.history).Scan(&n)
	if err != nil {
		return false, s.fail(ctx, "TakeRetry", task, err)
	}
	return n == 1, nil
}

// LeaveWaiting makes r task's pending retry unless another is pending or
// the last one taken is later, in one statement (store_leavewaiting.sql: an
// INSERT … ON CONFLICT DO UPDATE of the task's retry row, which locks it).
// It reports true if r is the task's last retry once it returns, pending or
// taken, so that a call made again answers true.
func (s *Store) LeaveWaiting(ctx context.Context, task string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckLeaveWaiting(ctx, task, r); err != nil {
		return false, err
	}
	var n int
	err := s.pool.QueryRow(ctx, s.sql.leaveWaiting, pgx.QueryExecModeExec, s.ns, task, r.Fire.UnixNano(), r.Attempt,
		r.Due.UnixNano(), r.Manual).Scan(&n)
	if err != nil {
		return false, s.fail(ctx, "LeaveWaiting", task, err)
	}
	return n == 1, nil
}

// TakeRun takes the next of task's runs for fire unless fire took one
// among the task's last takes (its number) or max were taken (0), in one
// statement (store_takerun.sql: an INSERT … ON CONFLICT DO UPDATE of the
// task's row, which locks it). pgx does not resend it: a call whose reply
// was lost returns an error, and took a run once or not at all; sent
// again for the same fire, it answers the number the first took.
func (s *Store) TakeRun(ctx context.Context, task string, fire time.Time, max int) (int, error) {
	if err := taskstate.CheckTakeRun(ctx, task, fire, max); err != nil {
		return 0, err
	}
	var n int
	// The count is an integer column: a max past it is as good as its
	// largest value.
	err := s.pool.QueryRow(ctx, s.sql.takeRun, pgx.QueryExecModeExec, s.ns, task, fire.UnixNano(), min(max, math.MaxInt32),
		taskstate.MaxRunTakes).Scan(&n)
	if err != nil {
		return 0, s.fail(ctx, "TakeRun", task, err)
	}
	return n, nil
}

// AppendEvent appends e to the namespace's trail in one statement
// (store_appendevent.sql), which answers the entry of e.Key if the trail
// holds one. pgx does not resend it: a call whose reply was lost returns
// an error, and stored the entry once or not at all; sent again with the
// same Key, it answers the entry stored. An append that raced another of
// its Key, which committed first, runs the statement again to read it.
func (s *Store) AppendEvent(ctx context.Context, e taskstate.Event) (taskstate.Event, error) {
	if err := taskstate.CheckEvent(ctx, e); err != nil {
		return taskstate.Event{}, err
	}
	for range 3 {
		rows, err := s.pool.Query(ctx, s.sql.appendEvent, pgx.QueryExecModeExec, s.ns, e.Key, e.At.UnixNano(), e.Node, e.Actor,
			e.Action, e.Target, e.Note, e.Before, e.After, s.keep)
		if err != nil {
			return taskstate.Event{}, s.failEvent(ctx, "AppendEvent", e.Key, err)
		}
		got, err := scanEvents(rows)
		if err != nil {
			return taskstate.Event{}, s.failEvent(ctx, "AppendEvent", e.Key, err)
		}
		if len(got) == 1 {
			return got[0], nil
		}
	}
	return taskstate.Event{}, fmt.Errorf("%w: AppendEvent of event %q: neither stored nor held after 3 attempts", ErrDatabase, e.Key)
}

// Events reads the namespace's trail after after, in one statement.
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]taskstate.Event, error) {
	if err := taskstate.CheckEvents(ctx, after, limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql.events, pgx.QueryExecModeExec, s.ns, after, limit)
	if err != nil {
		return nil, s.failEvent(ctx, "Events", "", err)
	}
	got, err := scanEvents(rows)
	if err != nil {
		return nil, s.failEvent(ctx, "Events", "", err)
	}
	return got, nil
}

// scanEvents reads rows of (seq, key, at, node, actor, action, target,
// note, before, after).
func scanEvents(rows pgx.Rows) ([]taskstate.Event, error) {
	var out []taskstate.Event
	for rows.Next() {
		var e taskstate.Event
		var at int64
		if err := rows.Scan(&e.Seq, &e.Key, &at, &e.Node, &e.Actor, &e.Action, &e.Target, &e.Note, &e.Before, &e.After); err != nil {
			rows.Close()
			return nil, err
		}
		e.At = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// failEvent wraps a trail call's error with ErrDatabase and the event's
// Key.
func (s *Store) failEvent(ctx context.Context, op, key string, err error) error {
	if key == "" {
		return fmt.Errorf("%w: %s: %w", ErrDatabase, op, withContext(ctx, err))
	}
	return fmt.Errorf("%w: %s of event %q: %w", ErrDatabase, op, key, withContext(ctx, err))
}

// placeholderOf is what the row of the placeholder that the take of r's
// request, retry or backfill instant added contains (store_take.sql,
// TakeRetry and TakeBackfill write it).
type placeholderOf struct {
	FireNano int64  `json:"fire_ns"`
	Node     string `json:"node"`
	Outcome  string `json:"outcome"`
	Attempt  int    `json:"attempt,omitempty"`  // a retry's
	Manual   bool   `json:"manual,omitempty"`   // a request's, or a retry's of a manual run
	Backfill bool   `json:"backfill,omitempty"` // a backfill instant's
}

// retryRow is a retry as the record function reads it (store_retry.sql).
type retryRow struct {
	Fire    int64 `json:"fire"`
	Attempt int   `json:"attempt"`
	Due     int64 `json:"due"`
	Manual  bool  `json:"manual"`
}

// storedRun is a run as the table keeps it: a Run's JSON and the ID it was
// recorded with (last, so that the record statement finds it at the end of
// the text without parsing it), or a placeholder, whose instant is
// FireNano.
type storedRun struct {
	taskstate.Run
	FireNano *int64 `json:"fire_ns,omitempty"`
	ID       string `json:"id,omitempty"`
}

// storeFunctionsSQL makes the record statement and the retry statement a
// function, and the function that calls it for each run of a Record, so
// that one statement records them all, and the start function of
// StartBackfill of its body startBackfill. (The functions of five and six
// arguments that earlier versions made, and the record function of one
// history length for every run, are left in place, unused by this one.)
func storeFunctionsSQL(record, retry, startBackfill string) string {
	return `CREATE OR REPLACE FUNCTION $RECORD1(text, text, text, bigint, text, text, text) RETURNS void LANGUAGE plpgsql AS $ndigo$
BEGIN
` + strings.TrimSpace(record) + `;
	IF $7 IS NOT NULL THEN
		` + strings.ReplaceAll(strings.TrimSpace(retry), "$3::jsonb", "$7::jsonb") + `;
	END IF;
END
$ndigo$;
CREATE OR REPLACE FUNCTION $RECORD(text, text[], text[], bigint[], text[], text[], text[]) RETURNS void LANGUAGE plpgsql AS $ndigo$
BEGIN
	-- The record of a run with an ID reads whether it is kept, then adds it:
	-- a resend that overlaps its first attempt (whose context ended while
	-- the statement ran on) waits for it, and sees its run. The locks are
	-- taken in one order, so that two calls never wait for each other.
	IF cardinality(array_remove($6, NULL)) > 0 THEN
		PERFORM pg_advisory_xact_lock($HISTORYLOCK, k) FROM (
			SELECT DISTINCT hashtext($1 || chr(1) || t) AS k FROM unnest($2) AS t ORDER BY 1
		) AS keys;
	END IF;
	FOR i IN 1 .. coalesce(array_length($2, 1), 0) LOOP
		PERFORM $RECORD1($1, $2[i], $3[i], $4[i], $5[i], $6[i], $7[i]);
	END LOOP;
END
$ndigo$;
CREATE OR REPLACE FUNCTION $STARTBACKFILL(text, text, jsonb, bigint[]) RETURNS text LANGUAGE plpgsql AS $ndigo$
` + strings.TrimSpace(startBackfill) + `
$ndigo$;
`
}

// Record adds the runs, each in place of its placeholder if it is manual, a
// retry or a backfill's, in one statement: a function that CreateSchema creates runs the record
// statement for each (in one transaction). On tables that CreateSchema of
// an earlier version made, without that function, it sends the record
// statement once per run until CreateSchema runs again. A run with an ID
// ends its JSON with it, and a run whose ID a kept row of its task ends
// with (a resend) is not added again.
func (s *Store) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	if err := taskstate.CheckRecord(ctx, runs); err != nil || len(runs) == 0 {
		return err
	}
	tasks, texts, keeps := make([]string, len(runs)), make([]string, len(runs)), make([]int64, len(runs))
	replaced, ids, retries := make([]*string, len(runs)), make([]*string, len(runs)), make([]*string, len(runs))
	for i, tr := range runs {
		r := tr.Run
		r.Fire, r.Error = r.Fire.UTC(), taskstate.CutError(r.Error) // a backfill's take finds it by its instant's text
		b, err := json.Marshal(storedRun{Run: r, ID: tr.ID})
		if err != nil {
			return fmt.Errorf("pglocks: Record of task %q: %w", tr.Task, err)
		}
		tasks[i], texts[i], keeps[i] = tr.Task, string(b), int64(taskstate.KeepOf(s.history, tr.Keep))
		if tr.ID != "" {
			id, _ := json.Marshal(tr.ID) // a string always encodes
			suffix := `,"id":` + string(id) + `}`
			ids[i] = &suffix
		}
		if r.Manual || r.Attempt >= 1 || r.Backfill {
			p := placeholderOf{FireNano: r.Fire.UnixNano(), Node: r.Node, Outcome: taskstate.OutcomeTaken, Manual: r.Manual, Backfill: r.Backfill}
			if r.Attempt >= 1 {
				p.Attempt = r.Attempt
			}
			b, err := json.Marshal(p)
			if err != nil {
				return fmt.Errorf("pglocks: Record of task %q: %w", tr.Task, err)
			}
			ps := string(b)
			replaced[i] = &ps
		}
		if rt := tr.Retry; rt != nil {
			b, err := json.Marshal(retryRow{Fire: rt.Fire.UnixNano(), Attempt: rt.Attempt, Due: rt.Due.UnixNano(), Manual: rt.Manual})
			if err != nil {
				return fmt.Errorf("pglocks: Record of task %q: %w", tr.Task, err)
			}
			rs := string(b)
			retries[i] = &rs
		}
	}
	_, err := s.pool.Exec(ctx, s.sql.records, pgx.QueryExecModeExec, s.ns, tasks, texts, keeps, replaced, ids, retries)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42883" { // undefined_function
		for i := range runs {
			if _, err := s.pool.Exec(ctx, s.sql.record, pgx.QueryExecModeExec, s.ns, tasks[i], texts[i], keeps[i], replaced[i], ids[i]); err != nil {
				return s.fail(ctx, "Record", tasks[i], err)
			}
			if retries[i] != nil {
				if _, err := s.pool.Exec(ctx, s.sql.retry, pgx.QueryExecModeExec, s.ns, tasks[i], *retries[i]); err != nil {
					return s.fail(ctx, "Record", tasks[i], err)
				}
			}
		}
		return nil
	}
	if err != nil {
		return s.fail(ctx, "Record", tasks[0], err)
	}
	return nil
}

// backfillRow is a backfill as its row's JSON has it (store_schema.sql):
// First, Last, Cursor and Created are its instants in Unix nanoseconds, a
// zero Cursor or Created NULL.
type backfillRow struct {
	ID      string `json:"id"`
	First   int64  `json:"first"`
	Last    int64  `json:"last"`
	Force   bool   `json:"force"`
	Overlap string `json:"overlap"`
	Total   int    `json:"total"`
	Cursor  *int64 `json:"cursor"`
	Taken   int    `json:"taken"`
	Refused int    `json:"refused"`
	State   string `json:"state"`
	Node    string `json:"node"`
	Created *int64 `json:"created"`
}

// backfill returns r as task's Backfill.
func (r backfillRow) backfill(task string) taskstate.Backfill {
	instant := func(n *int64) time.Time {
		if n == nil {
			return time.Time{}
		}
		return time.Unix(0, *n).UTC()
	}
	return taskstate.Backfill{ID: r.ID, Task: task, From: time.Unix(0, r.First).UTC(), To: time.Unix(0, r.Last).UTC(), Force: r.Force,
		Overlap: r.Overlap, Total: r.Total, Cursor: instant(r.Cursor), Taken: r.Taken, Refused: r.Refused, State: r.State, Node: r.Node, Created: instant(r.Created)}
}

// StartBackfill makes b task's running backfill unless one is running and
// adds the instants that ran, in one call of a function that CreateSchema
// creates (store_startbackfill.sql).
func (s *Store) StartBackfill(ctx context.Context, b taskstate.Backfill, ran []time.Time) error {
	if err := taskstate.CheckStartBackfill(ctx, b); err != nil {
		return err
	}
	row := backfillRow{ID: b.ID, First: b.From.UnixNano(), Last: b.To.UnixNano(), Force: b.Force, Overlap: b.Overlap,
		Total: b.Total, State: taskstate.BackfillRunning, Node: b.Node}
	if !b.Created.IsZero() {
		row.Created = new(b.Created.UnixNano())
	}
	text, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("pglocks: StartBackfill of task %q: %w", b.Task, err)
	}
	fires := make([]int64, len(ran))
	for i, at := range ran {
		fires[i] = at.UnixNano()
	}
	var running *string
	if err := s.pool.QueryRow(ctx, s.sql.startBackfill, pgx.QueryExecModeExec, s.ns, b.Task, string(text), fires).Scan(&running); err != nil {
		return s.fail(ctx, "StartBackfill", b.Task, err)
	}
	if running == nil {
		return nil
	}
	var r backfillRow
	if err := json.Unmarshal([]byte(*running), &r); err != nil {
		return s.fail(ctx, "StartBackfill", b.Task, err)
	}
	if r.ID == b.ID { // this call's backfill, which a call before it started
		return nil
	}
	p := r.backfill(b.Task)
	return fmt.Errorf("%w: task %q: backfill %s of [%v, %v] is running (%d of %d instants taken)",
		taskstate.ErrBackfillRunning, b.Task, p.ID, p.From, p.To, p.Taken+p.Refused, p.Total)
}

// TakeBackfill takes or refuses instant fire of task's backfill id, and
// adds node's placeholder run if it takes it, in one statement.
func (s *Store) TakeBackfill(ctx context.Context, task, id, node string, fire time.Time) (taskstate.BackfillTake, error) {
	if err := taskstate.CheckTakeBackfill(ctx, task, id, node, fire); err != nil {
		return taskstate.BackfillStale, err
	}
	p, err := json.Marshal(placeholderOf{FireNano: fire.UnixNano(), Node: node, Outcome: taskstate.OutcomeTaken, Backfill: true})
	if err != nil {
		return taskstate.BackfillStale, fmt.Errorf("pglocks: TakeBackfill of task %q: %w", task, err)
	}
	taken := fmt.Sprintf(`{"fire_ns": %d, "outcome": %q}`, fire.UnixNano(), taskstate.OutcomeTaken)
	var refused bool
	err = s.pool.QueryRow(ctx, s.sql.takeBackfill, pgx.QueryExecModeExec, s.ns, task, id, fire.UnixNano(), string(p),
		taskstate.RunJSONPrefix(fire), taken, s.history).Scan(&refused)
	switch {
	case err == nil && refused:
		return taskstate.BackfillRefused, nil
	case err == nil:
		return taskstate.BackfillTaken, nil
	case errors.Is(err, pgx.ErrNoRows):
		return taskstate.BackfillStale, nil
	}
	return taskstate.BackfillStale, s.fail(ctx, "TakeBackfill", task, err)
}

// EndBackfill ends task's running backfill id, in one statement.
func (s *Store) EndBackfill(ctx context.Context, task, id, state string) (bool, error) {
	if err := taskstate.CheckEndBackfill(ctx, task, id, state); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, s.sql.endBackfill, pgx.QueryExecModeExec, s.ns, task, id, state)
	if err != nil {
		return false, s.fail(ctx, "EndBackfill", task, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Runs returns task's newest runs, newest first, reading only those. A run
// that does not decode (written by another version) is left out.
func (s *Store) Runs(ctx context.Context, task string, limit int) ([]taskstate.Run, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return nil, err
	}
	if err := taskstate.CheckLimit(limit); err != nil {
		return nil, err
	}
	n := int64(limit)
	if n == 0 {
		n = math.MaxInt64 // every kept run: the history length, or TaskRun.Keep, plus a few
	}
	rows, err := s.pool.Query(ctx, s.sql.runs, pgx.QueryExecModeExec, s.ns, task, n)
	if err != nil {
		return nil, s.fail(ctx, "Runs", task, err)
	}
	out := []taskstate.Run{}
	var v string
	_, err = pgx.ForEachRow(rows, []any{&v}, func() error {
		var r storedRun
		if json.Unmarshal([]byte(v), &r) != nil {
			return nil
		}
		if r.FireNano != nil {
			r.Fire = time.Unix(0, *r.FireNano).UTC()
		}
		out = append(out, r.Run)
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "Runs", task, err)
	}
	return out, nil
}

type moduleStoreParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Pool      *pgxpool.Pool
	Config    ModuleConfig
}

// newModuleStore builds [Module]'s task state store on its pool, and
// creates its tables on start, after the pool's ping.
func newModuleStore(p moduleStoreParams) (taskstate.Store, error) {
	s, err := NewStore(StoreOptions{Pool: p.Pool, Namespace: p.Config.Namespace, History: p.Config.History})
	if err != nil {
		return nil, fmt.Errorf("pglocks.Module: %w", err)
	}
	p.Lifecycle.Append(fx.StartHook(func(ctx context.Context) error {
		if err := s.CreateSchema(ctx); err != nil {
			return fmt.Errorf("pglocks.Module: %w", err)
		}
		return nil
	}))
	return s, nil
}

// History returns how many runs per task the store keeps
// (taskstate.HistoryKeeper).
func (s *Store) History() int { return s.history }
