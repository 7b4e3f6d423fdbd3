package pglocks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
)

// TestStorePauseNotesOnAnEarlierSchema: the paused table of the version
// before the pauses' notes (ns and task alone), with a task paused in it,
// gets the note, who and at columns from CreateSchema, and the resumes'
// table: the task stays paused, without note; a second CreateSchema
// changes nothing. The earlier version's statements, run by a node not yet
// upgraded, read and set the same flags as this version's.
func TestStorePauseNotesOnAnEarlierSchema(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	schema := newSchema(t, p, "earlier_pauses")
	// The earlier version's paused table and statements.
	earlier := strings.NewReplacer("$PAUSED", schema+".tasks_paused", "$PAUSES", schema+".tasks_pauses")
	if _, err := p.Exec(ctx, earlier.Replace(`CREATE TABLE $PAUSED (
		ns   text NOT NULL,
		task text NOT NULL,
		PRIMARY KEY (ns, task)
	); CREATE SEQUENCE $PAUSES`)); err != nil {
		t.Fatal(err)
	}
	oldPause := earlier.Replace(`WITH g AS (SELECT nextval('$PAUSES'))
		INSERT INTO $PAUSED (ns, task) SELECT $1::text, $2::text FROM g ON CONFLICT DO NOTHING`)
	oldResume := earlier.Replace(`WITH g AS (SELECT nextval('$PAUSES'))
		DELETE FROM $PAUSED WHERE ns = $1::text AND task = $2::text AND EXISTS (SELECT 1 FROM g)`)
	oldPaused := func(task string) bool {
		t.Helper()
		var paused bool
		if err := p.QueryRow(ctx, earlier.Replace(`SELECT EXISTS (SELECT 1 FROM $PAUSED WHERE ns = $1::text AND task = $2::text)`),
			"earlier", task).Scan(&paused); err != nil {
			t.Fatal(err)
		}
		return paused
	}
	old := func(q, task string) {
		t.Helper()
		if _, err := p.Exec(ctx, q, "earlier", task); err != nil {
			t.Fatalf("the earlier version's statement on the migrated table: %v", err)
		}
	}
	old(oldPause, "Payroll.Close")

	s, err := pglocks.NewStore(pglocks.StoreOptions{Pool: p, Namespace: "earlier", Table: schema + ".tasks"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.CreateSchema(ctx); err != nil {
			t.Fatalf("CreateSchema on the earlier paused table: %v", err)
		}
		wantStorePause(t, s, "Payroll.Close", taskstate.Pause{Paused: true})
	}

	at := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	resumed := taskstate.Pause{Note: "the bank's file came", By: "cli", At: at}
	if err := s.SetPaused(ctx, "Payroll.Close", resumed); err != nil {
		t.Fatal(err)
	}
	wantStorePause(t, s, "Payroll.Close", resumed)
	if oldPaused("Payroll.Close") {
		t.Fatal("the earlier version reads a resumed task as paused")
	}
	old(oldPause, "Payroll.Close") // a node not yet upgraded pauses it: no note
	wantStorePause(t, s, "Payroll.Close", taskstate.Pause{Paused: true})

	paused := taskstate.Pause{Paused: true, Note: "late again", By: "ops", At: at.Add(time.Hour)}
	if err := s.SetPaused(ctx, "Payroll.Close", paused); err != nil {
		t.Fatal(err)
	}
	wantStorePause(t, s, "Payroll.Close", paused)
	if !oldPaused("Payroll.Close") {
		t.Fatal("the earlier version reads a paused task as not paused")
	}
	old(oldResume, "Payroll.Close") // and resumes it: no note
	wantStorePause(t, s, "Payroll.Close", taskstate.Pause{})
}

// wantStorePause checks that s's Paused of task is w.
func wantStorePause(t *testing.T, s *pglocks.Store, task string, w taskstate.Pause) {
	t.Helper()
	if got, err := s.Paused(context.Background(), task); err != nil || got != w {
		t.Fatalf("Paused(%q) = %+v, %v; want %+v", task, got, err, w)
	}
}
