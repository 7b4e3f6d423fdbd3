// Package taskstatetest is the conformance suite that every
// taskstate.Store must pass. A store's own tests call [Run] with a factory
// of stores; the suite checks the paused flag and its note (who, why and
// when, resumes' too, bad ones refused), manual-run requests (merged,
// taken exactly once under contention, the taker's placeholder run and its
// replacement by the run), retries (left by a record, taken exactly once
// per attempt, replaced by a later one), the runs counted by TakeRun (taken
// once each under contention, answered again for a fire that took one),
// the trail of control actions (Trail, TrailRace, TrailBound, BadEvents:
// numbered in commit order, so that a reader tailing it misses nothing,
// stored once per Key under racing appenders, bounded),
// the bounded run history and its
// reads of the newest runs, the cap on error texts, bad input, from two
// stores on one backend, as two nodes see it; and faults:
//
//   - LostReply/<call>: every mutating call (SetPaused, RequestRun,
//     TakeRequest, TakeRetry, LeaveWaiting, TakeRun, AppendEvent, Record, StartBackfill,
//     TakeBackfill, EndBackfill, Create/Update/DeleteSchedule) with its
//     reply lost after the backend applied it and another node's calls
//     before the client's resend (Retried) or the caller's error (Failed).
//     A failed Record is sent again with the same IDs, as the scheduler's
//     recorder does, and each run is kept once (LostReply/Record,
//     RecordManual, RecordMany: 60 tasks, which etcdlocks splits).
//   - RecordResent, RecordResentAfterLaterRecords: a Record sent again
//     with the same run IDs, after other records of its tasks, keeps each
//     run once and in the order the runs were made.
//   - ContextEnded/<call>: every mutating call with its context ended after
//     the backend applied it: the call returns the context's error, and the
//     state is that of the call run once, in full (a SetPaused's pause
//     generation moved with its flag, its note kept with it).
//   - Stores.Leaks, after every case: what the backend keeps beyond what
//     the store says it does (keys without an expiry, rows beyond a bound,
//     leases with no key).
package taskstatetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ndigo/ndigo/taskstate"
)

// NewStores returns two stores on one backend, as two nodes of a cluster
// would have, each keeping history runs per task (0 meaning
// taskstate.DefaultHistory). Stores made by one factory may share a backend
// across tests: the suite uses distinct task names per test.
type NewStores func(t *testing.T, history int) Stores

// Stores are two stores on one backend and what a lost reply does to the
// calls of the first.
type Stores struct {
	// A and B are the two nodes' stores. A store of one process may be
	// both.
	A, B taskstate.Store
	// Loss is what a lost reply does to a call of A.
	Loss Loss
	// LoseNextReply arms one loss: A's next call runs on the backend, its
	// reply is lost, then runs (other calls, on B), and only then does A's
	// client see the connection end, and resend the call (Retried) or
	// return an error (Failed). It is nil for NoWire; a harness that cannot
	// lose replies on a store with a wire (a Redis Cluster) leaves it nil,
	// and the lost-reply cases are skipped. The ContextEnded cases use it
	// too: their then ends the call's context, so that the client, which
	// does not resend a call whose context ended, returns its error.
	LoseNextReply func(then func())
	// Leaks, if set, reports what the backend holds that the store's
	// documentation does not say it keeps (keys without an expiry that it
	// does not state permanent, rows beyond its stated bound, leases that
	// hold no key), or nil. The suite calls it once each case that made
	// these stores has ended, before the harness's own cleanups. A backend
	// shared across cases reports only what these stores could have left:
	// their namespace, or what appeared since they were made.
	Leaks func(t *testing.T) error
	// Trail is how many events the stores keep (their trail option; 0
	// meaning taskstate.DefaultTrail): [Trail], for the TrailBound case to
	// append past it quickly.
	Trail int
}

// A Loss is what a lost reply does to a store's call: what the store
// promises across it, which the suite's LostReply cases check.
type Loss int

const (
	// NoWire: the store has no wire (taskstate.InProcess), and no reply is
	// lost. The LostReply cases make the call, then the other node's calls,
	// and check the same outcome as for Retried.
	NoWire Loss = iota
	// Retried: the client resends a call whose reply was lost (go-redis
	// does, by default): the call returns what its first attempt did, and
	// its effect is the first attempt's alone, whatever the other node did
	// before the retry.
	Retried
	// Failed: the client does not resend it (pgx never resends a query):
	// the call returns an error, and the state is as if it ran once (the
	// harness loses the reply after the backend ran it), never twice.
	Failed
)

