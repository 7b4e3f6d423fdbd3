package taskstatetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// fireAt returns the i-th fire of a task that TakeRun counts, each a
// distinct instant with nanoseconds.
func fireAt(i int) time.Time {
	return time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC).Add(time.Duration(i) * time.Minute)
}

// takeRun fails t unless st's TakeRun of task's fire with max answers want.
func takeRun(t *testing.T, st taskstate.Store, task string, fire time.Time, max, want int) {
	t.Helper()
	if got, err := st.TakeRun(context.Background(), task, fire, max); err != nil || got != want {
		t.Fatalf("TakeRun(fire %v, max %d) = %d, %v; want %d, nil", fire, max, got, err, want)
	}
}

// runsTaken returns st's Poll.Runs of task and whether it lists the task.
func runsTaken(t *testing.T, st taskstate.Store, task string) (int, bool) {
	t.Helper()
	p, err := st.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n, ok := p.Runs[task]
	return n, ok
}

// wantRunsTaken fails t unless both stores' Poll.Runs count want runs of
// task (want 0: the task is not listed).
func wantRunsTaken(t *testing.T, task string, want int, stores ...taskstate.Store) {
	t.Helper()
	for _, st := range stores {
		n, ok := runsTaken(t, st, task)
		if ok != (want > 0) || n != want {
			t.Fatalf("Poll().Runs[task] = %d (listed: %v); want %d (listed: %v)", n, ok, want, want > 0)
		}
	}
}

// takeRuns: the fires of a task take its runs in order, numbered 1 to
// max, from either node, and then none; a fire that took one answers its
// number again (in any time zone) and takes nothing, even once max is
// lowered below it; a max raised later allows more; each task counts its
// own; a store answers the last taskstate.MaxRunTakes takes again;
// Poll.Runs shows the counts; bad input changes nothing.
func (s *suite) takeRuns(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	wantRunsTaken(t, task, 0, a, b)

	// Bad input takes nothing.
	for _, c := range []struct {
		fire time.Time
		max  int
		want string
	}{{fireAt(0), 0, "max runs 0"}, {fireAt(0), -1, "max runs -1"}, {time.Time{}, 3, "fire"}} {
		n, err := a.TakeRun(ctx, task, c.fire, c.max)
		if !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) || n != 0 {
			t.Fatalf("TakeRun(fire %v, max %d) = %d, %v; want 0 and taskstate.ErrInvalid naming %q", c.fire, c.max, n, err, c.want)
		}
	}
	wantRunsTaken(t, task, 0, a, b)

	takeRun(t, a, task, fireAt(1), 3, 1)
	takeRun(t, b, task, fireAt(2), 3, 2)
	takeRun(t, a, task, fireAt(3), 3, 3)
	wantRunsTaken(t, task, 3, a, b)
	takeRun(t, b, task, fireAt(4), 3, 0) // max taken
	takeRun(t, a, task, fireAt(4), 3, 0)
	wantRunsTaken(t, task, 3, a, b)
	wantRunsTaken(t, other, 0, a, b)

	// A fire that took one answers its number again, on either node.
	takeRun(t, b, task, fireAt(2), 3, 2)
	takeRun(t, a, task, fireAt(1).In(time.FixedZone("UTC+5", 5*3600)), 3, 1)
	takeRun(t, b, task, fireAt(3), 1, 3) // max lowered since: it took it
	wantRunsTaken(t, task, 3, a, b)

	// A max raised allows more; a max lowered, none.
	takeRun(t, b, task, fireAt(4), 5, 4)
	takeRun(t, a, task, fireAt(5), 5, 5)
	takeRun(t, b, task, fireAt(6), 5, 0)
	takeRun(t, a, task, fireAt(7), 2, 0)
	takeRun(t, a, task, fireAt(4), 5, 4)
	wantRunsTaken(t, task, 5, a, b)

	// Each task counts its own.
	takeRun(t, a, other, fireAt(1), 1, 1)
	takeRun(t, b, other, fireAt(2), 1, 0)
	wantRunsTaken(t, other, 1, a, b)
	wantRunsTaken(t, task, 5, a, b)

	// The last MaxRunTakes takes are answered again.
	many := s.task(t)
	total := taskstate.MaxRunTakes + 4
	for i := 1; i <= total; i++ {
		takeRun(t, []taskstate.Store{a, b}[i%2], many, fireAt(i), 1000, i)
	}
	for i := total - taskstate.MaxRunTakes + 1; i <= total; i++ {
		takeRun(t, []taskstate.Store{a, b}[(i+1)%2], many, fireAt(i), 1000, i)
	}
	wantRunsTaken(t, many, total, a, b)
	takeRun(t, a, many, fireAt(total+1), total, 0)
	wantRunsTaken(t, many, total, a, b)
}

