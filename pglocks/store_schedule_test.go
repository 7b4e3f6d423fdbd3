package pglocks_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/taskstate"
)

// TestStoreSchedulesOnAnEarlierSchema: the tables of a version before the
// stored schedules (no ndigo_tasks_schedules, no ndigo_tasks_generations)
// get them from CreateSchema, with their state kept, and a second
// CreateSchema keeps the schedules.
func TestStoreSchedulesOnAnEarlierSchema(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	opts, _ := earlierStore(t, p, "earlier_schedules", "_schedules", "_generations")

	s, _ := pglocks.NewStore(opts)
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema on the earlier tables: %v", err)
	}
	sc := taskstate.Schedule{Name: "Report.acme", Handler: "tenant-report", Cron: "0 2 * * *"}
	if err := s.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	if got, err := s.Schedules(ctx); err != nil || len(got) != 1 || got[0].Name != sc.Name {
		t.Fatalf("Schedules = %+v, %v; want the one created", got, err)
	}
	if p, err := s.Poll(ctx); err != nil || p.Schedules != 1 {
		t.Fatalf("Poll = %+v, %v; want Schedules 1", p, err)
	}
	if got, err := s.Paused(ctx, "Payroll.Close"); err != nil || !got.Paused {
		t.Fatalf("Paused = %+v, %v; want the flag set before the migration", got, err)
	}
}

// Schedules are ordered by name as Go orders strings, whatever the
// collation of the names (here ICU's root locale, where "b" comes before
// "B" and "Z"); of the nodes racing to create one name, one does, and of
// those racing to delete it, one does, each moving the generation once; an
// update moves it if it changes the schedule's bytes; a namespace's
// schedules and generation are its own.
func TestStoreSchedulesOrderAndRaces(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	schema := newSchema(t, p, "schedules_order")
	opts := pglocks.StoreOptions{Pool: p, Namespace: "ordered", Table: schema + ".tasks"}
	s, _ := pglocks.NewStore(opts)
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, "ALTER TABLE "+schema+`.tasks_schedules ALTER COLUMN name TYPE text COLLATE "und-x-icu"`); err != nil {
		t.Fatal(err)
	}
	opts.Namespace = "other"
	other, _ := pglocks.NewStore(opts)
	names := []string{"b", "B", "_x", "a-1", "a1", "é", "Z"}
	for _, name := range names {
		if err := s.CreateSchedule(ctx, taskstate.Schedule{Name: name, Handler: "h", Cron: "@daily"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, sc := range got {
		order = append(order, sc.Name)
	}
	if want := slices.Sorted(slices.Values(names)); !slices.Equal(order, want) {
		t.Fatalf("Schedules in order %q, want %q", order, want)
	}

	race := func(call func() (bool, error)) (won int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 8 {
			wg.Go(func() {
				ok, err := call()
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if ok {
					won++
				}
			})
		}
		wg.Wait()
		return won
	}
	generation := func() int64 {
		t.Helper()
		poll, err := s.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return poll.Schedules
	}
	want := generation() // moved on by each change below
	wantGen := func(after string) {
		t.Helper()
		if got := generation(); got != want {
			t.Fatalf("generation %d after %s, want %d", got, after, want)
		}
	}
	sc := taskstate.Schedule{Name: "raced", Handler: "h", Cron: "@daily"}
	created := race(func() (bool, error) {
		err := s.CreateSchedule(ctx, sc)
		if errors.Is(err, taskstate.ErrScheduleExists) {
			return false, nil
		}
		return err == nil, err
	})
	if created != 1 {
		t.Fatalf("%d of 8 racing creates succeeded, want 1", created)
	}
	want++
	wantGen("8 racing creates of one name")
	for _, cron := range []string{"@daily", "@hourly"} { // the same bytes, then others
		if err := s.UpdateSchedule(ctx, taskstate.Schedule{Name: sc.Name, Handler: "h", Cron: cron}); err != nil {
			t.Fatal(err)
		}
		if cron != sc.Cron {
			want++
		}
		wantGen("an update to " + cron + " of a schedule of " + sc.Cron)
	}
	if deleted := race(func() (bool, error) { return s.DeleteSchedule(ctx, sc.Name) }); deleted != 1 {
		t.Fatalf("%d of 8 racing deletes succeeded, want 1", deleted)
	}
	want++
	wantGen("8 racing deletes of one name")
	if got, err := other.Schedules(ctx); err != nil || len(got) != 0 {
		t.Fatalf("another namespace's Schedules = %+v, %v; want none", got, err)
	}
	if poll, err := other.Poll(ctx); err != nil || poll.Schedules != 0 {
		t.Fatalf("another namespace's Poll = %+v, %v; want Schedules 0", poll, err)
	}
}