// String names l as its constant does.
func (l Loss) String() string {
	switch l {
	case NoWire:
		return "NoWire"
	case Retried:
		return "Retried"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("Loss(%d)", int(l))
}

// Run runs the conformance suite against the stores newStores makes.
func Run(t *testing.T, newStores NewStores) {
	if newStores == nil {
		t.Fatal("taskstatetest: newStores is nil")
	}
	s := &suite{new: newStores}
	t.Run("BadInput", s.badInput)
	t.Run("CancelledContext", s.cancelledContext)
	t.Run("Paused", s.paused)
	t.Run("BadPauses", s.badPauses)
	t.Run("Requests", s.requests)
	t.Run("TakeRequestOnce", s.takeRequestOnce)
	t.Run("TakenPlaceholder", s.takenPlaceholder)
	t.Run("Retries", s.retries)
	t.Run("TakeRetryOnce", s.takeRetryOnce)
	t.Run("RetryResent", s.retryResent)
	t.Run("LeaveWaiting", s.leaveWaiting)
	t.Run("LeaveWaitingOnce", s.leaveWaitingOnce)
	t.Run("TakeRuns", s.takeRuns)
	t.Run("TakeRunOnce", s.takeRunOnce)
	t.Run("Trail", s.trail)
	t.Run("TrailRace", s.trailRace)
	t.Run("TrailBound", s.trailBound)
	t.Run("BadEvents", s.badEvents)
	t.Run("Backfill", s.backfill)
	t.Run("TakeBackfillOnce", s.takeBackfillOnce)
	t.Run("BackfillRefusesRecorded", s.backfillRefusesRecorded)
	t.Run("Schedules", s.schedules)
	t.Run("BadSchedules", s.badSchedules)
	t.Run("History", s.history)
	t.Run("DefaultHistory", s.defaultHistory)
	t.Run("HistoryKeep", s.historyKeep)
	t.Run("RecordMany", s.recordMany)
	t.Run("RunsLimit", s.runsLimit)
	t.Run("ConcurrentRecords", s.concurrentRecords)
	t.Run("RecordResent", s.recordResent)
	t.Run("RecordResentAfterLaterRecords", s.recordResentAfterLaterRecords)
	t.Run("ErrorCap", s.errorCap)
	t.Run("LostReply", func(t *testing.T) {
		t.Run("SetPaused", s.lostSetPaused)
		t.Run("RequestRun", s.lostRequestRun)
		t.Run("TakeRequest", s.lostTakeRequest)
		t.Run("TakeRequestThenAnotherTake", s.lostTakeRequestThenAnotherTake)
		t.Run("Record", s.lostRecord)
		t.Run("RecordManual", s.lostRecordManual)
		t.Run("RecordMany", s.lostRecordMany)
		t.Run("TakeRetry", s.lostTakeRetry)
		t.Run("RecordRetry", s.lostRecordRetry)
		t.Run("LeaveWaiting", s.lostLeaveWaiting)
		t.Run("TakeRun", s.lostTakeRun)
		t.Run("TakeRunPastRecentTakes", s.lostTakeRunPastRecentTakes)
		t.Run("AppendEvent", s.lostAppendEvent)
		t.Run("StartBackfill", s.lostStartBackfill)
		t.Run("TakeBackfill", s.lostTakeBackfill)
		t.Run("EndBackfill", s.lostEndBackfill)
		t.Run("CreateSchedule", s.lostCreateSchedule)
		t.Run("UpdateSchedule", s.lostUpdateSchedule)
		t.Run("DeleteSchedule", s.lostDeleteSchedule)
	})
	t.Run("ContextEnded", s.contextEnded)
}

type suite struct {
	new NewStores
	n   atomic.Int64
}

// stores returns the stores of a new backend, whose Leaks the suite checks
// once t has ended.
func (s *suite) stores(t *testing.T, history int) Stores {
	t.Helper()
	st := s.new(t, history)
	if st.Leaks != nil {
		t.Cleanup(func() {
			if err := st.Leaks(t); err != nil {
				t.Errorf("after %s: Stores.Leaks: %v", t.Name(), err)
			}
		})
	}
	return st
}

// pair returns the two stores of a new backend.
func (s *suite) pair(t *testing.T, history int) (a, b taskstate.Store) {
	t.Helper()
	st := s.stores(t, history)
	return st.A, st.B
}

// task returns a task name no other test of this run uses, with the dots
// and odd characters that real names may have.
func (s *suite) task(t *testing.T) string {
	return fmt.Sprintf("Suite.%s/{x}:%d:%d", t.Name(), time.Now().UnixNano(), s.n.Add(1))
}

func (s *suite) badInput(t *testing.T) {
	a, _ := s.pair(t, 0)
	ctx := context.Background()
	var nilCtx context.Context
	checks := map[string]error{
		"SetPaused":     a.SetPaused(ctx, "", taskstate.Pause{Paused: true}),
		"RequestRun":    a.RequestRun(ctx, "", time.Now()),
		"Record":        a.Record(ctx, taskstate.TaskRun{Task: "", Run: taskstate.Run{}}),
		"Poll":          func() error { _, err := a.Poll(nilCtx); return err }(),
		"Paused":        func() error { _, err := a.Paused(ctx, ""); return err }(),
		"TakeRequest":   func() error { _, _, err := a.TakeRequest(ctx, "", "node-a"); return err }(),
		"TakeRetry":     func() error { _, err := a.TakeRetry(ctx, "", "node-a", retry(2)); return err }(),
		"TakeRun":       func() error { _, err := a.TakeRun(ctx, "", fireAt(1), 1); return err }(),
		"Runs":          func() error { _, err := a.Runs(ctx, "", 0); return err }(),
		"StartBackfill": a.StartBackfill(ctx, taskstate.Backfill{}, nil),
		"TakeBackfill": func() error {
			_, err := a.TakeBackfill(ctx, "", "b1", "node-a", time.Now())
			return err
		}(),
		"EndBackfill": func() error { _, err := a.EndBackfill(ctx, "", "b1", taskstate.BackfillDone); return err }(),
	}
	for op, err := range checks {
		if !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("%s with bad input: err = %v, want taskstate.ErrInvalid", op, err)
		}
	}
	named := map[string]struct {
		err  error
		want string
	}{
		"TakeRequest with an empty node": {func() error { _, _, err := a.TakeRequest(ctx, "Payroll.Close", ""); return err }(), "node"},
		"Runs with limit -1":             {func() error { _, err := a.Runs(ctx, "Payroll.Close", -1); return err }(), "limit -1"},
		"TakeRetry with an empty node":   {func() error { _, err := a.TakeRetry(ctx, "Payroll.Close", "", retry(2)); return err }(), "node"},
		"TakeRetry of attempt 0":         {func() error { _, err := a.TakeRetry(ctx, "Payroll.Close", "node-a", retry(0)); return err }(), "attempt 0"},
		"TakeRun of max 0":               {func() error { _, err := a.TakeRun(ctx, "Payroll.Close", fireAt(1), 0); return err }(), "max runs 0"},
		"TakeRun of no fire":             {func() error { _, err := a.TakeRun(ctx, "Payroll.Close", time.Time{}, 1); return err }(), "fire"},
		"Record with a retry of attempt 0": {a.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: run(1), Retry: new(retry(0))}),
			"attempt 0"},
		"StartBackfill without an ID": {a.StartBackfill(ctx, backfillOf("Payroll.Close", ""), nil), "backfill ID"},
		"StartBackfill ending before it starts": {a.StartBackfill(ctx, func() taskstate.Backfill {
			b := backfillOf("Payroll.Close", "b1")
			b.To = b.From.Add(-time.Second)
			return b
		}(), nil), "must start at a set instant and not end before it"},
		"StartBackfill of no instant": {a.StartBackfill(ctx, func() taskstate.Backfill {
			b := backfillOf("Payroll.Close", "b1")
			b.Total = 0
			return b
		}(), nil), "total 0"},
		"TakeBackfill with an empty node": {func() error {
			_, err := a.TakeBackfill(ctx, "Payroll.Close", "b1", "", time.Now())
			return err
		}(), "node"},
		"TakeBackfill of no instant": {func() error {
			_, err := a.TakeBackfill(ctx, "Payroll.Close", "b1", "node-a", time.Time{})
			return err
		}(), "instant must be set"},
		"EndBackfill to running": {func() error {
			_, err := a.EndBackfill(ctx, "Payroll.Close", "b1", taskstate.BackfillRunning)
			return err
		}(), `state "running"`},
	}
	for op, c := range named {
		if !errors.Is(c.err, taskstate.ErrInvalid) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want taskstate.ErrInvalid naming %q", op, c.err, c.want)
		}
	}
}

