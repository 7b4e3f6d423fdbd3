package taskstatetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// endContext makes call with a context that ends after the backend applied
// the call and before A's client reads the reply: the harness loses the
// reply (Stores.LoseNextReply), ends the context, and only then does the
// client see the loss. A client that resends a lost reply does not resend
// it once the context ended. The call must return an error wrapping
// context.Canceled; for NoWire, the context ends after the call, which
// returns nil.
func endContext(t *testing.T, st Stores, op string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ended atomic.Bool
	end := func() {
		cancel()
		ended.Store(true)
	}
	var err error
	if st.Loss == NoWire {
		err = call(ctx)
		end()
	} else {
		st.LoseNextReply(end)
		err = call(ctx)
	}
	switch {
	case !ended.Load():
		t.Fatalf("%s: the harness lost no reply (its then never ran): the case tests nothing", op)
	case st.Loss == NoWire && err != nil:
		t.Fatalf("%s (no wire) = %v, want nil: the context ended after the call", op, err)
	case st.Loss != NoWire && !errors.Is(err, context.Canceled):
		t.Fatalf("%s whose context ended after the backend applied it = %v; want an error wrapping context.Canceled: "+
			"the caller's context ended before the reply came", op, err)
	}
}

// contextEnded runs, for every mutating call, the call with its context
// ended after the backend applied it (endContext), and checks that the
// state is as if the call ran once, in full: what another node then reads
// and does is what it would after a call that returned nil.
func (s *suite) contextEnded(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	t.Run("SetPaused", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		before := pauses(t, st.B)
		p := taskstate.Pause{Paused: true, Note: "ended", By: "node-a", At: pauseAt(1)}
		endContext(t, st, "SetPaused", func(ctx context.Context) error { return st.A.SetPaused(ctx, task, p) })
		if got, err := st.B.Paused(ctx, task); err != nil || !samePause(got, p) {
			t.Fatalf("Paused after the SetPaused(%+v) = %+v, %v; want it, note and all", p, got, err)
		}
		// A node that keeps the flags it read reads them again only when the
		// pause generation moved: the flag must not change without it.
		if after := pauses(t, st.B); after == before {
			t.Fatalf("Poll().Pauses = %d before and after a SetPaused that changed the flag; want it moved on: "+
				"the nodes that keep the flags they read would never see the change", after)
		}
	})
	t.Run("RequestRun", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		endContext(t, st, "RequestRun", func(ctx context.Context) error { return st.A.RequestRun(ctx, task, at) })
		if got, ok, err := st.B.TakeRequest(ctx, task, "node-b"); err != nil || !ok || !got.Equal(at) {
			t.Fatalf("TakeRequest after the RequestRun = %v, %v, %v; want %v, true, nil", got, ok, err, at)
		}
		if _, ok, err := st.B.TakeRequest(ctx, task, "node-b"); err != nil || ok {
			t.Fatalf("second TakeRequest = %v, %v; want false, nil: one call, one request", ok, err)
		}
	})
	t.Run("TakeRequest", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		if err := st.B.RequestRun(ctx, task, at); err != nil {
			t.Fatal(err)
		}
		endContext(t, st, "TakeRequest", func(ctx context.Context) error {
			_, _, err := st.A.TakeRequest(ctx, task, "node-a")
			return err
		})
		if reqs, err := requests(ctx, st.B); err != nil || !reqs[task].IsZero() {
			t.Fatalf("requests after the TakeRequest = %v, %v; want none of %q", reqs, err, task)
		}
		wantRuns(t, st.B, task, taken(at, "node-a"))
	})
	t.Run("TakeRetry", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		r := retry(2)
		if err := st.B.Record(ctx, taskstate.TaskRun{Task: task, Run: run(1), Retry: &r}); err != nil {
			t.Fatal(err)
		}
		endContext(t, st, "TakeRetry", func(ctx context.Context) error {
			_, err := st.A.TakeRetry(ctx, task, "node-a", r)
			return err
		})
		if got, ok := pendingRetry(t, st.B, task); ok {
			t.Fatalf("retry %+v pending after the TakeRetry; want none", got)
		}
		if ok, err := st.B.TakeRetry(ctx, task, "node-b", r); err != nil || ok {
			t.Fatalf("another node's TakeRetry after = %v, %v; want false, nil: the attempt was taken", ok, err)
		}
		wantRuns(t, st.B, task, takenRetry(r, "node-a"), run(1))
	})
	t.Run("LeaveWaiting", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		r := waitingAt(0)
		endContext(t, st, "LeaveWaiting", func(ctx context.Context) error {
			_, err := st.A.LeaveWaiting(ctx, task, r)
			return err
		})
		if got, ok := pendingRetry(t, st.B, task); !ok || !sameRetry(got, r) {
			t.Fatalf("pending run after the LeaveWaiting = %+v, %v; want %+v", got, ok, r)
		}
	})
	t.Run("TakeRun", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		endContext(t, st, "TakeRun", func(ctx context.Context) error {
			_, err := st.A.TakeRun(ctx, task, fireAt(1), 2)
			return err
		})
		wantRunsTaken(t, task, 1, st.B)
		takeRun(t, st.B, task, fireAt(2), 2, 2)
		takeRun(t, st.B, task, fireAt(1), 2, 1) // the call took run 1
		takeRun(t, st.B, task, fireAt(3), 2, 0)
	})
	t.Run("AppendEvent", s.contextEndedAppendEvent)
	t.Run("Record", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		r := retry(2)
		rec := taskstate.TaskRun{Task: task, ID: s.recordID(), Run: run(1), Retry: &r}
		endContext(t, st, "Record", func(ctx context.Context) error { return st.A.Record(ctx, rec) })
		wantRuns(t, st.B, task, run(1))
		if got, ok := pendingRetry(t, st.B, task); !ok || !sameRetry(got, r) {
			t.Fatalf("pending retry after the Record = %+v, %v; want %+v", got, ok, r)
		}
		// The scheduler's recorder sends a failed batch again.
		if err := st.A.Record(ctx, rec); err != nil {
			t.Fatal(err)
		}
		wantRuns(t, st.B, task, run(1))
	})
	t.Run("RecordMany", func(t *testing.T) {
		st := s.lossy(t)
		runs := s.batch(t, manyTasks)
		endContext(t, st, "Record", func(ctx context.Context) error { return st.A.Record(ctx, runs...) })
		// A store that splits a call may have applied its first part alone:
		// each task's run is kept once or not yet, never twice.
		for _, r := range runs {
			if got, err := st.B.Runs(ctx, r.Task, 0); err != nil || len(got) > 1 {
				t.Fatalf("Runs of one of the Record's tasks = %s, %v; want its run at most once", format(got), err)
			}
		}
		if err := st.A.Record(ctx, runs...); err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			wantRuns(t, st.B, r.Task, r.Run)
		}
	})
	t.Run("StartBackfill", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		bf := backfillOf(task, "b1")
		endContext(t, st, "StartBackfill", func(ctx context.Context) error { return st.A.StartBackfill(ctx, bf, nil) })
		want := bf
		want.State = taskstate.BackfillRunning
		wantBackfill(t, st.B, task, want)
		take(t, st.B, task, "b1", "node-b", bf.From, taskstate.BackfillTaken)
	})
	t.Run("TakeBackfill", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		bf := backfillOf(task, "b1")
		if err := st.B.StartBackfill(ctx, bf, nil); err != nil {
			t.Fatal(err)
		}
		endContext(t, st, "TakeBackfill", func(ctx context.Context) error {
			_, err := st.A.TakeBackfill(ctx, task, "b1", "node-a", bf.From)
			return err
		})
		take(t, st.B, task, "b1", "node-b", bf.From, taskstate.BackfillStale)
		want := bf
		want.State, want.Cursor, want.Taken = taskstate.BackfillRunning, bf.From, 1
		wantBackfill(t, st.B, task, want)
		wantRuns(t, st.B, task, taskstate.BackfillPlaceholder(bf.From, "node-a"))
	})
	t.Run("EndBackfill", func(t *testing.T) {
		st, task := s.lossy(t), s.task(t)
		bf := backfillOf(task, "b1")
		if err := st.B.StartBackfill(ctx, bf, nil); err != nil {
			t.Fatal(err)
		}
		endContext(t, st, "EndBackfill", func(ctx context.Context) error {
			_, err := st.A.EndBackfill(ctx, task, "b1", taskstate.BackfillDone)
			return err
		})
		want := bf
		want.State = taskstate.BackfillDone
		wantBackfill(t, st.B, task, want)
		take(t, st.B, task, "b1", "node-b", bf.From, taskstate.BackfillStale)
	})
	t.Run("CreateSchedule", func(t *testing.T) {
		st := s.lossy(t)
		prefix := s.task(t) + "/"
		sc := scheduleOf(prefix+"acme", "0 2 * * *")
		before := generation(t, st.B)
		endContext(t, st, "CreateSchedule", func(ctx context.Context) error { return st.A.CreateSchedule(ctx, sc) })
		wantSchedules(t, st.B, prefix, sc)
		if after := generation(t, st.B); after == before {
			t.Fatalf("Poll().Schedules = %d before and after the CreateSchedule; want it moved on", after)
		}
	})
	t.Run("UpdateSchedule", func(t *testing.T) {
		st := s.lossy(t)
		prefix := s.task(t) + "/"
		sc := scheduleOf(prefix+"acme", "0 2 * * *")
		if err := st.B.CreateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
		before := generation(t, st.B)
		mine := sc
		mine.Cron = "0 3 * * *"
		endContext(t, st, "UpdateSchedule", func(ctx context.Context) error { return st.A.UpdateSchedule(ctx, mine) })
		wantSchedules(t, st.B, prefix, mine)
		if after := generation(t, st.B); after == before {
			t.Fatalf("Poll().Schedules = %d before and after the UpdateSchedule; want it moved on", after)
		}
	})
	t.Run("DeleteSchedule", func(t *testing.T) {
		st := s.lossy(t)
		prefix := s.task(t) + "/"
		sc := scheduleOf(prefix+"acme", "0 2 * * *")
		if err := st.B.CreateSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
		before := generation(t, st.B)
		endContext(t, st, "DeleteSchedule", func(ctx context.Context) error {
			_, err := st.A.DeleteSchedule(ctx, sc.Name)
			return err
		})
		wantSchedules(t, st.B, prefix)
		if after := generation(t, st.B); after == before {
			t.Fatalf("Poll().Schedules = %d before and after the DeleteSchedule; want it moved on", after)
		}
	})
}

// pauses returns st's Poll.Pauses.
func pauses(t *testing.T, st taskstate.Store) int64 {
	t.Helper()
	p, err := st.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.Pauses
}
