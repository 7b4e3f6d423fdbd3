package taskstatetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ndigo/ndigo/taskstate"
)

// recordID returns a record ID (taskstate.TaskRun.ID) that no other record
// of this run of the suite has, as the scheduler's recorder makes them.
func (s *suite) recordID() string {
	return fmt.Sprintf("suite.%d", s.n.Add(1))
}

// resend sends a call again after a lost reply, as a caller does when the
// call failed (Loss Failed: the scheduler's recorder sends a failed batch
// again, with the same IDs); with a client that resends it itself, or no
// wire, the call did not fail and is not sent again. The resend must
// succeed.
func resend(t *testing.T, st Stores, op string, call func() error) {
	t.Helper()
	if st.Loss != Failed {
		return
	}
	if err := call(); err != nil {
		t.Fatalf("%s sent again after its lost reply: %v", op, err)
	}
}

// manyTasks is how many tasks the cases of a large Record write: more than
// one etcd transaction holds (etcdlocks splits a Record past 128 ops, five
// for a task of one run), so that a store that splits a Record splits
// this one.
const manyTasks = 60

// batch returns a Record of one run, with its own ID, of each of n new
// tasks.
func (s *suite) batch(t *testing.T, n int) []taskstate.TaskRun {
	out := make([]taskstate.TaskRun, n)
	for i := range out {
		out[i] = taskstate.TaskRun{Task: s.task(t), ID: s.recordID(), Run: run(i + 1)}
	}
	return out
}

// lostRecordMany: a Record of 60 tasks whose reply was lost (a store that
// splits it may have committed only its first part), another node's record
// of the first task after it, then the resend: each run is kept once, and
// the first task's runs are in the order they were made.
func (s *suite) lostRecordMany(t *testing.T) {
	st := s.lossy(t)
	a, b := st.A, st.B
	ctx := context.Background()
	runs := s.batch(t, manyTasks)
	theirs := taskstate.TaskRun{Task: runs[0].Task, ID: s.recordID(), Run: run(100)}
	lose(t, st, "Record", func() error { return a.Record(ctx, runs...) }, func() {
		if err := b.Record(ctx, theirs); err != nil {
			t.Error(err)
		}
	})
	resend(t, st, "Record", func() error { return a.Record(ctx, runs...) })
	wantRuns(t, b, runs[0].Task, theirs.Run, runs[0].Run)
	for _, r := range runs[1:] {
		wantRuns(t, b, r.Task, r.Run)
	}
}

// recordResent: a Record of 60 tasks sent again (a caller's resend after a
// failed call, whatever the store's nonces remember), another node's
// record of the first task between the two, records each run once.
func (s *suite) recordResent(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	runs := s.batch(t, manyTasks)
	// Two runs of the last task in the call, in order.
	second := taskstate.TaskRun{Task: runs[len(runs)-1].Task, ID: s.recordID(), Run: run(200)}
	runs = append(runs, second)
	if err := a.Record(ctx, runs...); err != nil {
		t.Fatal(err)
	}
	theirs := taskstate.TaskRun{Task: runs[0].Task, ID: s.recordID(), Run: run(100)}
	if err := b.Record(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, runs...); err != nil {
		t.Fatalf("Record sent again: %v", err)
	}
	wantRuns(t, b, runs[0].Task, theirs.Run, runs[0].Run)
	for _, r := range runs[1 : manyTasks-1] {
		wantRuns(t, b, r.Task, r.Run)
	}
	wantRuns(t, b, second.Task, second.Run, runs[manyTasks-1].Run)
}

// recordResentAfterLaterRecords: a record sent again after later records
// of its task, by either node, is not kept twice nor moved up: the history
// stays in the order the runs were made. A manual run's record sent again
// leaves the placeholder of a later take of the same instant in place.
func (s *suite) recordResentAfterLaterRecords(t *testing.T) {
	a, b := s.pair(t, 0)
	ctx := context.Background()
	task := s.task(t)
	mine := taskstate.TaskRun{Task: task, ID: s.recordID(), Run: run(1)}
	if err := a.Record(ctx, mine); err != nil {
		t.Fatal(err)
	}
	later := []taskstate.TaskRun{{Task: task, ID: s.recordID(), Run: run(2)}, {Task: task, ID: s.recordID(), Run: run(3)}}
	if err := b.Record(ctx, later[0]); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, later[1]); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Record(ctx, mine); err != nil {
			t.Fatalf("Record sent again: %v", err)
		}
	}
	wantRuns(t, b, task, run(3), run(2), run(1))

	// A manual run, its record sent again once the same instant was
	// requested and taken again by the same node.
	at := run(4).Fire
	if err := b.RequestRun(ctx, task, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || !ok {
		t.Fatalf("TakeRequest = %v, %v; want true, nil", ok, err)
	}
	manual := taskstate.TaskRun{Task: task, ID: s.recordID(),
		Run: taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 40, Start: at, Outcome: "ok"}}
	if err := a.Record(ctx, manual); err != nil {
		t.Fatal(err)
	}
	if err := b.RequestRun(ctx, task, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.TakeRequest(ctx, task, "node-a"); err != nil || !ok {
		t.Fatalf("second TakeRequest = %v, %v; want true, nil", ok, err)
	}
	if err := a.Record(ctx, manual); err != nil {
		t.Fatalf("Record of the manual run sent again: %v", err)
	}
	wantRuns(t, b, task, taken(at, "node-a"), manual.Run, run(3), run(2), run(1))
}
