package scheduling

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// settle blocks until s's loop waits for a fire not yet due and only
// blocked fires (runs a test holds) are in flight, as waitIdle does with
// none.
func settle(t *testing.T, s *Scheduler, blocked func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		quiet, flying := s.quietNow()
		if quiet && flying == blocked() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not settle: %d fires in flight, %d of them blocked", s.node, s.flying.Load(), blocked())
		}
		time.Sleep(time.Millisecond) // polls a condition; no result depends on the delay
	}
}

// blocker runs a task whose runs of chosen fires block until released or
// cancelled, and records every run and how it ended.
type blocker struct {
	exclusive
	block func(Run) bool // which runs block

	mu      sync.Mutex
	blocked map[string]int // blocked runs, by node
	release chan struct{}
	causes  map[time.Time]error // the context cause of each run that its context ended
}

func newBlocker(block func(Run) bool) *blocker {
	return &blocker{block: block, blocked: map[string]int{}, release: make(chan struct{}), causes: map[time.Time]error{}}
}

func (h *blocker) task(ctx context.Context) error {
	r, _ := RunFromContext(ctx)
	n := h.in.Add(1) // the run is going until it returns, blocked or not
	defer h.in.Add(-1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	err := h.fires.task(ctx)
	if !h.block(r) {
		return err
	}
	h.mu.Lock()
	h.blocked[r.Node]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.blocked[r.Node]--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		h.mu.Lock()
		h.causes[r.Fire] = context.Cause(ctx)
		h.mu.Unlock()
		return ctx.Err()
	}
}

func (h *blocker) blockedOn(node string) func() int {
	return func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.blocked[node]
	}
}

// step advances the cluster's clock by d in steps of inc, letting each
// node settle with its blocked runs.
func (h *blocker) step(t *testing.T, c *cluster, d, inc time.Duration) {
	t.Helper()
	for done := time.Duration(0); ; done += inc {
		for _, s := range c.nodes {
			settle(t, s, h.blockedOn(s.node))
		}
		if done >= d {
			return
		}
		c.fc.Advance(inc)
	}
}

func (h *blocker) runFires() (fires []time.Time, attempts []int) {
	h.exclusive.mu.Lock()
	defer h.exclusive.mu.Unlock()
	for _, r := range h.exclusive.runs {
		fires, attempts = append(fires, r.Fire), append(attempts, r.Attempt)
	}
	return fires, attempts
}

func minutes(ts []time.Time) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Sub(epoch).String() + " ")
	}
	return strings.TrimSpace(b.String())
}

// buffer-one: a fire that finds the run going waits, in the task state,
// and runs once the run ends, on one node; a later fire while it waits is
// skipped; no two runs overlap and no fire runs twice.
func TestOverlapBufferOne(t *testing.T) {
	c := newCluster(t)
	h := newBlocker(func(r Run) bool { return r.Fire.Equal(epoch.Add(time.Minute)) })
	t.Cleanup(func() { close(h.release) })
	c.start(3, func() []Task {
		return []Task{NewTask(h.task, Cron("* * * * *"), Lock("k"), LockTTL(time.Hour), Name("sync"), Overlap(OverlapBufferOne))}
	})
	h.step(t, c, 3*time.Minute+30*time.Second, 10*time.Second) // 00:01 runs and blocks; 00:02 waits; 00:03 is skipped
	if fires, _ := h.runFires(); minutes(fires) != "1m0s" {
		t.Fatalf("runs of fires %s while the first run blocks, want 1m0s alone", minutes(fires))
	}
	if got := c.skips.skippedFires(OutcomeBuffered); len(got) != 1 || !got[epoch.Add(2*time.Minute)] {
		t.Fatalf("fires buffered %v, want 00:02 alone", got)
	}
	if got := c.skips.skippedFires(OutcomeBufferFull); !got[epoch.Add(3*time.Minute)] {
		t.Fatalf("fires skipped as one waiting %v, want 00:03 among them", got)
	}
	h.release <- struct{}{} // the blocked run returns
	h.step(t, c, 80*time.Second, time.Second)
	fires, attempts := h.runFires()
	if minutes(fires[:2]) != "1m0s 2m0s" || attempts[1] != 1 || len(fires) < 3 || !fires[2].After(epoch.Add(3*time.Minute)) {
		t.Fatalf("runs of fires %s (attempts %v); want 1m0s, then the waiting 2m0s, then the fires after 3m0s", minutes(fires), attempts)
	}
	if h.most.Load() != 1 {
		t.Errorf("%d runs overlapped, want 1", h.most.Load())
	}
	hist, _ := c.nodes[0].History(context.Background(), "sync")
	var buffered, ran2 int
	for _, r := range hist {
		switch {
		case r.Outcome == string(OutcomeBuffered):
			buffered++
		case r.Fire.Equal(epoch.Add(2*time.Minute)) && r.Outcome == string(OutcomeOK):
			ran2++
		}
	}
	if buffered != 1 || ran2 != 1 {
		t.Errorf("history: %d buffered records, 00:02 ran %d times; want 1 and 1", buffered, ran2)
	}
}

