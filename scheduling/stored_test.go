package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// handled records the runs of a handler: the task, fire, node and
// arguments of each.
type handled struct {
	mu   sync.Mutex
	runs []handledRun
}

type handledRun struct {
	task, node, args string
	fire             time.Time
}

func (h *handled) fn(ctx context.Context, args json.RawMessage) error {
	r, _ := RunFromContext(ctx)
	h.mu.Lock()
	h.runs = append(h.runs, handledRun{task: r.Task, node: r.Node, args: string(args), fire: r.Fire})
	h.mu.Unlock()
	return nil
}

// of returns the runs of task.
func (h *handled) of(task string) []handledRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []handledRun
	for _, r := range h.runs {
		if r.task == task {
			out = append(out, r)
		}
	}
	return out
}

// fires returns the fires of runs, checking that none ran twice.
func fireSet(t *testing.T, runs []handledRun) []time.Time {
	t.Helper()
	var out []time.Time
	for _, r := range runs {
		if slices.ContainsFunc(out, r.fire.Equal) {
			t.Fatalf("fire %v ran twice: %+v", r.fire, runs)
		}
		out = append(out, r.fire)
	}
	return out
}

// taskNames returns the names in s's registry.
func taskNames(s *Scheduler) []string {
	var out []string
	for _, ti := range s.Tasks() {
		out = append(out, ti.Name)
	}
	return out
}

func acmeReport() taskstate.Schedule {
	return taskstate.Schedule{Name: "report-acme", Handler: "tenant-report", Cron: "@every 1m", Lock: "report:acme",
		Options: map[string]string{"lockTtl": "30s"}, Args: json.RawMessage(`{"tenant": "acme"}`)}
}

