package taskstatetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// backfillOf returns a backfill of task over ten minutely instants.
func backfillOf(task, id string) taskstate.Backfill {
	from := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	return taskstate.Backfill{ID: id, Task: task, From: from, To: from.Add(9 * time.Minute), Total: 10, Node: "node-a", Overlap: "allow",
		Created: from.Add(24 * time.Hour)}
}

// backfillIn returns st's last backfill of task, from Poll.
func backfillIn(t *testing.T, st taskstate.Store, task string) (taskstate.Backfill, bool) {
	t.Helper()
	p, err := st.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, ok := p.Backfills[task]
	return b, ok
}

// wantBackfill fails t unless st's last backfill of task is want, field by
// field.
func wantBackfill(t *testing.T, st taskstate.Store, task string, want taskstate.Backfill) {
	t.Helper()
	got, ok := backfillIn(t, st, task)
	if !ok {
		t.Fatalf("Poll shows no backfill of %q; want %+v", task, want)
	}
	if got.ID != want.ID || got.Task != want.Task || !got.From.Equal(want.From) || !got.To.Equal(want.To) ||
		got.Force != want.Force || got.Overlap != want.Overlap || got.Total != want.Total || !got.Cursor.Equal(want.Cursor) || got.Taken != want.Taken ||
		got.Refused != want.Refused || got.State != want.State || got.Node != want.Node || !got.Created.Equal(want.Created) {
		t.Fatalf("backfill = %+v\nwant       %+v", got, want)
	}
}

func take(t *testing.T, st taskstate.Store, task, id, node string, fire time.Time, want taskstate.BackfillTake) {
	t.Helper()
	got, err := st.TakeBackfill(context.Background(), task, id, node, fire)
	if err != nil || got != want {
		t.Fatalf("TakeBackfill(%s, %v) by %s = %v, %v; want %v, nil", id, fire, node, got, err, want)
	}
}

// backfill: a started backfill polls as running; its instants are taken in
// order, once, each with its taker's placeholder, which the run's record
// replaces; an instant at or before the cursor is stale; one that ran
// (given at the start, or taken by an earlier backfill) is refused unless
// the backfill forces it; a second backfill waits for the first to end;
// an ended one takes nothing.
func (s *suite) backfill(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	bf := backfillOf(task, "b1")
	ran := bf.From.Add(2 * time.Minute) // ran before the backfill: in the history
	if err := a.StartBackfill(ctx, bf, []time.Time{ran}); err != nil {
		t.Fatal(err)
	}
	want := bf
	want.State = taskstate.BackfillRunning
	wantBackfill(t, b, task, want)
	if err := b.StartBackfill(ctx, bf, nil); err != nil {
		t.Fatalf("StartBackfill of the running backfill again (its call resent) = %v, want nil", err)
	}
	other := backfillOf(task, "b2")
	if err := b.StartBackfill(ctx, other, nil); !errors.Is(err, taskstate.ErrBackfillRunning) {
		t.Fatalf("StartBackfill while another runs = %v, want taskstate.ErrBackfillRunning", err)
	}

	first := bf.From
	take(t, a, task, "b1", "node-a", first, taskstate.BackfillTaken)
	take(t, b, task, "b1", "node-b", first, taskstate.BackfillStale)                  // taken
	take(t, b, task, "b2", "node-b", first.Add(time.Minute), taskstate.BackfillStale) // not the running one
	wantRuns(t, b, task, taskstate.BackfillPlaceholder(first, "node-a"))
	done := taskstate.Run{Fire: first, Backfill: true, Node: "node-a", Token: 9, Start: first.Add(time.Hour), Duration: time.Second, Outcome: "ok"}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: done}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, task, done)
	take(t, b, task, "b1", "node-b", first.Add(time.Minute), taskstate.BackfillTaken)
	take(t, a, task, "b1", "node-a", ran, taskstate.BackfillRefused)
	take(t, a, task, "b1", "node-a", ran, taskstate.BackfillStale)
	take(t, a, task, "b1", "node-a", ran.Add(-time.Minute), taskstate.BackfillStale) // behind the cursor
	want.Cursor, want.Taken, want.Refused = ran, 2, 1
	wantBackfill(t, a, task, want)
	wantRuns(t, a, task, taskstate.BackfillPlaceholder(first.Add(time.Minute), "node-b"), done)

	if ok, err := b.EndBackfill(ctx, task, "b2", taskstate.BackfillCancelled); err != nil || ok {
		t.Fatalf("EndBackfill of another backfill = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.EndBackfill(ctx, task, "b1", taskstate.BackfillCancelled); err != nil || !ok {
		t.Fatalf("EndBackfill = %v, %v; want true, nil", ok, err)
	}
	if ok, err := a.EndBackfill(ctx, task, "b1", taskstate.BackfillDone); err != nil || ok {
		t.Fatalf("EndBackfill of an ended backfill = %v, %v; want false, nil", ok, err)
	}
	take(t, a, task, "b1", "node-a", ran.Add(time.Minute), taskstate.BackfillStale)
	want.State = taskstate.BackfillCancelled
	wantBackfill(t, b, task, want)

	// The next backfill of the range refuses what ran; a forced one runs it.
	if err := b.StartBackfill(ctx, other, nil); err != nil {
		t.Fatal(err)
	}
	for i, w := range []taskstate.BackfillTake{taskstate.BackfillRefused, taskstate.BackfillRefused, taskstate.BackfillRefused,
		taskstate.BackfillTaken} {
		take(t, b, task, "b2", "node-b", first.Add(time.Duration(i)*time.Minute), w)
	}
	if ok, err := b.EndBackfill(ctx, task, "b2", taskstate.BackfillDone); err != nil || !ok {
		t.Fatalf("EndBackfill = %v, %v; want true, nil", ok, err)
	}
	forced := backfillOf(task, "b3")
	forced.Force = true
	if err := a.StartBackfill(ctx, forced, nil); err != nil {
		t.Fatal(err)
	}
	take(t, b, task, "b3", "node-b", ran, taskstate.BackfillTaken)
	want = forced
	want.State, want.Cursor, want.Taken = taskstate.BackfillRunning, ran, 1
	wantBackfill(t, a, task, want)
}

