package scheduling_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// A dead owner's fires are late, not lost: the node that takes over a task
// from a member that died runs, once each and oldest first, the instants
// that fell due between the death and the takeover, then the task's own
// fires; no instant runs twice across the cluster, and the audit finds
// none missed. Killed while idle, the late instants run at the takeover;
// killed during a run, holding the lease, the instant it was running is
// not run again (its claim refuses it), and the instants of its lease run
// once the lease lapses. With runs of 300 ms, the fires due while the
// late ones run join them and run too (none skipped as still running).
func TestDeadOwnerFiresRunLate(t *testing.T) {
	for _, c := range []struct {
		name   string
		during bool
		work   time.Duration
	}{{"idle", false, 0}, {"during a run", true, 0}, {"idle, runs of 300ms", false, 300 * time.Millisecond}} {
		t.Run("killed "+c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { deadOwnerFiresRunLate(t, c.during, c.work) })
		})
	}
}

// deadOwnerFiresRunLate is TestDeadOwnerFiresRunLate, the owner killed
// during a run (holding its lease) or between runs, each run lasting work.
func deadOwnerFiresRunLate(t *testing.T, during bool, work time.Duration) {
	const ttl = 6 * time.Second // heartbeats of 1s: four of them within the TTL
	var slow atomic.Bool
	task := func() []scheduling.Task {
		return []scheduling.Task{scheduling.NewTask(func(ctx context.Context) error {
			if slow.CompareAndSwap(true, false) {
				select { // the run the owner dies in: it holds its lease until the TTL
				case <-ctx.Done():
				case <-time.After(30 * time.Second):
				}
			}
			time.Sleep(work)
			return nil
		}, scheduling.Name("late"), scheduling.Cron("@every 1s"), scheduling.Lock("late"), scheduling.LockTTL(ttl))}
	}
	c := newDerivedCluster(t, task)
	time.Sleep(5 * time.Second) // the views settle
	owner := c.lastRunBy("late")
	if owner == "" {
		t.Fatal("late never ran")
	}
	// Just after a fire: the next, X, is the one the owner dies in or
	// after.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 100*time.Millisecond)))
	x := time.Now().Truncate(time.Second).Add(time.Second)
	slow.Store(during)
	time.Sleep(time.Until(x.Add(600 * time.Millisecond))) // after the heartbeats at .5: the longest detection
	c.kill(owner)
	// The audit's horizon is a lock TTL and a minute behind now: then it
	// judges every instant up to the death and past.
	time.Sleep(90 * time.Second)
	end := time.Now().Truncate(time.Second)
	var live *scheduling.Scheduler
	for _, s := range c.nodes {
		live = s
	}
	a, err := live.Audit(context.Background(), "late")
	c.stopAll() // checks schedulingtest.AtMostOnce
	if err != nil {
		t.Fatal(err)
	}

	var rs []*schedulingtest.Recorder
	for _, r := range c.recs {
		rs = append(rs, r)
	}
	runs := schedulingtest.Runs(rs...)
	for p := x.Add(-2 * time.Second); !p.After(end.Add(-2 * time.Second)); p = p.Add(time.Second) {
		if n := runs[schedulingtest.Key("late", p)]; n != 1 {
			t.Errorf("the fire of %v (X%+v) ran %d times, want once", p, p.Sub(x), n)
		}
	}
	var late []scheduling.Event // the fires after X, in the order they started
	for name, r := range c.recs {
		for _, e := range r.Started() {
			if e.Task != "late" || !e.Fire.After(x) || e.Fire.After(x.Add(15*time.Second)) {
				continue
			}
			if name == owner {
				t.Errorf("the dead owner %s ran the fire of X%+v", owner, e.Fire.Sub(x))
			}
			late = append(late, e)
		}
	}
	slices.SortStableFunc(late, func(a, b scheduling.Event) int { return a.Start.Compare(b.Start) })
	var order []string
	var lateRuns int
	for i, e := range late {
		order = append(order, fmt.Sprintf("X%+v@%v", e.Fire.Sub(x), e.Start.Sub(x)))
		if i > 0 && !e.Fire.After(late[i-1].Fire) {
			t.Errorf("the fire of X%+v started after that of X%+v, want oldest first", e.Fire.Sub(x), late[i-1].Fire.Sub(x))
		}
		if during && e.Start.Before(x.Add(ttl)) {
			t.Errorf("the fire of X%+v started at X%+v, within the dead owner's lease (until X+%v)", e.Fire.Sub(x), e.Start.Sub(x), ttl)
		}
		if e.Lateness > 100*time.Millisecond {
			lateRuns++
		}
		if bound := ttl + 2*time.Second; e.Lateness > bound {
			t.Errorf("the fire of X%+v ran %v late, want within %v (the lock TTL and two heartbeats)", e.Fire.Sub(x), e.Lateness, bound)
		}
	}
	if lateRuns < 3 {
		t.Errorf("%d fires after the death ran late, want the three or more between the death and the takeover (%v)", lateRuns, order)
	}
	t.Logf("runs after X, fire@start: %v", order)
	missed := a.Missed
	for _, f := range a.Fires {
		// The run the owner died in has no record (it never ended): the
		// audit may judge it missed (Scheduler.Audit: a record a node died
		// with is lost), though it ran, once, on the dead owner.
		if during && f.Fire.Equal(x) && f.Status == scheduling.FireMissed {
			missed--
		}
	}
	if missed != 0 {
		t.Errorf("the audit finds %d fires missed (the newest %v, X%+v), want none", missed, a.LastMissed, a.LastMissed.Sub(x))
	}
	for _, f := range a.Fires {
		if f.Fire.After(x) && f.Fire.Before(x.Add(7*time.Second)) {
			t.Logf("audit X%+v: %s %s %s", f.Fire.Sub(x), f.Status, f.Outcome, f.Node)
		}
	}
	if a.Ran == 0 {
		t.Errorf("the audit finds no fire ran: %+v", a)
	}
}