// cancel-previous: a fire that finds the run going cancels it, on whatever
// node runs it, within a poll, then runs once its lease is released.
func TestOverlapCancelPrevious(t *testing.T) {
	c := newCluster(t)
	first := epoch.Add(time.Minute)
	h := newBlocker(func(r Run) bool { return r.Fire.Equal(first) })
	t.Cleanup(func() { close(h.release) })
	c.start(3, func() []Task {
		return []Task{NewTask(h.task, Cron("* * * * *"), Lock("k"), LockTTL(time.Hour), Name("sync"), Overlap(OverlapCancelPrevious), Retry(2))}
	})
	h.step(t, c, time.Minute+30*time.Second, 10*time.Second)
	h.step(t, c, 32*time.Second, time.Second) // 00:02 comes, the run of 00:01 is cancelled, 00:02 runs
	fires, attempts := h.runFires()
	if minutes(fires) != "1m0s 2m0s" || attempts[1] != 1 {
		t.Fatalf("runs of fires %s (attempts %v), want 1m0s then 2m0s", minutes(fires), attempts)
	}
	h.mu.Lock()
	cause := h.causes[first]
	h.mu.Unlock()
	if !errors.Is(cause, ErrSuperseded) {
		t.Fatalf("the first run's context ended with %v, want ErrSuperseded", cause)
	}
	if h.most.Load() != 1 {
		t.Errorf("%d runs overlapped, want 1: the later fire must wait for the lease", h.most.Load())
	}
	hist, _ := c.nodes[1].History(context.Background(), "sync")
	for _, r := range hist {
		if r.Fire.Equal(first) && r.Start.IsZero() == false && r.Outcome != string(OutcomeCancelled) {
			t.Errorf("the superseded run is recorded %q, want %q", r.Outcome, OutcomeCancelled)
		}
	}
	if p, _ := c.store.Poll(context.Background()); len(p.Retries) != 0 {
		t.Errorf("pending %v: a superseded run must not be retried", p.Retries)
	}
}

// allow: up to MaxConcurrent runs at once in the cluster, each on a slot
// of its own with its own fencing token; a fire that finds every slot
// taken is skipped.
func TestOverlapAllow(t *testing.T) {
	c := newCluster(t)
	h := newBlocker(func(r Run) bool { return r.Fire.Before(epoch.Add(3 * time.Minute)) })
	t.Cleanup(func() { close(h.release) })
	var mu sync.Mutex
	keys := map[string]uint64{}
	task := func(ctx context.Context) error {
		if l, ok := locks.FromContext(ctx); ok {
			mu.Lock()
			keys[l.Key()] = l.Token()
			mu.Unlock()
		}
		return h.task(ctx)
	}
	c.start(3, func() []Task {
		return []Task{NewTask(task, Cron("* * * * *"), Lock("k"), LockTTL(time.Hour), Name("export"), Overlap(OverlapAllow), MaxConcurrent(2))}
	})
	h.step(t, c, 3*time.Minute+30*time.Second, 10*time.Second)
	if fires, _ := h.runFires(); minutes(fires) != "1m0s 2m0s" {
		t.Fatalf("runs of fires %s, want 1m0s and 2m0s side by side, 3m0s skipped", minutes(fires))
	}
	if h.most.Load() != 2 {
		t.Errorf("%d runs at once, want 2", h.most.Load())
	}
	mu.Lock()
	if len(keys) != 2 || keys[locks.SlotKey("k", 1)] == 0 || keys[locks.SlotKey("k", 2)] == 0 {
		t.Errorf("the runs held %v, want slots 1 and 2 of k", keys)
	}
	mu.Unlock()
	if got := c.skips.skippedFires(OutcomeLockHeld); !got[epoch.Add(3*time.Minute)] {
		t.Errorf("fires skipped with every slot held %v, want 00:03", got)
	}
	h.release <- struct{}{}
	h.release <- struct{}{}
	h.step(t, c, time.Minute, time.Second)
	if fires, _ := h.runFires(); minutes(fires) != "1m0s 2m0s 4m0s" {
		t.Errorf("runs of fires %s, want 4m0s run once the slots are free", minutes(fires))
	}
}

