package pglocks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/internal/pgfault"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

func newStore(t *testing.T, p *pgxpool.Pool, ns string, history int) *pglocks.Store {
	t.Helper()
	s, err := pglocks.NewStore(pglocks.StoreOptions{Pool: p, Namespace: ns, History: history, Trail: taskstatetest.Trail})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// lossyStores returns a factory of two stores in a new namespace named
// after ns, as two nodes have: A on a pool of its own on url, whose
// connections lose the replies the suite asks (internal/pgfault), B on p.
// pgx does not resend a statement whose reply was lost: A's call fails.
func lossyStores(url string, p *pgxpool.Pool, prefix string) taskstatetest.NewStores {
	return func(t *testing.T, history int) taskstatetest.Stores {
		ns := unique(prefix)
		d := &pgfault.Dialer{}
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DialFunc = d.DialContext
		a, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		return taskstatetest.Stores{A: newStore(t, a, ns, history), B: newStore(t, p, ns, history),
			Loss: taskstatetest.Failed, LoseNextReply: d.LoseNextReply, Trail: taskstatetest.Trail,
			Leaks: func(t *testing.T) error { return storeLeaks(context.Background(), p, ns, history) }}
	}
}

// racers is how many calls of the conformance suite race on one task at
// most: the Store's bound on a task's runs is its history (or a record's
// TaskRun.Keep, up to taskstate.MaxHistory) plus one per concurrent writer.
const racers = 8

// storeLeaks returns an error naming the tasks of namespace ns (in the
// default tables) that keep more runs than the Store's bound: history
// (0: taskstate.DefaultHistory), or taskstate.MaxHistory if more (a
// record's TaskRun.Keep), plus one per concurrent writer, racers of them
// at most; and more entries of the trail than the stores keep
// (taskstatetest.Trail), plus one per concurrent appender (whose entries an
// append's trim may not see yet: the next one trims them).
func storeLeaks(ctx context.Context, p *pgxpool.Pool, ns string, history int) error {
	if history == 0 {
		history = taskstate.DefaultHistory
	}
	// Unprepared, as the store's statements: it works through PgBouncer in
	// transaction mode too.
	rows, err := p.Query(ctx, `SELECT task, count(*) FROM ndigo_tasks_runs WHERE ns = $1 GROUP BY task HAVING count(*) > $2 ORDER BY task`,
		pgx.QueryExecModeExec, ns, max(history, taskstate.MaxHistory)+racers)
	if err != nil {
		return err
	}
	var over []string
	for rows.Next() {
		var task string
		var n int
		if err := rows.Scan(&task, &n); err != nil {
			return err
		}
		over = append(over, fmt.Sprintf("%q: %d runs", task, n))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var events int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM ndigo_tasks_events WHERE ns = $1`, pgx.QueryExecModeExec, ns).Scan(&events); err != nil {
		return err
	}
	if events > taskstatetest.Trail+racers {
		return fmt.Errorf("the trail of namespace %q holds %d entries, over the bound of %d (Trail %d, %d racing appenders)",
			ns, events, taskstatetest.Trail+racers, taskstatetest.Trail, racers)
	}
	if len(over) > 0 {
		return fmt.Errorf("tasks of namespace %q over the bound of %d runs (history %d, taskstate.MaxHistory %d, %d racing writers): %s",
			ns, max(history, taskstate.MaxHistory)+racers, history, taskstate.MaxHistory, racers, strings.Join(over, ", "))
	}
	return nil
}

func TestStoreConformance(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	taskstatetest.Run(t, lossyStores(shared.URL(), p, "conformance"))
}

// The paused flag and the history are in the database: a store made later
// reads them, and another namespace does not.
func TestStoreStateOutlivesNodesAndStaysInItsNamespace(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	ns := unique("prod")
	first := newStore(t, p, ns, 0)
	pause := taskstate.Pause{Paused: true, Note: "bank file late", By: "cli", At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	if err := first.SetPaused(ctx, "Payroll.Close", pause); err != nil {
		t.Fatal(err)
	}
	if err := first.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Node: "a", Token: 7, Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	later := newStore(t, p, ns, 0)
	if got, err := later.Paused(ctx, "Payroll.Close"); err != nil || got != pause {
		t.Errorf("a new store's Paused = %+v, %v; want %+v", got, err, pause)
	}
	if runs, err := later.Runs(ctx, "Payroll.Close", 0); err != nil || len(runs) != 1 || runs[0].Token != 7 {
		t.Errorf("a new store's Runs = %+v, %v; want the recorded run", runs, err)
	}
	other := newStore(t, p, unique("staging"), 0)
	if got, err := other.Paused(ctx, "Payroll.Close"); err != nil || got != (taskstate.Pause{}) {
		t.Errorf("another namespace's Paused = %+v, %v; want the zero Pause", got, err)
	}
}

func TestNewStoreRejectsBadOptions(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	for name, o := range map[string]pglocks.StoreOptions{
		"no pool":       {Namespace: "prod"},
		"bad namespace": {Pool: p, Namespace: "a:b"},
		"bad table":     {Pool: p, Namespace: "prod", Table: "tasks;drop"},
		"history < 0":   {Pool: p, Namespace: "prod", History: -1},
	} {
		if _, err := pglocks.NewStore(o); !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("%s: err = %v, want taskstate.ErrInvalid", name, err)
		}
	}
}

// The module replaces the default task state (taskstate.Module) app-wide
// with a Store in its database and namespace, its tables made on start.
func TestModuleOverridesDefaultStore(t *testing.T) {
	ns := unique("module")
	var st taskstate.Store
	var p *pgxpool.Pool
	app := fxtest.New(t, locks.Module, taskstate.Module, moduleConfig(shared.URL(), ns), pglocks.Module,
		fx.Module("consumer", fx.Populate(&st)), fx.Populate(&p))
	app.RequireStart()
	defer app.RequireStop()
	if _, ok := st.(*pglocks.Store); !ok {
		t.Fatalf("store %T, want *pglocks.Store", st)
	}
	ctx := context.Background()
	if err := st.SetPaused(ctx, "Payroll.Close", taskstate.Pause{Paused: true}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.QueryRow(ctx, "SELECT count(*) FROM ndigo_tasks_paused WHERE ns = $1", ns).Scan(&n); err != nil || n != 1 {
		t.Fatalf("paused rows: %d, %v; want 1", n, err)
	}
}

// A row that is not JSON (written by hand) is left out of Runs and does not
// fail the record of a manual run, which looks among the rows for its
// placeholder.
func TestStoreRunRowNotJSON(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	ns := unique("garbled")
	s := newStore(t, p, ns, 0)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := s.RequestRun(ctx, "Payroll.Close", at); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.TakeRequest(ctx, "Payroll.Close", "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true", ok, err)
	}
	// Newer than the placeholder: the record's search meets it first.
	if _, err := p.Exec(ctx, "INSERT INTO ndigo_tasks_runs (ns, task, run) VALUES ($1, 'Payroll.Close', 'not json {')", ns); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 4, Outcome: "ok"}}); err != nil {
		t.Fatalf("Record of a manual run beside a row that is not JSON: %v", err)
	}
	runs, err := s.Runs(ctx, "Payroll.Close", 0)
	if err != nil || len(runs) != 1 || runs[0].Token != 4 || runs[0].Outcome != "ok" {
		t.Fatalf("Runs = %+v, %v; want the manual run alone, in place of its placeholder", runs, err)
	}
}

// TestStoreRecordOnAnEarlierSchema: on tables whose CreateSchema predates
// the record function of a history length per run (a node of this version
// started before the schema was upgraded), Record still records every run
// of the call, one statement each.
func TestStoreRecordOnAnEarlierSchema(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	schema := newSchema(t, p, "earlier_store")
	s, err := pglocks.NewStore(pglocks.StoreOptions{Pool: p, Namespace: "earlier", Table: schema + ".tasks"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "DROP FUNCTION "+schema+".tasks_record(text, text[], text[], bigint[], text[], text[], text[])"); err != nil {
		t.Fatal(err)
	}
	fire := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	retry := taskstate.Retry{Fire: fire, Attempt: 2, Due: fire.Add(time.Minute)}
	if err := s.Record(ctx, taskstate.TaskRun{Task: "a", Run: taskstate.Run{Token: 1, Outcome: "ok"}},
		taskstate.TaskRun{Task: "b", Run: taskstate.Run{Token: 2, Outcome: "error"}, Retry: &retry}); err != nil {
		t.Fatalf("Record without the function: %v", err)
	}
	if p, err := s.Poll(ctx); err != nil || !p.Retries["b"].Due.Equal(retry.Due) {
		t.Fatalf("Poll = %+v, %v; want b's retry %+v pending", p, err, retry)
	}
	for task, token := range map[string]uint64{"a": 1, "b": 2} {
		if runs, err := s.Runs(ctx, task, 0); err != nil || len(runs) != 1 || runs[0].Token != token {
			t.Fatalf("Runs(%q) = %+v, %v; want the run of token %d", task, runs, err, token)
		}
	}
}