func (s *suite) cancelledContext(t *testing.T) {
	a, _ := s.pair(t, 0)
	task := s.task(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.SetPaused(ctx, task, taskstate.Pause{Paused: true, Note: "cancelled"}); !errors.Is(err, context.Canceled) {
		t.Errorf("SetPaused on a cancelled context: err = %v, want context.Canceled", err)
	}
	if err := a.RequestRun(ctx, task, time.Now()); !errors.Is(err, context.Canceled) {
		t.Errorf("RequestRun on a cancelled context: err = %v, want context.Canceled", err)
	}
	if _, err := a.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll on a cancelled context: err = %v, want context.Canceled", err)
	}
	if p, err := a.Paused(context.Background(), task); err != nil || p != (taskstate.Pause{}) {
		t.Errorf("after a cancelled SetPaused: Paused = %+v, %v; want the zero Pause, nil", p, err)
	}
}

// requests returns st's pending requests, from Poll.
func requests(ctx context.Context, st taskstate.Store) (map[string]time.Time, error) {
	p, err := st.Poll(ctx)
	return p.Requests, err
}

// samePause reports whether got is want, as a store returns it: the same
// fields, At the same instant in UTC.
func samePause(got, want taskstate.Pause) bool {
	return got.Paused == want.Paused && got.Note == want.Note && got.By == want.By && got.At.Equal(want.At) &&
		got.At.Location() == time.UTC
}

// wantPause checks that st's Paused of task is want.
func wantPause(t *testing.T, st taskstate.Store, task string, want taskstate.Pause) {
	t.Helper()
	if got, err := st.Paused(context.Background(), task); err != nil || !samePause(got, want) {
		t.Fatalf("Paused(%q) = %+v, %v; want %+v (At in UTC)", task, got, err, want)
	}
}

// pauseAt is an At of a pause: with nanoseconds, in a zone other than UTC,
// which a store keeps as the same instant in UTC.
func pauseAt(sec int) time.Time {
	return time.Date(2026, 3, 1, 9, 30, sec, 123456789, time.FixedZone("CET", 3600))
}

// paused checks the flags and their notes, and that every SetPaused (of
// either node, of any task, changing the flag or not) moves every node's
// pause generation on, and nothing else does. A later SetPaused's note,
// by and at replace the earlier's, a resume's too.
func (s *suite) paused(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	gen := func(st taskstate.Store) int64 {
		t.Helper()
		p, err := st.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p.Pauses
	}
	seen := map[int64]bool{gen(a): true}
	set := func(st taskstate.Store, name string, p taskstate.Pause) {
		t.Helper()
		if err := st.SetPaused(ctx, name, p); err != nil {
			t.Fatal(err)
		}
		g := gen(a)
		if gb := gen(b); gb != g {
			t.Fatalf("Poll().Pauses = %d on one node, %d on the other; want the same", g, gb)
		}
		if seen[g] {
			t.Fatalf("Poll().Pauses = %d after SetPaused(%q, %+v), a generation seen before; want a new one", g, name, p)
		}
		seen[g] = true
		if err := st.RequestRun(ctx, other, time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
		if g2 := gen(st); g2 != g {
			t.Fatalf("Poll().Pauses = %d after a RequestRun, %d before; want no change", g2, g)
		}
	}
	// The longest note, of multi-byte characters, line breaks and what
	// JSON escapes, which a store keeps whole.
	long := strings.Repeat("é<&>\"\r\n", taskstate.MaxNoteLen/10) + "«ok»"
	long += strings.Repeat("x", taskstate.MaxNoteLen-len(long))
	first := taskstate.Pause{Paused: true, Note: "the bank's file is late:\r\nwait for it ⏳", By: "ops-token", At: pauseAt(1)}
	again := taskstate.Pause{Paused: true, Note: long, By: "cli", At: pauseAt(2)}
	resumed := taskstate.Pause{Paused: false, Note: "file in", By: "scheduler", At: pauseAt(3)}
	bare := taskstate.Pause{Paused: false}
	wantPause(t, a, task, taskstate.Pause{}) // never paused: the zero Pause
	set(a, task, first)
	wantPause(t, b, task, first) // the other node sees it
	wantPause(t, b, other, taskstate.Pause{})
	set(b, task, again) // idempotent, and still a new generation; its note replaces the first's
	wantPause(t, a, task, again)
	set(b, task, resumed) // a resume keeps its own note
	wantPause(t, a, task, resumed)
	set(a, task, bare) // resuming a running task is no error; nothing of the earlier note stays
	wantPause(t, b, task, bare)
	set(a, task, taskstate.Pause{Paused: true}) // a pause without a note
	wantPause(t, b, task, taskstate.Pause{Paused: true})
	wantPause(t, b, other, taskstate.Pause{})
}

// badPauses: a SetPaused whose Pause CheckPause refuses is an error
// wrapping ErrInvalid, naming the field, and changes nothing: neither the
// pause nor its generation.
func (s *suite) badPauses(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	kept := taskstate.Pause{Paused: true, Note: "kept", By: "cli", At: pauseAt(1)}
	if err := a.SetPaused(ctx, task, kept); err != nil {
		t.Fatal(err)
	}
	before, err := b.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    taskstate.Pause
		want string
	}{
		{"a note too long", taskstate.Pause{Note: strings.Repeat("x", taskstate.MaxNoteLen+1)}, "note"},
		{"a note of a control character", taskstate.Pause{Paused: true, Note: "bell\a"}, "note"},
		{"a note of a tab", taskstate.Pause{Paused: true, Note: "a\tb"}, "note"},
		{"a note of a lone carriage return", taskstate.Pause{Paused: true, Note: "over\rwrite"}, "note"},
		{"a note of invalid UTF-8", taskstate.Pause{Paused: true, Note: "bad\xff"}, "note"},
		{"a by too long", taskstate.Pause{Paused: true, By: strings.Repeat("b", taskstate.MaxScheduleNameLen+1)}, "by"},
		{"a by of a line break", taskstate.Pause{Paused: true, By: "cli\nroot"}, "by"},
		{"a by of invalid UTF-8", taskstate.Pause{By: "\xc3"}, "by"},
	} {
		err := a.SetPaused(ctx, task, c.p)
		if !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetPaused of %s: err = %v, want taskstate.ErrInvalid naming %q", c.name, err, c.want)
		}
	}
	wantPause(t, b, task, kept)
	if after, err := b.Poll(ctx); err != nil || after.Pauses != before.Pauses {
		t.Fatalf("Poll().Pauses = %d, %v after refused SetPaused calls, %d before; want no change", after.Pauses, err, before.Pauses)
	}
}

