// Package taskstatetest is the conformance suite that every
// taskstate.Store must pass. A store's own tests call [Run] with a factory
// of stores; the suite checks the paused flag, manual-run requests (merged,
// taken exactly once under contention), the bounded run history, and bad
// input, from two stores on one backend, as two nodes see it.
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

// NewStores returns two stores on one backend, as two nodes of a cluster
// would have, each keeping history runs per task (0 meaning
// taskstate.DefaultHistory). A store of one process may return the same
// store twice. Stores made by one factory may share a backend across tests:
// the suite uses distinct task names per test.
type NewStores func(t *testing.T, history int) (a, b taskstate.Store)

// Run runs the conformance suite against the stores newStores makes.
func Run(t *testing.T, newStores NewStores) {
	if newStores == nil {
		t.Fatal("taskstatetest: newStores is nil")
	}
	s := &suite{new: newStores}
	t.Run("BadInput", s.badInput)
	t.Run("CancelledContext", s.cancelledContext)
	t.Run("Paused", s.paused)
	t.Run("Requests", s.requests)
	t.Run("TakeRequestOnce", s.takeRequestOnce)
	t.Run("History", s.history)
	t.Run("DefaultHistory", s.defaultHistory)
	t.Run("ConcurrentRecords", s.concurrentRecords)
}

type suite struct {
	new NewStores
	n   atomic.Int64
}

// task returns a task name no other test of this run uses, with the dots
// and odd characters that real names may have.
func (s *suite) task(t *testing.T) string {
	return fmt.Sprintf("Suite.%s/{x}:%d:%d", t.Name(), time.Now().UnixNano(), s.n.Add(1))
}

func (s *suite) badInput(t *testing.T) {
	a, _ := s.new(t, 0)
	ctx := context.Background()
	var nilCtx context.Context
	checks := map[string]error{
		"SetPaused":   a.SetPaused(ctx, "", true),
		"RequestRun":  a.RequestRun(ctx, "", time.Now()),
		"Record":      a.Record(ctx, "", taskstate.Run{}),
		"Requests":    func() error { _, err := a.Requests(nilCtx); return err }(),
		"Paused":      func() error { _, err := a.Paused(ctx, ""); return err }(),
		"TakeRequest": func() error { _, _, err := a.TakeRequest(ctx, ""); return err }(),
		"Runs":        func() error { _, err := a.Runs(ctx, ""); return err }(),
	}
	for op, err := range checks {
		if !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("%s with bad input: err = %v, want taskstate.ErrInvalid", op, err)
		}
	}
}

