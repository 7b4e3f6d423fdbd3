package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// healthOf returns s's health of task, failing the test on an error.
func healthOf(t *testing.T, s *Scheduler, task string) TaskHealth {
	t.Helper()
	h, err := s.Health(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// wantHealth checks s's health of task: its state, and its since unless
// since is zero.
func wantHealth(t *testing.T, s *Scheduler, task string, state Health, since time.Time) TaskHealth {
	t.Helper()
	h := healthOf(t, s, task)
	if h.State != state || (!since.IsZero() && !h.Since.Equal(since)) {
		t.Fatalf("at %s: health %+v, want %s since %s", s.clock.Now().Sub(epoch), h, state, since.Sub(epoch))
	}
	if state != HealthOK && h.Reason == "" {
		t.Fatalf("health %s without a reason", h.State)
	}
	return h
}

// A task whose nodes stop is ok until its first fire without a run passes
// its default grace (the lock TTL of a task that does not renew, and a
// minute), late from then, down once the third fire in a row is late, and
// ok again as soon as a node runs it.
func TestHealthOKLateDownOK(t *testing.T) {
	c := newCluster(t)
	var f fires
	tasks := func() []Task {
		return []Task{NewTask(f.task, Cron("@every 1m"), Lock("k"), LockTTL(10*time.Second), Name("a"))}
	}
	c.fc.Advance(30 * time.Second)
	c.start(1, tasks)
	a := c.nodes[0]
	c.step(3*time.Minute, time.Second) // runs at 1m, 2m, 3m
	wantHealth(t, a, "a", HealthOK, time.Time{})
	c.stop()
	grace := 70 * time.Second
	c.fc.Advance(epoch.Add(4*time.Minute + grace - time.Second).Sub(c.fc.Now()))
	wantHealth(t, a, "a", HealthOK, time.Time{})
	c.fc.Advance(time.Second)
	h := wantHealth(t, a, "a", HealthLate, epoch.Add(4*time.Minute+grace))
	if !strings.Contains(h.Reason, "00:04:00Z") {
		t.Errorf("late reason %q does not name the fire at 00:04", h.Reason)
	}
	// Still late, from the first fire late, while the second and third are.
	c.fc.Advance(epoch.Add(6*time.Minute + grace - time.Second).Sub(c.fc.Now()))
	wantHealth(t, a, "a", HealthLate, epoch.Add(4*time.Minute+grace))
	c.fc.Advance(time.Second)
	wantHealth(t, a, "a", HealthDown, epoch.Add(6*time.Minute+grace))
	c.fc.Advance(10 * time.Minute)
	wantHealth(t, a, "a", HealthDown, epoch.Add(6*time.Minute+grace))

	c.start(1, tasks)
	c.step(time.Minute, time.Second)
	wantHealth(t, c.nodes[0], "a", HealthOK, time.Time{})
	wantHealth(t, a, "a", HealthOK, time.Time{}) // every node reads the same history
}

// LateAfter and DownAfter set the grace and the span; a task that never
// ran counts from its node's start.
func TestHealthLateAfterDownAfter(t *testing.T) {
	c := newCluster(t)
	hold := make(chan struct{})
	defer close(hold)
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{NewTask(func(context.Context) error { return nil }, Cron("@every 1m"), Lock("k"), Name("a"),
			LateAfter(10*time.Second), DownAfter(2*time.Minute))}
	})
	a := c.nodes[0]
	// The lock held by a holder that records nothing: no fire starts.
	if _, err := c.driver.Acquire(context.Background(), "k", time.Hour); err != nil {
		t.Fatal(err)
	}
	c.step(epoch.Add(70*time.Second).Sub(c.fc.Now())-time.Second, time.Second)
	wantHealth(t, a, "a", HealthOK, time.Time{})
	c.step(time.Second, time.Second)
	wantHealth(t, a, "a", HealthLate, epoch.Add(70*time.Second))
	c.step(epoch.Add(3*time.Minute).Sub(c.fc.Now())-time.Second, time.Second)
	wantHealth(t, a, "a", HealthLate, epoch.Add(70*time.Second))
	c.step(time.Second, time.Second)
	wantHealth(t, a, "a", HealthDown, epoch.Add(3*time.Minute))
}