func (s *suite) requests(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || ok {
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
	reqs, err := requests(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := reqs[task]; !ok || !at.Equal(first) {
		t.Errorf("Requests()[%q] = %v, %v; want the first request's instant %v", task, at, ok, first)
	}
	if at, ok := reqs[other]; !ok || !at.Equal(first.Add(time.Minute)) {
		t.Errorf("Requests()[%q] = %v, %v; want %v", other, at, ok, first.Add(time.Minute))
	}
	at, ok, err := b.TakeRequest(ctx, task, "node-b")
	if err != nil || !ok || !at.Equal(first) {
		t.Fatalf("TakeRequest = %v, %v, %v; want %v, true, nil", at, ok, err, first)
	}
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || ok {
		t.Fatalf("second TakeRequest = %v, %v; want false, nil: one request is taken once", ok, err)
	}
	reqs, err = requests(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reqs[task]; ok {
		t.Errorf("Requests() after the take still lists %q", task)
	}
	if _, ok := reqs[other]; !ok {
		t.Errorf("Requests() lost %q, which nobody took", other)
	}
	if _, _, err := a.TakeRequest(ctx, other, "node-a"); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) takeRequestOnce(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	for round := range 20 {
		task := s.task(t)
		if err := a.RequestRun(ctx, task, time.Now()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var taken, winner atomic.Int32
		for i := range 8 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				_, ok, err := st.TakeRequest(ctx, task, fmt.Sprintf("node-%d", i))
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
					winner.Store(int32(i))
				}
			})
		}
		wg.Wait()
		if n := taken.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 racing TakeRequest calls got the one request, want exactly 1", round, n)
		}
		runs, err := b.Runs(ctx, task, 0)
		if err != nil {
			t.Fatal(err)
		}
		if node := fmt.Sprintf("node-%d", winner.Load()); len(runs) != 1 || runs[0].Node != node || runs[0].Outcome != taskstate.OutcomeTaken {
			t.Fatalf("round %d: runs after 8 racing takes = %+v; want the one placeholder of the winner %s", round, runs, node)
		}
	}
}

// taken returns the placeholder run that node's take of a request made at
// at adds.
func taken(at time.Time, node string) taskstate.Run {
	return taskstate.Run{Fire: at, Manual: true, Node: node, Outcome: taskstate.OutcomeTaken}
}

// wantRuns fails t unless st's runs of task are want, newest first.
func wantRuns(t *testing.T, st taskstate.Store, task string, want ...taskstate.Run) {
	t.Helper()
	runs, err := st.Runs(context.Background(), task, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok := len(runs) == len(want)
	for i := 0; ok && i < len(runs); i++ {
		ok = equal(runs[i], want[i])
	}
	if !ok {
		t.Fatalf("Runs = %s\nwant %s (newest first)", format(runs), format(want))
	}
}

func format(runs []taskstate.Run) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "\n\t{fire %s manual %v attempt %d backfill %v node %q token %d outcome %q error %q}", r.Fire.Format(time.RFC3339Nano),
			r.Manual, r.Attempt, r.Backfill, r.Node, r.Token, r.Outcome, r.Error)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// takenPlaceholder: a take adds its taker's placeholder, which the taker's