// A schedule created on one node runs on the cluster from its next fire,
// once per fire, with its arguments; an update through another node takes
// effect on every node from the next fire after their poll; a delete
// through a third stops it everywhere within a poll.
func TestStoredScheduleRunsOnTheCluster(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(3, func() []Task { return nil })
	for _, s := range c.nodes {
		if err := s.Handle("tenant-report", h.fn); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := c.nodes[0].CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	if got := taskNames(c.nodes[0]); !slices.Equal(got, []string{"report-acme"}) {
		t.Fatalf("the creating node's tasks = %v, want report-acme at once", got)
	}
	c.step(time.Second, time.Second) // one poll
	for i, s := range c.nodes {
		ti := s.Tasks()
		if len(ti) != 1 || ti[0].Schedule == nil || ti[0].Schedule.Handler != "tenant-report" || ti[0].Spec.LockTTL != 30*time.Second ||
			!ti[0].Next.Equal(epoch.Add(time.Minute)) {
			t.Fatalf("node-%d's tasks after a poll = %+v, want report-acme from its stored schedule, lockTtl 30s, next %v", i, ti, epoch.Add(time.Minute))
		}
	}
	c.step(3*time.Minute, time.Second)
	runs := h.of("report-acme")
	if got := fireSet(t, runs); len(got) != 3 {
		t.Fatalf("%d runs in 3 minutes, want 3 (each fire once in the cluster): %+v", len(got), runs)
	}
	if runs[0].args != `{"tenant":"acme"}` {
		t.Fatalf("the handler got args %s, want the schedule's", runs[0].args)
	}

	up := acmeReport()
	up.Cron = "0 */2 * * * *" // every two minutes
	up.Args = json.RawMessage(`{"tenant": "acme", "v": 2}`)
	if err := c.nodes[1].UpdateSchedule(ctx, up); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	for i, s := range c.nodes {
		if ti := s.Tasks(); len(ti) != 1 || ti[0].Spec.Cron != up.Cron {
			t.Fatalf("node-%d's task after the update's poll = %+v, want cron %q", i, ti, up.Cron)
		}
	}
	c.step(4*time.Minute, time.Second)
	runs = h.of("report-acme")[3:]
	if got := fireSet(t, runs); len(got) != 2 || runs[0].args != `{"tenant":"acme","v":2}` {
		t.Fatalf("runs in 4 minutes after the update = %+v, want 2, with the new args", runs)
	}
	for _, r := range runs {
		if r.fire.Minute()%2 != 0 {
			t.Fatalf("a run at %v after the update to every two minutes", r.fire)
		}
	}

	if err := c.nodes[2].DeleteSchedule(ctx, "report-acme"); err != nil {
		t.Fatal(err)
	}
	c.step(time.Second, time.Second)
	for i, s := range c.nodes {
		if got := taskNames(s); len(got) != 0 {
			t.Fatalf("node-%d's tasks a poll after the delete = %v, want none", i, got)
		}
	}
	before := len(h.of("report-acme"))
	c.step(5*time.Minute, time.Second)
	if n := len(h.of("report-acme")); n != before {
		t.Fatalf("%d runs after the delete, want none", n-before)
	}
	if err := c.nodes[0].DeleteSchedule(ctx, "report-acme"); !errors.Is(err, ErrUnknownSchedule) {
		t.Fatalf("DeleteSchedule of a deleted schedule = %v, want ErrUnknownSchedule", err)
	}
}

// A run in flight when its schedule is updated or deleted finishes; the
// updated spec's fires wait for it as for any run of the task (skip: the
// lock is held), and no fire runs twice.
func TestStoredScheduleRunInFlightFinishes(t *testing.T) {
	for _, op := range []string{"update", "delete"} {
		t.Run(op, func(t *testing.T) {
			c := newCluster(t)
			first := epoch.Add(time.Minute)
			b := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
			c.start(2, func() []Task { return nil })
			for _, s := range c.nodes {
				if err := s.Handle("tenant-report", func(ctx context.Context, _ json.RawMessage) error { return b.task(ctx) }); err != nil {
					t.Fatal(err)
				}
			}
			stepBlocked := func(d time.Duration) {
				t.Helper()
				for done := time.Duration(0); done < d; done += time.Second {
					c.fc.Advance(time.Second)
					for _, s := range c.nodes {
						settle(t, s, b.blockedOn(s.Node()))
					}
				}
			}
			ctx := context.Background()
			sc := acmeReport()
			sc.Options = map[string]string{"lockTtl": "10m"}
			if err := c.nodes[0].CreateSchedule(ctx, sc); err != nil {
				t.Fatal(err)
			}
			stepBlocked(time.Minute) // the first fire starts, and blocks
			if n := b.count(); n != 1 {
				t.Fatalf("%d runs started, want 1", n)
			}
			if op == "update" {
				sc.Cron = "@every 2m"
				if err := c.nodes[1].UpdateSchedule(ctx, sc); err != nil {
					t.Fatal(err)
				}
			} else if err := c.nodes[1].DeleteSchedule(ctx, sc.Name); err != nil {
				t.Fatal(err)
			}
			stepBlocked(2*time.Minute + 30*time.Second)
			if n := b.count(); n != 1 {
				t.Fatalf("%d runs started while the first is in flight, want still 1", n)
			}
			close(b.release)
			c.step(time.Second, time.Second)
			hist, err := c.store.Runs(ctx, "report-acme", 0) // a deleted schedule's history stays in the store
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(hist, func(r taskstate.Run) bool { return r.Fire.Equal(first) && !r.Start.IsZero() }); i < 0 || hist[i].Outcome != string(OutcomeOK) {
				t.Fatalf("history %+v, want the run in flight recorded ok", hist)
			}
			c.step(4*time.Minute+30*time.Second, time.Second)
			want := 1
			if op == "update" {
				want = 4 // and the fires at 4, 6 and 8 minutes; the one at 2 found the lock held
			}
			if n, most := b.count(), b.most.Load(); n != want || most != 1 {
				t.Fatalf("%d runs in all, at most %d at once; want %d, one at a time", n, most, want)
			}
		})
	}
}

// A schedule is validated as a task declared in code, with the same
// errors, and refused for what this node cannot run; tasks declared in code
// cannot be deleted or replaced.
func TestStoredScheduleValidation(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(1, func() []Task {
		return []Task{NewTask(func(context.Context) error { return nil }, Cron("@daily"), Lock("k"), Name("nightly"))}
	})
	s := c.nodes[0]
	if err := s.Handle("tenant-report", h.fn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	edit := func(f func(*taskstate.Schedule)) taskstate.Schedule {
		sc := acmeReport()
		f(&sc)
		return sc
	}
	for _, c := range []struct {
		name string
		sc   taskstate.Schedule
		is   error
		want string
	}{
		{"bad lockTtl", edit(func(sc *taskstate.Schedule) { sc.Options["lockTtl"] = "-1s" }), ErrInvalidSpec,
			`task "report-acme": option lockTtl = "-1s": must be positive`},
		{"misspelt key", edit(func(sc *taskstate.Schedule) { sc.Options = map[string]string{"lockTTL": "5s"} }), ErrInvalidSpec,
			`option lockTTL = "5s": unknown key; did you mean "lockTtl"?`},
		{"bad cron", edit(func(sc *taskstate.Schedule) { sc.Cron = "61 * * * *" }), ErrInvalidSpec, `option cron = "61 * * * *"`},
		{"retry without lock", edit(func(sc *taskstate.Schedule) { sc.Lock, sc.Options = "", map[string]string{"retry": "3"} }), ErrInvalidSpec,
			`option retry = "3": needs lock`},
		{"cron as an option", edit(func(sc *taskstate.Schedule) { sc.Options = map[string]string{"cron": "@daily"} }), ErrInvalidSpec,
			`option cron = "@daily": is a field of the schedule, not one of its options`},
		{"unknown handler", edit(func(sc *taskstate.Schedule) { sc.Handler = "tenant-export" }), ErrUnknownHandler, `handler "tenant-export"`},
		{"a code task's name", edit(func(sc *taskstate.Schedule) { sc.Name = "nightly" }), ErrDeclaredInCode, `"nightly"`},
		{"bad args", edit(func(sc *taskstate.Schedule) { sc.Args = json.RawMessage(`{`) }), taskstate.ErrInvalid, "args"},
		{"empty name", edit(func(sc *taskstate.Schedule) { sc.Name = "" }), taskstate.ErrInvalid, "name"},
	} {
		err := s.CreateSchedule(ctx, c.sc)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CreateSchedule with %s = %v\nwant an error wrapping %v with %q", c.name, err, c.is, c.want)
		}
	}
	if got, err := c.store.Schedules(ctx); err != nil || len(got) != 0 {
		t.Fatalf("stored after refused creates: %+v, %v; want none", got, err)
	}
	if err := s.CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchedule(ctx, acmeReport()); !errors.Is(err, taskstate.ErrScheduleExists) {
		t.Errorf("a second CreateSchedule of a name = %v, want taskstate.ErrScheduleExists", err)
	}
	if err := s.UpdateSchedule(ctx, edit(func(sc *taskstate.Schedule) { sc.Name = "report-beta" })); !errors.Is(err, ErrUnknownSchedule) {
		t.Errorf("UpdateSchedule of an absent name = %v, want ErrUnknownSchedule", err)
	}
	if err := s.DeleteSchedule(ctx, "nightly"); !errors.Is(err, ErrDeclaredInCode) {
		t.Errorf("DeleteSchedule of a task declared in code = %v, want ErrDeclaredInCode", err)
	}
	if err := s.Handle("tenant-report", h.fn); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Errorf("a second Handle of a name = %v, want an error", err)
	}
	if err := s.Handle("", h.fn); err == nil || !strings.Contains(err.Error(), "handler") {
		t.Errorf("Handle of an empty name = %v, want an error naming the handler", err)
	}
	if err := s.Handle("x", nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Handle of a nil func = %v, want an error", err)
	}
	if err := New(Config{}).CreateSchedule(ctx, acmeReport()); !errors.Is(err, ErrNoState) {
		t.Errorf("CreateSchedule without a task state = %v, want ErrNoState", err)
	}
}