// The newest fires that ran, FailingAfter of them, all failed: failing,
// since the end of the one that made the count; a run that succeeds
// makes the task ok again. Manual runs do not count.
func TestHealthFailing(t *testing.T) {
	c := newCluster(t)
	var fail atomic.Bool
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{
			NewTask(func(context.Context) error {
				if fail.Load() {
					return errors.New("boom")
				}
				return nil
			}, Cron("@every 1m"), Lock("k"), Name("a"), FailingAfter(2)),
			NewTask(func(context.Context) error { return errors.New("once") }, Cron("@every 1m"), Lock("b"), Name("b")),
		}
	})
	a := c.nodes[0]
	c.step(time.Minute, time.Second) // 1m: ok
	wantHealth(t, a, "a", HealthOK, time.Time{})
	// The default, one failure, for b.
	wantHealth(t, a, "b", HealthFailing, epoch.Add(time.Minute))
	fail.Store(true)
	c.step(time.Minute, time.Second) // 2m: failed
	wantHealth(t, a, "a", HealthOK, time.Time{})
	c.step(time.Minute, time.Second) // 3m: failed
	h := wantHealth(t, a, "a", HealthFailing, epoch.Add(3*time.Minute))
	if !strings.Contains(h.Reason, "boom") {
		t.Errorf("failing reason %q does not give the last error", h.Reason)
	}
	c.step(time.Minute, time.Second) // 4m: failed; failing since 3m still
	wantHealth(t, a, "a", HealthFailing, epoch.Add(3*time.Minute))
	fail.Store(false)
	c.step(time.Minute, time.Second) // 5m: ok
	wantHealth(t, a, "a", HealthOK, time.Time{})
}

// A run in flight past the RunBudget makes the task overrun on the node
// running it; once it ends over budget, every node reads it from its
// record, until a run ends within the budget.
func TestHealthRunBudget(t *testing.T) {
	c := newCluster(t)
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var slow atomic.Bool
	slow.Store(true)
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{NewTask(func(ctx context.Context) error {
			if slow.Load() {
				started <- struct{}{}
				<-release
			}
			return nil
		}, Cron("@every 10m"), Lock("k"), Renew(), Name("a"), RunBudget(30*time.Second))}
	})
	a := c.nodes[0]
	step(t, c.fc, 9*time.Minute+29*time.Second, time.Second, a)
	c.fc.Advance(time.Second) // the fire at 10m starts and blocks
	<-started
	c.fc.Advance(30 * time.Second)
	wantHealth(t, a, "a", HealthOK, time.Time{})
	c.fc.Advance(time.Second)
	wantHealth(t, a, "a", HealthOverrun, epoch.Add(10*time.Minute+30*time.Second))
	c.fc.Advance(4 * time.Minute) // no fire due before 20m
	wantHealth(t, a, "a", HealthOverrun, epoch.Add(10*time.Minute+30*time.Second))
	slow.Store(false)
	close(release)
	waitIdle(t, a)
	if h := wantHealth(t, a, "a", HealthOverrun, epoch.Add(10*time.Minute+30*time.Second)); !strings.Contains(h.Reason, "took 4m31s") {
		t.Errorf("overrun reason %q, want the recorded run's duration", h.Reason)
	}
	c.step(epoch.Add(20*time.Minute+time.Second).Sub(c.fc.Now()), time.Second) // 20m runs within the budget
	wantHealth(t, a, "a", HealthOK, time.Time{})
}

// A paused task is paused, never late nor down; a completed one is
// completed; fires a calendar excludes are never late, nor down.
func TestHealthPausedCompletedExcluded(t *testing.T) {
	c := newCluster(t)
	defineCalendar(t, c, taskstate.Calendar{Name: "maintenance", CalendarRules: taskstate.CalendarRules{Windows: []string{"00:02-00:06"}}})
	var f fires
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{
			NewTask(f.task, Cron("@every 1m"), Lock("p"), Name("paused"), LateAfter(10*time.Second)),
			NewTask(f.task, Cron("@every 1m"), Lock("e"), Name("ended"), EndAt("2026-01-01T00:02:00Z"), LateAfter(10*time.Second)),
			NewTask(f.task, Cron("@every 1m"), Lock("c"), Name("cal"), Calendar("maintenance"), LateAfter(10*time.Second)),
		}
	})
	a := c.nodes[0]
	ctx := context.Background()
	c.step(time.Minute, time.Second)
	if err := a.Pause(ctx, "paused", WithNote("deploy")); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	c.stop()
	c.fc.Advance(epoch.Add(6*time.Minute + 9*time.Second).Sub(c.fc.Now()))
	h := wantHealth(t, a, "paused", HealthPaused, time.Time{})
	if !strings.Contains(h.Reason, "deploy") {
		t.Errorf("paused reason %q lacks the note", h.Reason)
	}
	wantHealth(t, a, "ended", HealthCompleted, time.Time{})
	wantHealth(t, a, "cal", HealthOK, time.Time{}) // 2m to 5m excluded, 6m in its grace
	c.fc.Advance(time.Second)
	wantHealth(t, a, "cal", HealthLate, epoch.Add(6*time.Minute+10*time.Second))
	c.fc.Advance(time.Hour)
	wantHealth(t, a, "paused", HealthPaused, time.Time{})
	wantHealth(t, a, "ended", HealthCompleted, time.Time{})
}