// takeBackfillOnce: of eight callers on two nodes racing for each instant,
// exactly one takes it.
func (s *suite) takeBackfillOnce(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	bf := backfillOf(task, "b1")
	if err := a.StartBackfill(ctx, bf, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		fire := bf.From.Add(time.Duration(i) * time.Minute)
		var wg sync.WaitGroup
		var took atomic.Int32
		for j := range 8 {
			st := a
			if j%2 == 1 {
				st = b
			}
			wg.Go(func() {
				got, err := st.TakeBackfill(ctx, task, "b1", fmt.Sprintf("node-%d", j), fire)
				if err != nil {
					t.Error(err)
				}
				if got == taskstate.BackfillTaken {
					took.Add(1)
				}
			})
		}
		wg.Wait()
		if n := took.Load(); n != 1 {
			t.Fatalf("instant %d: %d of 8 racing TakeBackfill calls took it, want exactly 1", i, n)
		}
	}
	got, _ := backfillIn(t, b, task)
	if got.Taken != 5 || got.Refused != 0 {
		t.Fatalf("after 5 instants raced for: taken %d, refused %d; want 5, 0", got.Taken, got.Refused)
	}
}

// lostStartBackfill: a StartBackfill whose reply was lost, another node's
// start of another backfill after it (refused: the first runs), then the
// resend, which answers nil and starts nothing again.
func (s *suite) lostStartBackfill(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	bf := backfillOf(task, "b1")
	lose(t, st, "StartBackfill", func() error { return a.StartBackfill(ctx, bf, nil) }, func() {
		if err := b.StartBackfill(ctx, backfillOf(task, "b2"), nil); !errors.Is(err, taskstate.ErrBackfillRunning) {
			t.Errorf("another node's StartBackfill after the lost reply = %v; want taskstate.ErrBackfillRunning", err)
		}
		if got, err := b.TakeBackfill(ctx, task, "b1", "node-b", bf.From); err != nil || got != taskstate.BackfillTaken {
			t.Errorf("another node's TakeBackfill after the lost reply = %v, %v; want BackfillTaken", got, err)
		}
	})
	want := bf
	want.State, want.Cursor, want.Taken = taskstate.BackfillRunning, bf.From, 1
	wantBackfill(t, b, task, want) // the resend did not start it over
}