// Bad overlap options fail validation, naming the option, the value and
// the rule.
func TestOverlapValidation(t *testing.T) {
	noop := func(context.Context) error { return nil }
	c := newCluster(t)
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"unknown", []Option{Lock("k"), Overlap("queue")}, `option overlap = "queue": must be skip, buffer-one, cancel-previous or allow`},
		{"unlocked", []Option{Overlap(OverlapBufferOne)}, `option overlap = "buffer-one": needs lock`},
		{"allow without max", []Option{Lock("k"), Overlap(OverlapAllow)}, `option overlap = "allow": needs maxConcurrent`},
		{"max without allow", []Option{Lock("k"), MaxConcurrent(2)}, `option maxConcurrent = "2": needs overlap allow`},
		{"max too high", []Option{Lock("k"), Overlap(OverlapAllow), MaxConcurrent(locks.MaxSlots + 1)}, `must not exceed 64 (locks.MaxSlots)`},
		{"max zero", []Option{Lock("k"), Overlap(OverlapAllow), MaxConcurrent(0)}, `option maxConcurrent = "0": must be positive`},
		{"allow with wait", []Option{Lock("k"), Overlap(OverlapAllow), MaxConcurrent(2), LockWait(time.Second)}, `option lockWait = "1s": must not be set with overlap allow`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Driver: c.driver, State: c.store})
			err := s.Add(NewTask(noop, append([]Option{Cron("@daily"), Name("t")}, tc.opts...)...))
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Add: %v; want %q", err, tc.want)
			}
		})
	}
	s := New(Config{Driver: c.driver})
	if err := s.Add(NewTask(noop, Cron("@daily"), Name("t"), Lock("k"), Overlap(OverlapCancelPrevious))); err == nil ||
		!strings.Contains(err.Error(), "needs a task state store") {
		t.Errorf("cancel-previous without a store: %v", err)
	}
	s = New(Config{Driver: c.driver, State: c.store})
	mustAdd(t, s, NewTask(noop, Cron("@daily"), Name("a"), Lock("k"), Overlap(OverlapAllow), MaxConcurrent(3)))
	if err := s.Add(NewTask(noop, Cron("@daily"), Name("b"), Lock("k"))); err == nil ||
		!strings.Contains(err.Error(), `option lock = "k": is also the lock of task a: a task with overlap allow must have its lock to itself`) {
		t.Errorf("a second task on an allow task's lock: %v", err)
	}
}

// cancel-previous across nodes: the run going on node a is cancelled
// within one poll of the fire that node b buffered, and b's fire runs once
// a's lease is released.
func TestCancelPreviousReachesAnotherNodeWithinAPoll(t *testing.T) {
	c := newCluster(t)
	h := newBlocker(func(r Run) bool { return r.Manual })
	t.Cleanup(func() { close(h.release) })
	var cancelledAt time.Time
	var mu sync.Mutex
	task := func(ctx context.Context) error {
		err := h.task(ctx)
		if r, _ := RunFromContext(ctx); r.Manual {
			mu.Lock()
			cancelledAt = c.fc.Now()
			mu.Unlock()
		}
		return err
	}
	node := func(name, cron string) *Scheduler {
		s := New(Config{Driver: c.driver, Clock: c.fc, Logger: slog.New(c.logs), Node: name, State: c.store, Listeners: []Listener{c.skips}})
		mustAdd(t, s, NewTask(task, Cron(cron), Lock("k"), LockTTL(time.Hour), Name("sync"), Overlap(OverlapCancelPrevious)))
		mustStart(t, s)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx)
		})
		return s
	}
	// a fires once a year; it runs the task by hand, and blocks.
	a := node("node-a", "@yearly")
	c.nodes = []*Scheduler{a}
	if err := a.RunNow(context.Background(), "sync"); err != nil {
		t.Fatal(err)
	}
	h.step(t, c, 2*time.Second, time.Second)
	if fires, _ := h.runFires(); len(fires) != 1 {
		t.Fatalf("%d runs after the request, want the manual run on a", len(fires))
	}
	// b fires every minute: its fire at 00:01 finds the lock held, waits,
	// and a cancels its run at its next poll.
	b := node("node-b", "* * * * *")
	c.nodes = []*Scheduler{a, b}
	h.step(t, c, time.Minute+5*time.Second, 250*time.Millisecond)
	fires, attempts := h.runFires()
	mu.Lock()
	at := cancelledAt
	mu.Unlock()
	buffered := epoch.Add(time.Minute)
	if len(fires) != 2 || !fires[1].Equal(buffered) || attempts[1] != 1 {
		t.Fatalf("runs of fires %s (attempts %v); want the manual run, then b's 00:01 once a's run ended", minutes(fires), attempts)
	}
	if at.IsZero() || at.Before(buffered) || at.After(buffered.Add(DefaultRequestPoll)) {
		t.Errorf("a's run was cancelled at %v, want within a poll (%v) of the fire b buffered at %v", at, DefaultRequestPoll, buffered)
	}
	if h.most.Load() != 1 {
		t.Errorf("%d runs overlapped, want 1", h.most.Load())
	}
}
