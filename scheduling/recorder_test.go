package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// outageStore is a task state whose backend can be taken down: while down,
// every call fails as a dead server's would.
type outageStore struct {
	taskstate.Store
	down atomic.Bool
}

func (o *outageStore) err() error {
	if o.down.Load() {
		return errStoreDown
	}
	return nil
}

func (o *outageStore) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	if err := o.err(); err != nil {
		return taskstate.Pause{}, err
	}
	return o.Store.Paused(ctx, task)
}

func (o *outageStore) Poll(ctx context.Context) (taskstate.Poll, error) {
	if err := o.err(); err != nil {
		return taskstate.Poll{}, err
	}
	return o.Store.Poll(ctx)
}

func (o *outageStore) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	if err := o.err(); err != nil {
		return err
	}
	return o.Store.Record(ctx, runs...)
}

// outageNode is node n1 on a fake clock, with task "report" every minute on
// lock k, and a task state that the test takes down and brings back.
type outageNode struct {
	fc    *clockwork.FakeClock
	inner *taskstate.InProcess
	store *outageStore
	logs  *logRecorder
	s     *Scheduler
	x     exclusive
}

func startOutageNode(t *testing.T) *outageNode {
	t.Helper()
	n := &outageNode{fc: clockwork.NewFakeClockAt(epoch), logs: &logRecorder{}}
	n.inner, _ = taskstate.NewInProcess(0)
	n.store = &outageStore{Store: n.inner}
	n.s = New(Config{Clock: n.fc, Logger: slog.New(n.logs), State: n.store, Node: "n1",
		Driver: locks.NewInProcessDriver(locks.WithClock(n.fc))})
	mustAdd(t, n.s, NewTask(n.x.task, Cron("@every 1m"), Lock("k"), Name("report")))
	mustStart(t, n.s)
	return n
}

// The fires that fail while the store is down reach the shared history once
// it is back, in order, with the error that failed them; the node logs the
// outage once, and its end.
func TestFiresFailedDuringAnOutageAreRecordedAfterIt(t *testing.T) {
	n := startOutageNode(t)
	fc, inner, store, logs, s, x := n.fc, n.inner, n.store, n.logs, n.s, &n.x
	defer s.Stop(context.Background())
	step(t, fc, 2*time.Minute, time.Second, s) // runs at 00:01, 00:02
	store.down.Store(true)
	step(t, fc, 3*time.Minute, time.Second, s) // 00:03 to 00:05 fail
	if n := x.count(); n > 3 {
		t.Fatalf("%d runs, want at most 3: the flag was unreadable from 00:03", n)
	}
	if runs, _ := inner.Runs(context.Background(), "report", 0); len(runs) != x.count() {
		t.Fatalf("history during the outage = %+v, want only the runs", runs)
	}
	store.down.Store(false)
	step(t, fc, 2*time.Minute, time.Second, s) // 00:06, 00:07 run
	runs, err := inner.Runs(context.Background(), "report", 0)
	if err != nil {
		t.Fatal(err)
	}
	byFire := map[time.Time]taskstate.Run{}
	for _, r := range runs {
		if _, dup := byFire[r.Fire]; dup {
			t.Errorf("fire %v recorded twice: %+v", r.Fire, runs)
		}
		byFire[r.Fire] = r
	}
	failed := 0
	for m := 1; m <= 7; m++ {
		r, ok := byFire[epoch.Add(time.Duration(m)*time.Minute)]
		switch {
		case !ok:
			t.Errorf("fire 00:0%d not in the history %+v", m, runs)
		case r.Outcome == string(OutcomeLockFailed):
			failed++
			if !strings.Contains(r.Error, errStoreDown.Error()) || r.Node != "n1" {
				t.Errorf("failed fire %+v, want the store's error and the node", r)
			}
		case r.Outcome != string(OutcomeOK):
			t.Errorf("fire %+v, want ok or failed", r)
		}
	}
	if failed != 7-x.count() || failed < 2 {
		t.Errorf("%d failed fires recorded, %d runs; want every fire of the outage (00:03 to 00:05, the first perhaps run on the flag cached before it) failed", failed, x.count())
	}
	if n := len(logs.find("fires not recorded in the shared history")); n != 1 {
		t.Errorf("%d lines about the refused records, want 1 for the outage", n)
	}
	if n := len(logs.find("fires recorded in the shared history again")); n != 1 {
		t.Errorf("%d lines about the records going through again, want 1", n)
	}
}

// A backlog beyond maxBacklog drops its oldest records, counts them and
// says so.
func TestFullBacklogDropsTheOldest(t *testing.T) {
	logs := &logRecorder{}
	s := New(Config{Clock: clockwork.NewFakeClockAt(epoch), Logger: slog.New(logs)})
	batch := make([]taskstate.TaskRun, maxBacklog)
	for i := range batch {
		batch[i] = taskstate.TaskRun{Task: fmt.Sprint(i), Run: taskstate.Run{Fire: epoch.Add(time.Duration(i))}}
	}
	s.records.pending = []taskstate.TaskRun{{Task: "newer"}}
	s.requeue(batch, errStoreDown)
	if n := s.backlog(); n != maxBacklog {
		t.Fatalf("backlog %d, want %d", n, maxBacklog)
	}
	if got := s.records.pending; got[0].Task != "1" || got[len(got)-1].Task != "newer" {
		t.Errorf("backlog runs from %q to %q, want the oldest dropped and the newest kept", got[0].Task, got[len(got)-1].Task)
	}
	if s.records.dropped != 1 || len(logs.find("fire records dropped")) != 1 {
		t.Errorf("dropped %d, logged %d times; want 1 and 1", s.records.dropped, len(logs.find("fire records dropped")))
	}
}

// Stop records what the store refused when the store is back by then,
// even with no poll since to say so; with the store still down, it says
// how many records are lost.
func TestStopRecordsTheBacklog(t *testing.T) {
	for _, back := range []bool{true, false} {
		n := startOutageNode(t)
		fc, inner, store, logs, s := n.fc, n.inner, n.store, n.logs, n.s
		store.down.Store(true)
		step(t, fc, 3*time.Minute, time.Second, s)
		kept := s.backlog()
		if kept == 0 {
			t.Fatal("no record kept while the store was down")
		}
		store.down.Store(!back)
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		runs, _ := inner.Runs(context.Background(), "report", 0)
		switch {
		case back && len(runs) != kept:
			t.Errorf("store back at stop: %d records in the history, want the %d kept", len(runs), kept)
		case !back && (len(runs) != 0 || len(logs.find("fire records lost at stop")) != 1):
			t.Errorf("store down at stop: %d records, %d lines; want none recorded and the loss said once", len(runs), len(logs.find("fire records lost at stop")))
		}
	}
}
