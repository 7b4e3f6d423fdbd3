package pglocks_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/pglocks"
)

// TestStoreTakeRunOnAnEarlierSchema: the tables of a version before the
// counted runs (no ndigo_tasks_runcounts) get them from CreateSchema, with
// their state kept; a second CreateSchema keeps the counts; a max past the
// count's column takes runs as any other.
func TestStoreTakeRunOnAnEarlierSchema(t *testing.T) {
	p := pgtest.Wrap(t, shared).Pool()
	ctx := context.Background()
	opts, earlier := earlierStore(t, p, "earlier_runcounts", "_runcounts")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := earlier.RequestRun(ctx, "Payroll.Close", at); err != nil {
		t.Fatal(err)
	}

	s, _ := pglocks.NewStore(opts)
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema on the earlier tables: %v", err)
	}
	for i, want := range []int{1, 2, 0} {
		if n, err := s.TakeRun(ctx, "Payroll.Close", at.Add(time.Duration(i)*time.Minute), 2); err != nil || n != want {
			t.Fatalf("TakeRun %d = %d, %v; want %d, nil", i, n, err, want)
		}
	}
	if err := s.CreateSchema(ctx); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	if n, err := s.TakeRun(ctx, "Payroll.Close", at.Add(3*time.Minute), math.MaxInt); err != nil || n != 3 {
		t.Fatalf("TakeRun of max math.MaxInt = %d, %v; want 3, nil", n, err)
	}
	got, err := s.Poll(ctx)
	if err != nil || got.Runs["Payroll.Close"] != 3 || !got.Requests["Payroll.Close"].Equal(at) {
		t.Fatalf("Poll = %+v, %v; want Runs 3 and the request made before the migration", got, err)
	}
	if paused, err := s.Paused(ctx, "Payroll.Close"); err != nil || !paused.Paused {
		t.Fatalf("Paused = %v, %v; want the flag set before the migration", paused, err)
	}
}