// ClusterTasks fills each task's health; Tasks, which reads no shared
// state, says it is unknown; Health without a store fails with
// ErrNoState.
func TestHealthInTaskInfo(t *testing.T) {
	c := newCluster(t)
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{NewTask(func(context.Context) error { return errors.New("x") }, Cron("@every 1m"), Lock("k"), Name("a"))}
	})
	c.step(time.Minute, time.Second)
	infos, err := c.nodes[0].ClusterTasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h := infos[0].Health; h.State != HealthFailing {
		t.Errorf("ClusterTasks health %+v, want failing", h)
	}
	if h := c.nodes[0].Tasks()[0].Health; h.State != HealthUnknown || h.Reason == "" {
		t.Errorf("Tasks health %+v, want unknown with a reason", h)
	}
	s := New(Config{})
	mustAdd(t, s, NewTask(func(context.Context) error { return nil }, Cron("@every 1m"), Name("a")))
	if _, err := s.Health(context.Background(), "a"); !errors.Is(err, ErrNoState) {
		t.Errorf("Health without a store: %v, want ErrNoState", err)
	}
}

// Each health option is validated, in both spec forms and on a stored
// schedule, with a problem naming the option, the value and the rule.
func TestHealthOptionValidation(t *testing.T) {
	st, _ := taskstate.NewInProcess(0)
	withState := func() *Scheduler { return New(Config{State: st}) }
	bad := []struct {
		opts       []Option
		option     string
		value, say string
		noState    bool
	}{
		{[]Option{LateAfter(0)}, "lateAfter", "0s", "must be positive", false},
		{[]Option{KeyOption("lateAfter", "-5s")}, "lateAfter", "-5s", "must be positive", false},
		{[]Option{KeyOption("lateAfter", "soon")}, "lateAfter", "soon", "", false},
		{[]Option{LateAfter(MaxHealthSpan + 1)}, "lateAfter", (MaxHealthSpan + 1).String(), "must not exceed", false},
		{[]Option{DownAfter(-time.Minute)}, "downAfter", "-1m0s", "must be positive", false},
		{[]Option{LateAfter(time.Hour), DownAfter(time.Minute)}, "downAfter", "1m0s", "must not be below lateAfter (1h0m0s)", false},
		{[]Option{KeyOption("lateAfter", "1h"), KeyOption("downAfter", "1m")}, "downAfter", "1m0s", "must not be below lateAfter", false},
		{[]Option{FailingAfter(0)}, "failingAfter", "0", "must be positive", false},
		{[]Option{KeyOption("failingAfter", "two")}, "failingAfter", "two", "must be a whole number of fires", false},
		{[]Option{FailingAfter(taskstate.MaxHistory + 1)}, "failingAfter", fmt.Sprint(taskstate.MaxHistory + 1), "must not exceed", false},
		{[]Option{RunBudget(0)}, "runBudget", "0s", "must be positive", false},
		{[]Option{MaxRunTime(time.Minute), RunBudget(time.Minute)}, "runBudget", "1m0s", "must be below maxRunTime (1m0s)", false},
		{[]Option{KeyOption("maxRunTime", "1m"), KeyOption("runBudget", "2m")}, "runBudget", "2m0s", "must be below maxRunTime", false},
		{[]Option{RunBudget(time.Minute)}, "runBudget", "1m0s", "needs a task state store", true},
		{[]Option{KeyOption("failingAfter", "3")}, "failingAfter", "3", "needs a task state store", true},
	}
	for _, c := range bad {
		s := withState()
		if c.noState {
			s = New(Config{})
		}
		err := s.Add(NewTask(noop, append([]Option{Cron("@hourly"), Name("t")}, c.opts...)...))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Option != c.option || ve.Problems[0].Value != c.value ||
			!strings.Contains(ve.Problems[0].Rule, c.say) {
			t.Errorf("%s %s: got %v, want one problem on %s = %q saying %q", c.option, c.value, err, c.option, c.value, c.say)
		}
	}
	ok := [][]Option{
		{LateAfter(time.Minute), DownAfter(time.Hour), FailingAfter(3), RunBudget(10 * time.Minute)},
		{KeyOption("lateAfter", "90s"), KeyOption("downAfter", "90s"), KeyOption("failingAfter", "1"), KeyOption("runBudget", "59s"), MaxRunTime(time.Minute)},
	}
	for _, opts := range ok {
		if err := withState().Add(NewTask(noop, append([]Option{Cron("@hourly"), Name("t")}, opts...)...)); err != nil {
			t.Errorf("valid health options rejected: %v", err)
		}
	}
	// A stored schedule takes them by key.
	s := withState()
	if err := s.Handle("report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := s.CreateSchedule(context.Background(), taskstate.Schedule{Name: "r", Handler: "report", Cron: "@daily",
		Options: map[string]string{"runBudget": "-1s"}})
	if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), `option runBudget = "-1s": must be positive`) {
		t.Errorf("stored schedule with runBudget -1s: %v", err)
	}
	err = s.CreateSchedule(context.Background(), taskstate.Schedule{Name: "r", Handler: "report", Cron: "@daily",
		Options: map[string]string{"lateAfter": "5m", "downAfter": "1h", "failingAfter": "2", "runBudget": "10m"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range s.Tasks() {
		if sp := ti.Spec; ti.Name == "r" && (sp.LateAfter != 5*time.Minute || sp.DownAfter != time.Hour || sp.FailingAfter != 2 || sp.RunBudget != 10*time.Minute) {
			t.Errorf("stored schedule's spec %+v, want its health options", sp)
		}
	}
}

// A fire that a backfill ran later, as an operator asked, is not late;
// one that a node reached late and ran is, until a fire starts on time.
func TestHealthLateStartAndBackfill(t *testing.T) {
	c := newCluster(t)
	c.fc.Advance(30 * time.Second)
	c.start(1, func() []Task {
		return []Task{NewTask(func(context.Context) error { return nil }, Cron("@every 1m"), Lock("k"), Name("a"), LateAfter(10*time.Second))}
	})
	a := c.nodes[0]
	c.step(time.Minute, time.Second) // 1m ran
	c.stop()
	record := func(r taskstate.Run) {
		t.Helper()
		r.Node, r.Outcome = "node-x", string(OutcomeOK)
		if err := c.store.Record(context.Background(), taskstate.TaskRun{Task: "a", Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	c.fc.Advance(epoch.Add(2*time.Minute + 30*time.Second).Sub(c.fc.Now()))
	wantHealth(t, a, "a", HealthLate, epoch.Add(2*time.Minute+10*time.Second))
	// A backfill runs 2m.
	record(taskstate.Run{Fire: epoch.Add(2 * time.Minute), Backfill: true, Start: c.fc.Now(), Duration: time.Second})
	wantHealth(t, a, "a", HealthOK, time.Time{})
	// 3m starts 20s late, over its 10s grace.
	c.fc.Advance(time.Minute)
	record(taskstate.Run{Fire: epoch.Add(3 * time.Minute), Start: epoch.Add(3*time.Minute + 20*time.Second), Duration: time.Second})
	h := wantHealth(t, a, "a", HealthLate, epoch.Add(3*time.Minute+10*time.Second))
	if !strings.Contains(h.Reason, "started 20s after it") {
		t.Errorf("late reason %q, want how late it started", h.Reason)
	}
	// 4m on time.
	c.fc.Advance(time.Minute)
	record(taskstate.Run{Fire: epoch.Add(4 * time.Minute), Start: epoch.Add(4 * time.Minute), Duration: time.Second})
	wantHealth(t, a, "a", HealthOK, time.Time{})
}