// A rolling deploy: a node of the older build lacks the schedule's
// handler. It does not run the schedule and lists it with its problem,
// while the nodes that have the handler run each fire once; once the
// deploy reaches it (its handler registered), it runs it too.
func TestStoredScheduleRollingDeploy(t *testing.T) {
	c := newCluster(t)
	var h handled
	c.start(3, func() []Task { return nil })
	for _, s := range c.nodes[:2] {
		if err := s.Handle("tenant-report", h.fn); err != nil {
			t.Fatal(err)
		}
	}
	old := c.nodes[2]
	ctx := context.Background()
	if err := c.nodes[0].CreateSchedule(ctx, acmeReport()); err != nil {
		t.Fatal(err)
	}
	if err := old.CreateSchedule(ctx, func() taskstate.Schedule { sc := acmeReport(); sc.Name = "report-beta"; return sc }()); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("CreateSchedule on the old node = %v, want ErrUnknownHandler", err)
	}
	c.step(10*time.Minute, time.Second)
	runs := h.of("report-acme")
	if got := fireSet(t, runs); len(got) != 10 {
		t.Fatalf("%d runs in 10 minutes, want 10", len(got))
	}
	for _, r := range runs {
		if r.node == old.Node() {
			t.Fatalf("the node without the handler ran %+v", r)
		}
	}
	if got := taskNames(old); len(got) != 0 {
		t.Fatalf("the old node's tasks = %v, want none", got)
	}
	infos, err := old.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !strings.Contains(infos[0].Problem, `handler "tenant-report", which this node has not registered`) {
		t.Fatalf("the old node's Schedules = %+v, want report-acme with the missing handler as its problem", infos)
	}
	if infos, _ := c.nodes[1].Schedules(ctx); len(infos) != 1 || infos[0].Problem != "" {
		t.Fatalf("a new node's Schedules = %+v, want report-acme without a problem", infos)
	}
	if len(c.logs.find("stored schedule not run on this node")) == 0 {
		t.Error("the old node did not log the schedule it does not run")
	}

	if err := old.Handle("tenant-report", h.fn); err != nil { // the deploy reaches it
		t.Fatal(err)
	}
	if got := taskNames(old); !slices.Equal(got, []string{"report-acme"}) {
		t.Fatalf("the old node's tasks once it has the handler = %v, want report-acme", got)
	}
	c.step(10*time.Minute, time.Second)
	if got := fireSet(t, h.of("report-acme")); len(got) != 20 {
		t.Fatalf("%d runs in 20 minutes, want 20", len(got))
	}
}