// record of the manual run replaces (the run then newest); a manual run
// with no placeholder kept, or another node's, is added beside it.
func (s *suite) takenPlaceholder(t *testing.T) {
	const keep = 5
	a, b := s.pair(t, keep)
	ctx := context.Background()
	task := s.task(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	if err := b.RequestRun(ctx, task, at); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || !ok || !got.Equal(at) {
		t.Fatalf("TakeRequest = %v, %v, %v; want %v, true, nil", got, ok, err, at)
	}
	if _, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || ok {
		t.Fatalf("second TakeRequest = %v, %v; want false, nil", ok, err)
	}
	wantRuns(t, b, task, taken(at, "node-a")) // the losing take adds nothing
	sched := run(1)
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: sched}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, a, task, sched, taken(at, "node-a"))
	manual := taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 77, Start: at.Add(time.Millisecond),
		Duration: 2 * time.Second, Outcome: "ok"}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: manual}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, task, manual, sched)

	// No placeholder kept for it: the manual run is added.
	again := manual
	again.Fire, again.Token = at.Add(time.Hour), 78
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: again}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, task, again, manual, sched)

	// A placeholder is its taker's: another node's manual run of the same
	// instant leaves it.
	third := at.Add(2 * time.Hour)
	if err := b.RequestRun(ctx, task, third); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true, nil", ok, err)
	}
	others := taskstate.Run{Fire: third, Manual: true, Node: "node-b", Token: 79, Start: third, Outcome: "error", Error: "boom"}
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: others}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, a, task, others, taken(third, "node-a"), again, manual, sched)

	// A take on a full history keeps it at most the history length long.
	if err := b.RequestRun(ctx, task, at.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true, nil", ok, err)
	}
	runs, err := a.Runs(ctx, task, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != keep || !equal(runs[0], taken(at.Add(3*time.Hour), "node-b")) {
		t.Fatalf("after a take on a full history of %d: %s\nwant %d runs, the new placeholder first", keep, format(runs), keep)
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
	return a.Fire.Equal(b.Fire) && a.Start.Equal(b.Start) && a.Manual == b.Manual && a.Attempt == b.Attempt && a.Node == b.Node && a.Backfill == b.Backfill &&
		a.Token == b.Token && a.Duration == b.Duration && a.Outcome == b.Outcome && a.Error == b.Error
}

func (s *suite) history(t *testing.T) {
	const keep = 5
	a, b := s.pair(t, keep)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	if runs, err := a.Runs(ctx, task, 0); err != nil || len(runs) != 0 {
		t.Fatalf("Runs of a task never run = %v, %v; want none", runs, err)
	}
	for i := range 8 {
		st := a
		if i%2 == 1 {
			st = b
		}
		if err := st.Record(ctx, taskstate.TaskRun{Task: task, Run: run(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(ctx, taskstate.TaskRun{Task: other, Run: run(99)}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []taskstate.Store{a, b} {
		runs, err := st.Runs(ctx, task, 0)
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
	runs, err := b.Runs(ctx, other, 0)
	if err != nil || len(runs) != 1 || !equal(runs[0], run(99)) {
		t.Errorf("Runs of another task = %+v, %v; want only its own run", runs, err)
	}
}

// historyKeep: a record's TaskRun.Keep above the store's history length
// keeps that many runs of its task, and no more than taskstate.MaxHistory;
// a take's placeholder does not shorten the history; a record without Keep
// trims it back to the store's history length.
func (s *suite) historyKeep(t *testing.T) {
	const history, keep = 5, 9
	a, b := s.pair(t, history)
	ctx := context.Background()
	task := s.task(t)
	count := func(what string, want int) {
		t.Helper()
		for _, st := range []taskstate.Store{a, b} {
			runs, err := st.Runs(ctx, task, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != want {
				t.Fatalf("%s (history %d): %d runs kept, want %d", what, history, len(runs), want)
			}
		}
	}
	for i := range 12 {
		st := []taskstate.Store{a, b}[i%2]
		if err := st.Record(ctx, taskstate.TaskRun{Task: task, Run: run(i), Keep: keep}); err != nil {
			t.Fatal(err)
		}
	}
	count("12 records with Keep 9", keep)
	if runs, err := a.Runs(ctx, task, 3); err != nil || len(runs) != 3 || !equal(runs[0], run(11)) {
		t.Fatalf("Runs(limit 3) after records with Keep = %+v, %v; want the 3 newest", runs, err)
	}
	if err := a.RequestRun(ctx, task, time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want the request", ok, err)
	}
	count("a take's placeholder after records with Keep 9", keep)
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: run(20)}); err != nil {
		t.Fatal(err)
	}
	count("a record without Keep", history)

	other := s.task(t)
	many := make([]taskstate.TaskRun, taskstate.MaxHistory+3)
	for i := range many {
		r := run(i % 60)
		r.Fire = r.Fire.Add(time.Duration(i) * time.Minute)
		many[i] = taskstate.TaskRun{Task: other, Run: r, Keep: taskstate.MaxHistory + 500}
	}
	if err := a.Record(ctx, many...); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.Runs(ctx, other, 0); err != nil || len(runs) != taskstate.MaxHistory || !runs[0].Fire.Equal(many[len(many)-1].Fire) {
		t.Fatalf("after %d records with Keep %d: %d runs kept (%v), want taskstate.MaxHistory (%d) ending with the last",
			len(many), taskstate.MaxHistory+500, len(runs), err, taskstate.MaxHistory)
	}
}

// recordMany: one Record of runs of several tasks, a manual one among them,
// adds each to its task in order and replaces the placeholder; a call with
// one bad run records none of them; a call without runs is no error.
func (s *suite) recordMany(t *testing.T) {
	const keep = 4
	a, b := s.pair(t, keep)
	ctx := context.Background()
	task, other := s.task(t), s.task(t)
	at := time.Unix(1_700_000_000, 0).UTC()
	if err := a.RequestRun(ctx, other, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.TakeRequest(ctx, other, "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v", ok, err)
	}
	manual := taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 3, Outcome: "ok"}
	var batch []taskstate.TaskRun
	for i := range keep + 1 {
		batch = append(batch, taskstate.TaskRun{Task: task, Run: run(i)})
	}
	batch = append(batch, taskstate.TaskRun{Task: other, Run: manual})
	if err := a.Record(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, task, run(4), run(3), run(2), run(1))
	wantRuns(t, b, other, manual)
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: run(9)}, taskstate.TaskRun{Task: "", Run: run(10)}); !errors.Is(err, taskstate.ErrInvalid) {
		t.Fatalf("Record with a run of no task = %v, want ErrInvalid", err)
	}
	wantRuns(t, b, task, run(4), run(3), run(2), run(1))
	if err := a.Record(ctx); err != nil {
		t.Fatalf("Record() = %v, want nil", err)
	}
}

func (s *suite) defaultHistory(t *testing.T) {
	a, _ := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	for i := range taskstate.DefaultHistory + 3 {
		if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: run(i)}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := a.Runs(ctx, task, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != taskstate.DefaultHistory || !equal(runs[0], run(taskstate.DefaultHistory+2)) {
		t.Fatalf("history 0 kept %d runs (newest %+v), want taskstate.DefaultHistory (%d) ending with the last recorded",
			len(runs), runs[0], taskstate.DefaultHistory)
	}
}

// runsLimit: Runs returns the newest runs up to its limit, all of the
// kept ones for 0.
func (s *suite) runsLimit(t *testing.T) {
	const keep = 5
	a, b := s.pair(t, keep)
	ctx := context.Background()
	task := s.task(t)
	for i := range keep + 2 {
		if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: run(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for limit, want := range map[int]int{0: keep, 1: 1, 3: 3, keep: keep, keep + 4: keep} {
		runs, err := b.Runs(ctx, task, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != want {
			t.Errorf("Runs(limit %d) = %d runs, want %d", limit, len(runs), want)
			continue
		}
		for j, r := range runs {
			if !equal(r, run(keep+1-j)) {
				t.Errorf("Runs(limit %d)[%d] = %+v, want %+v (newest first)", limit, j, r, run(keep+1-j))
			}
		}
	}
}

// errorCap: a run's Error is kept up to taskstate.MaxErrorLen bytes, a
// longer one cut by taskstate.CutError (on a rune boundary, marked).
func (s *suite) errorCap(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	long := run(1)
	long.Error = strings.Repeat("é€x", 600) // 3,600 bytes, runes of 1 to 3 bytes
	atCap := run(2)
	atCap.Error = strings.Repeat("y", taskstate.MaxErrorLen)
	for _, r := range []taskstate.Run{long, atCap} {
		if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := b.Runs(ctx, task, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("Runs = %s, want 2", format(runs))
	}
	if runs[0].Error != atCap.Error {
		t.Errorf("an error of exactly MaxErrorLen (%d) bytes came back as %d bytes, want it whole", taskstate.MaxErrorLen, len(runs[0].Error))
	}
	got := runs[1].Error
	if len(got) > taskstate.MaxErrorLen || !utf8.ValidString(got) || got != taskstate.CutError(long.Error) {
		t.Errorf("a %d-byte error came back as %d bytes (valid UTF-8: %v): %q\nwant taskstate.CutError's %q",
			len(long.Error), len(got), utf8.ValidString(got), got, taskstate.CutError(long.Error))
	}
}

func (s *suite) concurrentRecords(t *testing.T) {
	const keep, writers, each = 10, 4, 10
	a, b := s.pair(t, keep)
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
				if err := st.Record(ctx, taskstate.TaskRun{Task: task, Run: run(w*each + i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	runs, err := b.Runs(ctx, task, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A store may keep one run more per writer that raced the last records
	// (pglocks trims by its statement's snapshot, which misses the others'
	// inserts), until the next record trims them.
	if len(runs) < keep || len(runs) > keep+writers-1 {
		t.Fatalf("after %d concurrent records with history %d: %d runs kept, want %d to %d", writers*each, keep, len(runs), keep, keep+writers-1)
	}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: run(writers * each)}); err != nil {
		t.Fatal(err)
	}
	if runs, err = b.Runs(ctx, task, 0); err != nil {
		t.Fatal(err)
	}
	if len(runs) != keep {
		t.Fatalf("after %d concurrent records with history %d and one more: %d runs kept, want %d", writers*each, keep, len(runs), keep)
	}
	seen := map[uint64]bool{}
	for _, r := range runs {
		if seen[r.Token] {
			t.Errorf("run with token %d kept twice", r.Token)
		}
		seen[r.Token] = true
	}
}

// lossy returns stores whose replies the harness can lose, and skips t if
// it cannot for a store with a wire.
func (s *suite) lossy(t *testing.T) Stores {
	t.Helper()
	st := s.stores(t, 0)
	switch {
	case st.Loss == NoWire && st.LoseNextReply != nil:
		t.Fatal("taskstatetest: Stores.LoseNextReply is set and Loss is NoWire: set Loss to Retried or Failed")
	case st.Loss != NoWire && st.LoseNextReply == nil:
		t.Skipf("the harness cannot lose replies of this store (Loss %v, no LoseNextReply)", st.Loss)
	}
	return st
}

// lose makes call with its reply lost and then run before A's client sees
// the loss (for NoWire: call, then then), and checks what the call
// returned, as st.Loss says: nil, or an error for Failed. then runs on
// another goroutine for some harnesses: it reports with t.Error, never
// t.Fatal.
func lose(t *testing.T, st Stores, op string, call func() error, then func()) {
	t.Helper()
	var ran atomic.Bool
	wrapped := func() {
		ran.Store(true)
		then()
	}
	var err error
	if st.Loss == NoWire {
		err = call()
		wrapped()
	} else {
		st.LoseNextReply(wrapped)
		err = call()
	}
	if !ran.Load() {
		t.Fatalf("%s: the harness lost no reply (its then never ran): the case tests nothing", op)
	}
	if t.Failed() {
		t.FailNow() // what then saw is the cause of what follows
	}
	switch {
	case st.Loss == Failed && err == nil:
		t.Fatalf("%s whose reply was lost returned nil; want an error (Loss Failed: the client does not resend it)", op)
	case st.Loss != Failed && err != nil:
		t.Fatalf("%s whose reply was lost (Loss %v) = %v, want nil", op, st.Loss, err)
	}
}

// lostSetPaused: a SetPaused whose reply was lost, another node's opposite
// SetPaused after it, then the retry: the other node's, the later, holds,
// with its note. A retry that set the flag again would undo it: a reader
// would have seen the flag change three times for two calls, and the
// earlier call's note in place of the later's.
func (s *suite) lostSetPaused(t *testing.T) {
	for _, paused := range []bool{true, false} {
		t.Run(fmt.Sprintf("paused=%v", paused), func(t *testing.T) {
			st := s.lossy(t)
			a, b := st.A, st.B
			ctx := context.Background()
			task := s.task(t)
			lost := taskstate.Pause{Paused: paused, Note: "the lost call's", By: "node-a", At: pauseAt(2)}
			later := taskstate.Pause{Paused: !paused, Note: "the later call's", By: "node-b", At: pauseAt(3)}
			if err := b.SetPaused(ctx, task, taskstate.Pause{Paused: !paused, Note: "before", By: "node-b", At: pauseAt(1)}); err != nil {
				t.Fatal(err)
			}
			lose(t, st, "SetPaused", func() error { return a.SetPaused(ctx, task, lost) }, func() {
				if got, err := b.Paused(ctx, task); err != nil || !samePause(got, lost) {
					t.Errorf("another node's Paused after the lost reply = %+v, %v; want %+v: the call ran", got, err, lost)
				}
				if err := b.SetPaused(ctx, task, later); err != nil {
					t.Error(err)
				}
			})
			for _, x := range []taskstate.Store{a, b} {
				if got, err := x.Paused(ctx, task); err != nil || !samePause(got, later) {
					t.Fatalf("Paused after the lost SetPaused(%+v) and another node's later SetPaused(%+v) = %+v, %v; want the later: "+
						"the call took effect twice", lost, later, got, err)
				}
			}
		})
	}
}

// lostRequestRun: a RequestRun whose reply was lost, its request taken and
// run by another node, then the retry: no second request. One call, at
// most one run.
func (s *suite) lostRequestRun(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	done := taskstate.Run{Fire: at, Manual: true, Node: "node-b", Token: 3, Start: at, Duration: time.Second, Outcome: "ok"}
	lose(t, st, "RequestRun", func() error { return a.RequestRun(ctx, task, at) }, func() {
		if got, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || !ok || !got.Equal(at) {
			t.Errorf("another node's TakeRequest after the lost reply = %v, %v, %v; want %v, true, nil: the call ran", got, ok, err, at)
		}
		if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: done}); err != nil {
			t.Error(err)
		}
	})
	reqs, err := requests(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := reqs[task]; ok {
		t.Fatalf("after the lost RequestRun, its request taken and run: a request at %v is pending; want none: "+
			"one RequestRun call must make at most one run", got)
	}
	if _, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || ok {
		t.Fatalf("TakeRequest after = %v, %v; want false, nil", ok, err)
	}
	wantRuns(t, a, task, done)
}

// lostTakeRequest: a TakeRequest whose reply was lost, another node's
// request after it, then the retry: the call answers the request its first
// attempt took, and the later request stays pending.
func (s *suite) lostTakeRequest(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	first := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	later := first.Add(time.Minute)
	if err := b.RequestRun(ctx, task, first); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var ok bool
	lose(t, st, "TakeRequest", func() error {
		var err error
		at, ok, err = a.TakeRequest(ctx, task, "node-a")
		return err
	}, func() {
		if _, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || ok {
			t.Errorf("another node's TakeRequest after the lost reply = %v, %v; want false, nil: the call took the request", ok, err)
		}
		if err := b.RequestRun(ctx, task, later); err != nil {
			t.Error(err)
		}
	})
	if st.Loss != Failed && (!ok || !at.Equal(first)) {
		t.Fatalf("TakeRequest whose reply was lost = %v, %v; want %v, true: the request its first attempt took, "+
			"not the one made since (%v)", at, ok, first, later)
	}
	if got, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || !ok || !got.Equal(later) {
		t.Fatalf("another node's TakeRequest after the retry = %v, %v, %v; want the later request %v, left pending", got, ok, err, later)
	}
	wantRuns(t, a, task, taken(later, "node-b"), taken(first, "node-a"))
}

// lostTakeRequestThenAnotherTake: a TakeRequest whose reply was lost, then
// another node's request and take, then the retry: the call still answers
// the request its first attempt took, though the task's last take is
// another's.
func (s *suite) lostTakeRequestThenAnotherTake(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	first := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	later := first.Add(time.Minute)
	if err := b.RequestRun(ctx, task, first); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var ok bool
	lose(t, st, "TakeRequest", func() error {
		var err error
		at, ok, err = a.TakeRequest(ctx, task, "node-a")
		return err
	}, func() {
		if err := b.RequestRun(ctx, task, later); err != nil {
			t.Error(err)
		}
		if got, ok, err := b.TakeRequest(ctx, task, "node-b"); err != nil || !ok || !got.Equal(later) {
			t.Errorf("another node's TakeRequest = %v, %v, %v; want the later request %v", got, ok, err, later)
		}
	})
	if st.Loss != Failed && (!ok || !at.Equal(first)) {
		t.Fatalf("TakeRequest whose reply was lost = %v, %v; want %v, true: the request its first attempt took", at, ok, first)
	}
	reqs, err := requests(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := reqs[task]; ok {
		t.Fatalf("a request at %v is pending after both takes, want none", got)
	}
	wantRuns(t, a, task, taken(later, "node-b"), taken(first, "node-a"))
}

// lostRecord: a Record whose reply was lost, another node's Record after
// it, then the resend (the client's for Retried, the caller's for Failed,
// with the same ID, as the scheduler's recorder does): each run is kept
// once, in the order they were made.
func (s *suite) lostRecord(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	mine, theirs := taskstate.TaskRun{Task: task, ID: s.recordID(), Run: run(1)}, run(2)
	lose(t, st, "Record", func() error { return a.Record(ctx, mine) }, func() {
		if err := b.Record(ctx, taskstate.TaskRun{Task: task, ID: s.recordID(), Run: theirs}); err != nil {
			t.Error(err)
		}
	})
	resend(t, st, "Record", func() error { return a.Record(ctx, mine) })
	wantRuns(t, b, task, theirs, mine.Run)
}

// lostRecordManual: the record of a manual run whose reply was lost,
// another node's Record after it, then the resend: the run replaced its
// placeholder once and is kept once.
func (s *suite) lostRecordManual(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := b.RequestRun(ctx, task, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true, nil", ok, err)
	}
	manual := taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 12, Start: at, Duration: time.Second, Outcome: "ok"}
	theirs := run(2)
	rec := taskstate.TaskRun{Task: task, ID: s.recordID(), Run: manual}
	lose(t, st, "Record", func() error { return a.Record(ctx, rec) }, func() {
		if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: theirs}); err != nil {
			t.Error(err)
		}
	})
	resend(t, st, "Record", func() error { return a.Record(ctx, rec) })
	wantRuns(t, b, task, theirs, manual)
}

// retry returns a retry of attempt n of one fire, due a minute after it.
func retry(n int) taskstate.Retry {
	fire := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	return taskstate.Retry{Fire: fire, Attempt: n, Due: fire.Add(time.Minute)}
}

// takenRetry returns the placeholder run that node's take of r adds.
func takenRetry(r taskstate.Retry, node string) taskstate.Run {
	return taskstate.Run{Fire: r.Fire, Manual: r.Manual, Attempt: r.Attempt, Node: node, Outcome: taskstate.OutcomeTaken}
}

// pendingRetry returns st's pending retry of task, from Poll.
func pendingRetry(t *testing.T, st taskstate.Store, task string) (taskstate.Retry, bool) {
	t.Helper()
	p, err := st.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r, ok := p.Retries[task]
	return r, ok
}

// sameRetry reports whether a and b are the same retry, field by field.
func sameRetry(a, b taskstate.Retry) bool {
	return a.Fire.Equal(b.Fire) && a.Manual == b.Manual && a.Attempt == b.Attempt && a.Due.Equal(b.Due)
}

// retries: a failed run's record leaves its retry pending, which every
// node polls; a take of another attempt or fire takes nothing; the take
// adds the taker's placeholder, which the attempt's record replaces, and
// that record's retry is pending next; a later record's retry replaces a
// pending one; a retry of a manual run keeps Manual.
func (s *suite) retries(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	if _, ok := pendingRetry(t, b, task); ok {
		t.Fatal("a retry is pending before any record")
	}
	second := retry(2)
	failed := taskstate.Run{Fire: second.Fire, Node: "node-a", Token: 5, Start: second.Fire, Duration: time.Second,
		Outcome: "error", Error: "boom"}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: failed, Retry: &second}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []taskstate.Store{a, b} {
		if got, ok := pendingRetry(t, st, task); !ok || !sameRetry(got, second) {
			t.Fatalf("pending retry after the record = %+v, %v; want %+v", got, ok, second)
		}
	}
	wantRuns(t, b, task, failed)
	third := retry(3)
	otherFire := second
	otherFire.Fire = otherFire.Fire.Add(time.Hour)
	for _, r := range []taskstate.Retry{third, otherFire} {
		if ok, err := b.TakeRetry(ctx, task, "node-b", r); err != nil || ok {
			t.Fatalf("TakeRetry of %+v while %+v is pending = %v, %v; want false, nil", r, second, ok, err)
		}
	}
	if ok, err := b.TakeRetry(ctx, task, "node-b", second); err != nil || !ok {
		t.Fatalf("TakeRetry = %v, %v; want true, nil", ok, err)
	}
	if ok, err := a.TakeRetry(ctx, task, "node-a", second); err != nil || ok {
		t.Fatalf("second TakeRetry = %v, %v; want false, nil", ok, err)
	}
	if got, ok := pendingRetry(t, a, task); ok {
		t.Fatalf("a retry %+v is pending after its take, want none", got)
	}
	wantRuns(t, a, task, takenRetry(second, "node-b"), failed)
	again := taskstate.Run{Fire: second.Fire, Attempt: 2, Node: "node-b", Token: 6, Start: second.Due, Duration: time.Second,
		Outcome: "panic", Error: "oops"}
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: again, Retry: &third}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, a, task, again, failed)
	if got, ok := pendingRetry(t, a, task); !ok || !sameRetry(got, third) {
		t.Fatalf("pending retry after attempt 2 failed = %+v, %v; want %+v", got, ok, third)
	}

	// A later fire's failure replaces the pending retry.
	later := taskstate.Retry{Fire: second.Fire.Add(time.Hour), Manual: true, Attempt: 2, Due: second.Fire.Add(61 * time.Minute)}
	manual := taskstate.Run{Fire: later.Fire, Manual: true, Node: "node-a", Token: 7, Start: later.Fire, Outcome: "error", Error: "again"}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: manual, Retry: &later}); err != nil {
		t.Fatal(err)
	}
	if got, ok := pendingRetry(t, b, task); !ok || !sameRetry(got, later) {
		t.Fatalf("pending retry after a later fire failed = %+v, %v; want it, %+v, in place of attempt 3", got, ok, later)
	}
	if ok, err := a.TakeRetry(ctx, task, "node-a", third); err != nil || ok {
		t.Fatalf("TakeRetry of the replaced attempt 3 = %v, %v; want false, nil", ok, err)
	}
	// A retry of an earlier fire than the pending one's does not replace it.
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: run(4), Retry: &third}); err != nil {
		t.Fatal(err)
	}
	if got, ok := pendingRetry(t, a, task); !ok || !sameRetry(got, later) {
		t.Fatalf("pending retry after a record of an earlier fire's retry = %+v, %v; want the later fire's %+v", got, ok, later)
	}
	if ok, err := a.TakeRetry(ctx, task, "node-a", later); err != nil || !ok {
		t.Fatalf("TakeRetry of the manual run's retry = %v, %v; want true, nil", ok, err)
	}
	wantRuns(t, b, task, takenRetry(later, "node-a"), run(4), manual, again, failed)
	ok := manual
	ok.Attempt, ok.Start, ok.Outcome, ok.Error, ok.Token = 2, later.Due, "ok", "", 8
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: ok}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, task, ok, run(4), manual, again, failed)
	if got, pending := pendingRetry(t, b, task); pending {
		t.Fatalf("a retry %+v is pending after the last attempt succeeded, want none", got)
	}
}