// takeRunOnce: nodes racing with distinct fires for a task's last runs
// take each number once: of 16 racers for max 5, five get 1 to 5, the
// others 0, and the count stays 5.
func (s *suite) takeRunOnce(t *testing.T) {
	const racers, max = 16, 5
	a, b := s.pair(t, 0)
	ctx := context.Background()
	for round := range 5 {
		task := s.task(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var got []int
		for i := range racers {
			st := []taskstate.Store{a, b}[i%2]
			wg.Go(func() {
				n, err := st.TakeRun(ctx, task, fireAt(i), max)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		slices.Sort(got)
		want := make([]int, racers)
		for i := range max {
			want[racers-max+i] = i + 1
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %d racing TakeRun calls for max %d answered %v; want %v: each of 1 to %d once, 0 for the others",
				round, racers, max, got, want, max)
		}
		wantRunsTaken(t, task, max, a, b)
	}
}

// lostTakeRun: a TakeRun whose reply was lost, another node's takes after
// it (the next run, then none: the lost call took one of the two), then
// the resend (the client's for Retried, the caller's for Failed): the call
// answers the number its first attempt took, and takes nothing again.
func (s *suite) lostTakeRun(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	var n int
	lose(t, st, "TakeRun", func() error {
		var err error
		n, err = a.TakeRun(ctx, task, fireAt(1), 2)
		return err
	}, func() {
		if got, err := b.TakeRun(ctx, task, fireAt(2), 2); err != nil || got != 2 {
			t.Errorf("another node's TakeRun after the lost reply = %d, %v; want 2: the call took run 1", got, err)
		}
		if got, err := b.TakeRun(ctx, task, fireAt(3), 2); err != nil || got != 0 {
			t.Errorf("another node's second TakeRun after the lost reply = %d, %v; want 0: both runs were taken", got, err)
		}
	})
	if st.Loss != Failed && n != 1 {
		t.Fatalf("TakeRun whose reply was lost = %d; want 1: the number its first attempt took", n)
	}
	resend(t, st, "TakeRun", func() error {
		got, err := a.TakeRun(ctx, task, fireAt(1), 2)
		if err == nil && got != 1 {
			err = fmt.Errorf("answered %d, want 1: the number its first call took", got)
		}
		return err
	})
	wantRunsTaken(t, task, 2, a, b)
}

// lostTakeRunPastRecentTakes: a TakeRun whose reply was lost, then more
// than taskstate.MaxRunTakes takes of other fires by another node, then
// the resend: a client's resend (Retried) still answers the first
// attempt's number, and no call takes a run twice. (A caller's own resend
// for Failed, a new call, may take another once its fire is past the
// takes kept: it is not made.)
func (s *suite) lostTakeRunPastRecentTakes(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	const max = 1000
	var n int
	lose(t, st, "TakeRun", func() error {
		var err error
		n, err = a.TakeRun(ctx, task, fireAt(0), max)
		return err
	}, func() {
		for i := 1; i <= taskstate.MaxRunTakes+1; i++ {
			if got, err := b.TakeRun(ctx, task, fireAt(i), max); err != nil || got != i+1 {
				t.Errorf("another node's TakeRun %d after the lost reply = %d, %v; want %d", i, got, err, i+1)
				return
			}
		}
	})
	if st.Loss != Failed && n != 1 {
		t.Fatalf("TakeRun whose reply was lost, resent after %d other takes = %d; want 1: the number its first attempt took",
			taskstate.MaxRunTakes+1, n)
	}
	wantRunsTaken(t, task, taskstate.MaxRunTakes+2, a, b)
}