// A stored schedule with a catch-up window that no node ran while the
// cluster was down runs its missed fire once, when the nodes start again
// (at their first poll, which reads the stored schedules), as a task
// declared in code does at Start.
func TestStoredScheduleCatchesUpAtStart(t *testing.T) {
	c := newCluster(t)
	var h handled
	sc := acmeReport()
	sc.Cron, sc.Options = "@hourly", map[string]string{"catchUp": "1h"}
	if err := c.store.CreateSchedule(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	c.fc.Advance(30 * time.Minute) // the fire at epoch ran nowhere
	for i := range 3 {
		s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: fmt.Sprintf("node-%d", i), State: c.store})
		if err := s.Handle("tenant-report", h.fn); err != nil {
			t.Fatal(err)
		}
		mustStart(t, s)
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		c.nodes = append(c.nodes, s)
	}
	c.step(2*time.Second, time.Second)
	runs := h.of("report-acme")
	if got := fireSet(t, runs); len(got) != 1 || !got[0].Equal(epoch) {
		t.Fatalf("runs after the start = %+v, want the missed fire at %v once", runs, epoch)
	}
	c.step(time.Hour, time.Second)
	if got := fireSet(t, h.of("report-acme")); len(got) != 2 {
		t.Fatalf("%d runs an hour later, want 2 (the catch-up and the next fire)", len(got))
	}
}