// takeRetryOnce: of 8 racing takers of one retry, exactly one takes it,
// and only its placeholder is added.
func (s *suite) takeRetryOnce(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	for round := range 20 {
		task := s.task(t)
		r := retry(2 + round)
		if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: run(1), Retry: &r}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var took, winner atomic.Int32
		for i := range 8 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				ok, err := st.TakeRetry(ctx, task, fmt.Sprintf("node-%d", i), r)
				if err != nil {
					t.Error(err)
				}
				if ok {
					took.Add(1)
					winner.Store(int32(i))
				}
			})
		}
		wg.Wait()
		if n := took.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 racing TakeRetry calls got the one retry, want exactly 1", round, n)
		}
		wantRuns(t, b, task, takenRetry(r, fmt.Sprintf("node-%d", winner.Load())), run(1))
	}
}

// lostTakeRetry: a TakeRetry whose reply was lost, another node's take of
// it and a later failure's record (a new retry of the same attempt number,
// of a later fire) after it, then the resend: the call answers what its
// first attempt did, and the later retry stays pending.
func (s *suite) lostTakeRetry(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	first := retry(2)
	later := first
	later.Fire, later.Due = first.Fire.Add(time.Hour), first.Due.Add(time.Hour)
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: run(1), Retry: &first}); err != nil {
		t.Fatal(err)
	}
	var ok bool
	lose(t, st, "TakeRetry", func() error {
		var err error
		ok, err = a.TakeRetry(ctx, task, "node-a", first)
		return err
	}, func() {
		if ok, err := b.TakeRetry(ctx, task, "node-b", first); err != nil || ok {
			t.Errorf("another node's TakeRetry after the lost reply = %v, %v; want false, nil: the call took the retry", ok, err)
		}
		if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: run(2), Retry: &later}); err != nil {
			t.Error(err)
		}
	})
	if st.Loss != Failed && !ok {
		t.Fatal("TakeRetry whose reply was lost = false; want true: its first attempt took the retry")
	}
	if got, ok := pendingRetry(t, b, task); !ok || !sameRetry(got, later) {
		t.Fatalf("pending retry after the resend = %+v, %v; want the later one %+v", got, ok, later)
	}
	wantRuns(t, a, task, run(2), takenRetry(first, "node-a"), run(1))
}

