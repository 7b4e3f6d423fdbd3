package taskstatetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// waitingAt returns the waiting fire (attempt 1) of retry's instant plus d.
func waitingAt(d time.Duration) taskstate.Retry {
	r := retry(1)
	r.Fire, r.Due = r.Fire.Add(d), r.Due.Add(d)
	return r
}

func leave(t *testing.T, st taskstate.Store, task string, r taskstate.Retry, want bool) {
	t.Helper()
	if got, err := st.LeaveWaiting(context.Background(), task, r); err != nil || got != want {
		t.Fatalf("LeaveWaiting(fire %v) = %v, %v; want %v, nil", r.Fire, got, err, want)
	}
}

// leaveWaiting: a fire left waiting is the task's pending run, which a
// second fire does not replace, nor does any while a retry is pending; the
// same call again answers true, also once the fire was taken; once taken,
// a later fire may wait, and an earlier one may not.
func (s *suite) leaveWaiting(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	first, second, third := waitingAt(0), waitingAt(time.Minute), waitingAt(2*time.Minute)
	leave(t, a, task, first, true)
	leave(t, b, task, second, false)
	leave(t, b, task, first, true) // sent again
	if got, ok := pendingRetry(t, b, task); !ok || !sameRetry(got, first) {
		t.Fatalf("pending run = %+v, %v; want the first fire left waiting, %+v", got, ok, first)
	}
	if ok, err := b.TakeRetry(ctx, task, "node-b", first); err != nil || !ok {
		t.Fatalf("TakeRetry of the waiting fire = %v, %v; want true, nil", ok, err)
	}
	leave(t, a, task, first, true) // sent again after the take: it was left
	if _, ok := pendingRetry(t, b, task); ok {
		t.Fatal("a fire is pending after its take and a LeaveWaiting of it sent again; want none")
	}
	leave(t, a, task, third, true)
	leave(t, b, task, second, false) // earlier than the one waiting
	if ok, err := a.TakeRetry(ctx, task, "node-a", third); err != nil || !ok {
		t.Fatalf("TakeRetry of the third fire = %v, %v; want true, nil", ok, err)
	}
	leave(t, b, task, second, false) // earlier than the last taken
	wantRuns(t, b, task, takenRetry(third, "node-a"), takenRetry(first, "node-b"))

	// A retry pending keeps any fire from waiting.
	other := s.task(t)
	r := retry(2)
	if err := a.Record(ctx, taskstate.TaskRun{Task: other, Run: run(1), Retry: &r}); err != nil {
		t.Fatal(err)
	}
	leave(t, b, other, waitingAt(time.Hour), false)
	if got, ok := pendingRetry(t, a, other); !ok || !sameRetry(got, r) {
		t.Fatalf("pending run = %+v, %v; want the retry %+v", got, ok, r)
	}

	for _, c := range []struct {
		name string
		r    taskstate.Retry
		want string
	}{
		{"attempt 2", retry(2), "attempt 2 must be 1"},
		{"attempt 0", retry(0), "attempt 0"},
		{"no fire", taskstate.Retry{Attempt: 1, Due: time.Now()}, "fire instant"},
	} {
		if _, err := a.LeaveWaiting(ctx, task, c.r); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LeaveWaiting of %s: err = %v, want taskstate.ErrInvalid naming %q", c.name, err, c.want)
		}
	}
	if _, err := a.LeaveWaiting(ctx, "", first); !errors.Is(err, taskstate.ErrInvalid) {
		t.Errorf("LeaveWaiting of an empty task: err = %v, want taskstate.ErrInvalid", err)
	}
}

// leaveWaitingOnce: of 8 nodes racing to leave 8 fires waiting, exactly one
// does, whatever store each calls through.
func (s *suite) leaveWaitingOnce(t *testing.T) {
	a, b := s.pair(t, 0)
	for round := range 20 {
		task := s.task(t)
		var wg sync.WaitGroup
		var left, winner atomic.Int32
		for i := range 8 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				ok, err := st.LeaveWaiting(context.Background(), task, waitingAt(time.Duration(i)*time.Minute))
				if err != nil {
					t.Error(err)
				}
				if ok {
					left.Add(1)
					winner.Store(int32(i))
				}
			})
		}
		wg.Wait()
		if n := left.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 racing LeaveWaiting calls left their fire waiting, want exactly 1", round, n)
		}
		if got, ok := pendingRetry(t, b, task); !ok || !sameRetry(got, waitingAt(time.Duration(winner.Load())*time.Minute)) {
			t.Fatalf("round %d: pending run = %+v, %v; want the winner's (%d)", round, got, ok, winner.Load())
		}
	}
}

// lostLeaveWaiting: a LeaveWaiting whose reply was lost, its fire taken by
// another node, then the resend: the call answers true (it left the fire),
// and leaves nothing pending again.
func (s *suite) lostLeaveWaiting(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	r := waitingAt(0)
	var ok bool
	lose(t, st, "LeaveWaiting", func() error {
		var err error
		ok, err = a.LeaveWaiting(ctx, task, r)
		return err
	}, func() {
		if took, err := b.TakeRetry(ctx, task, "node-b", r); err != nil || !took {
			t.Errorf("another node's TakeRetry after the lost reply = %v, %v; want true, nil: the call left the fire", took, err)
		}
	})
	if st.Loss != Failed && !ok {
		t.Fatal("LeaveWaiting whose reply was lost = false; want true: its first attempt left the fire waiting")
	}
	if got, pending := pendingRetry(t, b, task); pending {
		t.Fatalf("after the resend, %+v is pending; want nothing: the fire was taken", got)
	}
	wantRuns(t, a, task, takenRetry(r, "node-b"))
}
