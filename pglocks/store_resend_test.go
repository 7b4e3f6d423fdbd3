package pglocks_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/taskstate"
)

// A Record sent again while its first attempt's transaction is still open
// (the caller's context ended, the statement ran on) waits for it, then
// finds the run it committed and adds nothing: the record function's
// advisory lock orders the two, where each alone, in READ COMMITTED, would
// not see the other's row and both would insert it.
func TestStoreRecordResentWaitsForItsFirstAttempt(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	ns := unique("overlap")
	s := newStore(t, p, ns, 0)
	rec := taskstate.TaskRun{Task: "Payroll.Close", ID: "node-a.1", Run: taskstate.Run{Node: "node-a", Token: 7, Outcome: "ok"}}
	text, err := json.Marshal(struct {
		taskstate.Run
		ID string `json:"id"`
	}{rec.Run, rec.ID})
	if err != nil {
		t.Fatal(err)
	}
	suffix := `,"id":"node-a.1"}`

	// The first attempt: the record function in a transaction left open.
	first, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if _, err := first.Exec(ctx, `SELECT ndigo_tasks_record($1::text, $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])`,
		ns, []string{rec.Task}, []string{string(text)}, []int64{taskstate.DefaultHistory}, []*string{nil}, []string{suffix}, []*string{nil}); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := first.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Record(ctx, rec) }()
	// The resend must wait for the first attempt's lock: it shows in
	// pg_locks as an advisory lock not granted, blocked by that backend.
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("Record sent again returned (%v) while its first attempt's transaction was open: it did not wait for it", err)
		default:
		}
		err := p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND $1 = ANY (pg_blocking_pids(l.pid)))`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if !waiting {
			time.Sleep(5 * time.Millisecond) // polls a condition; no margin rests on it
		}
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Record sent again: %v", err)
	}
	runs, err := s.Runs(ctx, rec.Task, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Token != 7 {
		t.Fatalf("Runs after the first attempt and its resend = %+v; want the run once", runs)
	}
}
