package pglocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
)

// TestStoreTrailOnAnEarlierSchema: the tables of a version before the
// trail (no ndigo_tasks_events, ndigo_tasks_eventseq) get them from
// CreateSchema, with their state kept; a second CreateSchema keeps the
// trail, and its Seqs go on.
func TestStoreTrailOnAnEarlierSchema(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	opts, _ := earlierStore(t, p, "earlier_trail", "_events", "_eventseq")

	s, _ := pglocks.NewStore(opts)
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema on the earlier tables: %v", err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	e := taskstate.Event{Key: "k1", At: at, Actor: "alice", Action: "pause", Target: "Payroll.Close"}
	first, err := s.AppendEvent(ctx, e)
	if err != nil || first.Seq != 1 {
		t.Fatalf("AppendEvent = %+v, %v; want Seq 1", first, err)
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	e.Key = "k2"
	if second, err := s.AppendEvent(ctx, e); err != nil || second.Seq != 2 {
		t.Fatalf("AppendEvent after a second CreateSchema = %+v, %v; want Seq 2", second, err)
	}
	if got, err := s.Events(ctx, 0, 10); err != nil || len(got) != 2 || got[0].Key != "k1" || got[1].Key != "k2" {
		t.Fatalf("Events = %+v, %v; want k1 and k2", got, err)
	}
	if paused, err := s.Paused(ctx, "Payroll.Close"); err != nil || !paused.Paused {
		t.Fatalf("Paused = %v, %v; want the flag set before the migration", paused, err)
	}
}

// TestStoreTrailNamespacesIsolate: a namespace reads its own trail, with
// its own Seqs, and holds its own Keys.
func TestStoreTrailNamespacesIsolate(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	a, b := newStore(t, p, unique("trail-a"), 0), newStore(t, p, unique("trail-b"), 0)
	e := taskstate.Event{Key: "same", At: time.Unix(1, 0), Action: "run", Target: "Payroll.Close"}
	for _, st := range []*pglocks.Store{a, b, a} {
		if got, err := st.AppendEvent(ctx, e); err != nil || got.Seq != 1 {
			t.Fatalf("AppendEvent of Key %q = %+v, %v; want Seq 1 in each namespace", e.Key, got, err)
		}
	}
	e.Key = "other"
	if got, err := b.AppendEvent(ctx, e); err != nil || got.Seq != 2 {
		t.Fatalf("AppendEvent = %+v, %v; want Seq 2", got, err)
	}
	if got, err := a.Events(ctx, 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("Events of the first namespace = %+v, %v; want its one entry", got, err)
	}
}

// TestStoreTrailCommitOrder: an append whose transaction has not committed
// holds back the appends after it, so that no reader sees a Seq above one
// not yet committed (which a tailing reader, reading after the Seq it saw,
// would then miss): the counter row's lock orders the commits as a
// sequence's numbers would not.
func TestStoreTrailCommitOrder(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	ns := unique("trail-order")
	s := newStore(t, p, ns, 0)
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var first int64
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := tx.QueryRow(ctx, pglocks.AppendEventSQL(s), pgx.QueryExecModeExec, ns, "first", at.UnixNano(), "node-a", "alice", "pause",
		"Payroll.Close", "", "", "", 100).Scan(&first, new(string), new(int64), new(string), new(string), new(string), new(string),
		new(string), new(string), new(string)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		e   taskstate.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := s.AppendEvent(ctx, taskstate.Event{Key: "second", At: at, Actor: "bob", Action: "resume", Target: "Payroll.Close"})
		done <- result{e, err}
	}()
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		got, err := s.Events(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			t.Fatalf("while the append of Seq %d had not committed, a reader saw %+v: a reader tailing after it would miss Seq %d", first, got, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("an append returned %+v, %v while the one before it had not committed; want it held back until that commit", r.e, r.err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.e.Seq <= first {
		t.Fatalf("the append held back = %+v, %v; want a Seq above %d", r.e, r.err, first)
	}
	if got, err := s.Events(ctx, 0, 10); err != nil || len(got) != 2 || got[0].Seq != first || got[1].Seq != r.e.Seq {
		t.Fatalf("Events = %+v, %v; want Seq %d then %d", got, err, first, r.e.Seq)
	}
}