func (s *suite) cancelledContext(t *testing.T) {
	a, _ := s.new(t, 0)
	task := s.task(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.SetPaused(ctx, task, true); !errors.Is(err, context.Canceled) {
		t.Errorf("SetPaused on a cancelled context: err = %v, want context.Canceled", err)
	}
	if err := a.RequestRun(ctx, task, time.Now()); !errors.Is(err, context.Canceled) {
		t.Errorf("RequestRun on a cancelled context: err = %v, want context.Canceled", err)
	}
	if _, err := a.Requests(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Requests on a cancelled context: err = %v, want context.Canceled", err)
	}
	if paused, err := a.Paused(context.Background(), task); err != nil || paused {
		t.Errorf("after a cancelled SetPaused: Paused = %v, %v; want false, nil", paused, err)
	}
}

func (s *suite) paused(t *testing.T) {
	a, b := s.new(t, 0)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	want := func(st taskstate.Store, name string, w bool) {
		t.Helper()
		if got, err := st.Paused(ctx, name); err != nil || got != w {
			t.Fatalf("Paused(%q) = %v, %v; want %v", name, got, err, w)
		}
	}
	want(a, task, false)
	if err := a.SetPaused(ctx, task, true); err != nil {
		t.Fatal(err)
	}
	want(b, task, true) // the other node sees it
	want(b, other, false)
	if err := b.SetPaused(ctx, task, true); err != nil { // idempotent
		t.Fatal(err)
	}
	want(a, task, true)
	if err := b.SetPaused(ctx, task, false); err != nil {
		t.Fatal(err)
	}
	want(a, task, false)
	if err := a.SetPaused(ctx, task, false); err != nil { // resuming a running task is no error
		t.Fatal(err)
	}
	want(b, task, false)
}

func (s *suite) requests(t *testing.T) {
	a, b := s.new(t, 0)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	if _, ok, err := a.TakeRequest(ctx, task); err != nil || ok {
		t.Fatalf("TakeRequest with none pending = %v, %v; want false, nil", ok, err)
	}
	first := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	if err := a.RequestRun(ctx, task, first); err != nil {
		t.Fatal(err)
	}
	if err := b.RequestRun(ctx, task, first.Add(time.Second)); err != nil { // merged into the first
		t.Fatal(err)
	}
	if err := b.RequestRun(ctx, other, first.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	reqs, err := b.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := reqs[task]; !ok || !at.Equal(first) {
		t.Errorf("Requests()[%q] = %v, %v; want the first request's instant %v", task, at, ok, first)
	}
	if at, ok := reqs[other]; !ok || !at.Equal(first.Add(time.Minute)) {
		t.Errorf("Requests()[%q] = %v, %v; want %v", other, at, ok, first.Add(time.Minute))
	}
	at, ok, err := b.TakeRequest(ctx, task)
	if err != nil || !ok || !at.Equal(first) {
		t.Fatalf("TakeRequest = %v, %v, %v; want %v, true, nil", at, ok, err, first)
	}
	if _, ok, err := a.TakeRequest(ctx, task); err != nil || ok {
		t.Fatalf("second TakeRequest = %v, %v; want false, nil: one request is taken once", ok, err)
	}
	reqs, err = a.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reqs[task]; ok {
		t.Errorf("Requests() after the take still lists %q", task)
	}
	if _, ok := reqs[other]; !ok {
		t.Errorf("Requests() lost %q, which nobody took", other)
	}
	if _, _, err := a.TakeRequest(ctx, other); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) takeRequestOnce(t *testing.T) {
	a, b := s.new(t, 0)
	ctx := context.Background()
	for round := range 20 {
		task := s.task(t)
		if err := a.RequestRun(ctx, task, time.Now()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var taken atomic.Int32
		for i := range 8 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				_, ok, err := st.TakeRequest(ctx, task)
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		if n := taken.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 racing TakeRequest calls got the one request, want exactly 1", round, n)
		}
	}
}

// run returns the i-th run of a history, each field distinct.
func run(i int) taskstate.Run {
	start := time.Date(2026, 3, 1, 10, 0, i, 1000*i, time.UTC)
	r := taskstate.Run{Fire: start.Add(-time.Millisecond), Manual: i%3 == 0, Node: fmt.Sprintf("node-%d", i%3),
		Token: uint64(1000 + i), Start: start, Duration: time.Duration(i) * 1500 * time.Microsecond, Outcome: "ok"}
	if i%4 == 1 {
		r.Outcome, r.Error = "error", fmt.Sprintf("failure %d: \"quoted\"\nline", i)
	}
	return r
}

func equal(a, b taskstate.Run) bool {
	return a.Fire.Equal(b.Fire) && a.Start.Equal(b.Start) && a.Manual == b.Manual && a.Node == b.Node &&
		a.Token == b.Token && a.Duration == b.Duration && a.Outcome == b.Outcome && a.Error == b.Error
}

func (s *suite) history(t *testing.T) {
	const keep = 5
	a, b := s.new(t, keep)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	if runs, err := a.Runs(ctx, task); err != nil || len(runs) != 0 {
		t.Fatalf("Runs of a task never run = %v, %v; want none", runs, err)
	}
	for i := range 8 {
		st := a
		if i%2 == 1 {
			st = b
		}
		if err := st.Record(ctx, task, run(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(ctx, other, run(99)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []taskstate.Store{a, b} {
		runs, err := st.Runs(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != keep {
			t.Fatalf("Runs after 8 records with history %d: %d runs, want %d", keep, len(runs), keep)
		}
		for j, r := range runs {
			if want := run(7 - j); !equal(r, want) {
				t.Errorf("Runs()[%d] = %+v, want %+v (newest first)", j, r, want)
			}
		}
	}
	runs, err := b.Runs(ctx, other)
	if err != nil || len(runs) != 1 || !equal(runs[0], run(99)) {
		t.Errorf("Runs of another task = %+v, %v; want only its own run", runs, err)
	}
}

func (s *suite) defaultHistory(t *testing.T) {
	a, _ := s.new(t, 0)
	ctx := context.Background()
	task := s.task(t)
	for i := range taskstate.DefaultHistory + 3 {
		if err := a.Record(ctx, task, run(i)); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := a.Runs(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != taskstate.DefaultHistory || !equal(runs[0], run(taskstate.DefaultHistory+2)) {
		t.Fatalf("history 0 kept %d runs (newest %+v), want taskstate.DefaultHistory (%d) ending with the last recorded",
			len(runs), runs[0], taskstate.DefaultHistory)
	}
}

func (s *suite) concurrentRecords(t *testing.T) {
	const keep, writers, each = 10, 4, 10
	a, b := s.new(t, keep)
	ctx := context.Background()
	task := s.task(t)
	var wg sync.WaitGroup
	for w := range writers {
		st := a
		if w%2 == 1 {
			st = b
		}
		wg.Go(func() {
			for i := range each {
				if err := st.Record(ctx, task, run(w*each+i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	runs, err := b.Runs(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != keep {
		t.Fatalf("after %d concurrent records with history %d: %d runs kept, want %d", writers*each, keep, len(runs), keep)
	}
	seen := map[uint64]bool{}
	for _, r := range runs {
		if seen[r.Token] {
			t.Errorf("run with token %d kept twice", r.Token)
		}
		seen[r.Token] = true
	}
}