// lostTakeBackfill: a TakeBackfill whose reply was lost, another node's
// take of the same instant (stale) and of the next one after it, then the
// resend: it answers what its first attempt did, and the cursor stays at
// the other node's instant.
func (s *suite) lostTakeBackfill(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	bf := backfillOf(task, "b1")
	if err := b.StartBackfill(ctx, bf, nil); err != nil {
		t.Fatal(err)
	}
	next := bf.From.Add(time.Minute)
	var got taskstate.BackfillTake
	lose(t, st, "TakeBackfill", func() error {
		var err error
		got, err = a.TakeBackfill(ctx, task, "b1", "node-a", bf.From)
		return err
	}, func() {
		if got, err := b.TakeBackfill(ctx, task, "b1", "node-b", bf.From); err != nil || got != taskstate.BackfillStale {
			t.Errorf("another node's take of the same instant after the lost reply = %v, %v; want BackfillStale", got, err)
		}
		if got, err := b.TakeBackfill(ctx, task, "b1", "node-b", next); err != nil || got != taskstate.BackfillTaken {
			t.Errorf("another node's take of the next instant = %v, %v; want BackfillTaken", got, err)
		}
	})
	if st.Loss != Failed && got != taskstate.BackfillTaken {
		t.Fatalf("TakeBackfill whose reply was lost = %v; want BackfillTaken: its first attempt took the instant", got)
	}
	want := bf
	want.State, want.Cursor, want.Taken = taskstate.BackfillRunning, next, 2
	wantBackfill(t, a, task, want)
	wantRuns(t, a, task, taskstate.BackfillPlaceholder(next, "node-b"), taskstate.BackfillPlaceholder(bf.From, "node-a"))
}

// backfillRefusesRecorded: an instant whose run the task's history got
// after the backfill started (a run still going then) is refused, as one
// that ran; a manual run at the instant, or a fire that did not run, leaves
// it to the backfill.
func (s *suite) backfillRefusesRecorded(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	bf := backfillOf(task, "b1")
	if err := a.StartBackfill(ctx, bf, nil); err != nil {
		t.Fatal(err)
	}
	ran, manual, skipped := bf.From, bf.From.Add(time.Minute), bf.From.Add(2*time.Minute)
	for _, r := range []taskstate.Run{
		// In another zone: the store knows the instant, whatever its zone.
		{Fire: ran.In(time.FixedZone("CET", 3600)), Node: "node-b", Start: ran, Duration: time.Second, Outcome: "ok"},
		{Fire: manual, Manual: true, Node: "node-b", Start: manual, Outcome: "ok"},
		{Fire: skipped, Node: "node-b", Outcome: "skipped: paused"},
	} {
		if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	take(t, a, task, "b1", "node-a", ran, taskstate.BackfillRefused)
	take(t, a, task, "b1", "node-a", manual, taskstate.BackfillTaken)
	take(t, a, task, "b1", "node-a", skipped, taskstate.BackfillTaken)
}

// lostEndBackfill: an EndBackfill whose reply was lost, another node's
// start of the next backfill after it, then the resend: the call answers
// true (its first attempt ended the backfill) and leaves the next one
// running.
func (s *suite) lostEndBackfill(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	if err := b.StartBackfill(ctx, backfillOf(task, "b1"), nil); err != nil {
		t.Fatal(err)
	}
	next := backfillOf(task, "b2")
	var ended bool
	lose(t, st, "EndBackfill", func() error {
		var err error
		ended, err = a.EndBackfill(ctx, task, "b1", taskstate.BackfillCancelled)
		return err
	}, func() {
		if got, ok := backfillIn(t, b, task); !ok || got.State != taskstate.BackfillCancelled {
			t.Errorf("another node's backfill after the lost EndBackfill = %+v, %v; want b1 cancelled: the call ran", got, ok)
		}
		if err := b.StartBackfill(ctx, next, nil); err != nil {
			t.Error(err)
		}
	})
	if st.Loss != Failed && !ended {
		t.Fatal("EndBackfill whose reply was lost = false; want true: its first attempt ended the backfill")
	}
	want := next
	want.State = taskstate.BackfillRunning
	wantBackfill(t, b, task, want)
}