// lostRecordRetry: the record of a failed run whose reply was lost, the
// retry it left taken by another node, then the resend: the retry is not
// left pending again, so the attempt runs at most once.
func (s *suite) lostRecordRetry(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	task := s.task(t)
	r := retry(2)
	failed := run(1)
	lose(t, st, "Record", func() error { return a.Record(ctx, taskstate.TaskRun{Task: task, Run: failed, Retry: &r}) }, func() {
		if ok, err := b.TakeRetry(ctx, task, "node-b", r); err != nil || !ok {
			t.Errorf("another node's TakeRetry after the lost reply = %v, %v; want true, nil: the record left the retry", ok, err)
		}
	})
	if got, ok := pendingRetry(t, b, task); ok {
		t.Fatalf("after the resend a retry %+v is pending again; want none: attempt %d would run twice", got, r.Attempt)
	}
	wantRuns(t, a, task, takenRetry(r, "node-b"), failed)
}

// retryResent: the failure's record sent again after its retry was taken
// (a caller's resend after a lost reply, past any nonce's life, as a new
// call) does not make the retry pending again, so the attempt runs once;
// the resend of an earlier attempt's record after a later one failed
// does not bring the earlier attempt back either.
func (s *suite) retryResent(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	second, third := retry(2), retry(3)
	failed := run(1)
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: failed, Retry: &second}); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TakeRetry(ctx, task, "node-b", second); err != nil || !ok {
		t.Fatalf("TakeRetry = %v, %v; want true, nil", ok, err)
	}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: failed, Retry: &second}); err != nil {
		t.Fatal(err)
	}
	if got, ok := pendingRetry(t, b, task); ok {
		t.Fatalf("after the failure's record was sent again, retry %+v is pending again; want none: it was taken", got)
	}
	if ok, err := b.TakeRetry(ctx, task, "node-b", second); err != nil || ok {
		t.Fatalf("TakeRetry of attempt 2 after the resend = %v, %v; want false: attempt 2 runs once", ok, err)
	}
	if err := b.Record(ctx, taskstate.TaskRun{Task: task, Run: run(2), Retry: &third}); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, taskstate.TaskRun{Task: task, Run: failed, Retry: &second}); err != nil {
		t.Fatal(err)
	}
	if got, ok := pendingRetry(t, a, task); !ok || !sameRetry(got, third) {
		t.Fatalf("pending retry after attempt 2's failure and a resend of attempt 1's = %+v, %v; want attempt 3, %+v", got, ok, third)
	}
}
