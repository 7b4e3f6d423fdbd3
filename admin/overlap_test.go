package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// pollCounter is a task state store that counts the polls that returned.
type pollCounter struct {
	taskstate.Store
	n atomic.Int64
}

func (p *pollCounter) Poll(ctx context.Context) (taskstate.Poll, error) {
	defer p.n.Add(1)
	return p.Store.Poll(ctx)
}

// overlapping is a real Handler on a started scheduler (node node-a, its
// locks and task state in the process, on a fake clock at epoch) whose
// task "sync" fires every minute with overlap buffer-one, and retries a
// failed run twice (none fails): its first run, of 00:01, blocks until
// release, so that the fire at 00:02 waits for it (buffered) and the one
// at 00:03 is skipped (skipped: one waiting); every other run returns at
// once. "export" (overlap allow, 3 at once), "latest" (cancel-previous)
// and "plain" (the default) never fire in the test.
type overlapping struct {
	s        *scheduling.Scheduler
	fc       *clockwork.FakeClock
	h        *Handler
	polls    *pollCounter
	started  chan struct{} // closed when the first run started
	release  func()        // lets the first run return
	released atomic.Bool
}

func newOverlapping(t *testing.T) *overlapping {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	o := &overlapping{fc: fc, polls: &pollCounter{Store: store}, started: make(chan struct{})}
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", Logger: slog.New(slog.DiscardHandler),
		Driver: locks.NewInProcessDriver(locks.WithClock(fc)), State: o.polls})
	released := make(chan struct{})
	var once sync.Once
	o.release = func() {
		once.Do(func() {
			o.released.Store(true)
			close(released)
		})
	}
	var n atomic.Int32
	noop := func(context.Context) error { return nil }
	if err := s.Add(
		scheduling.NewTask(func(context.Context) error {
			if n.Add(1) == 1 {
				close(o.started)
				<-released
			}
			return nil
		}, scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour), scheduling.Name("sync"),
			scheduling.Overlap(scheduling.OverlapBufferOne), scheduling.Retry(2)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Lock("export"), scheduling.Name("export"),
			scheduling.Overlap(scheduling.OverlapAllow), scheduling.MaxConcurrent(3)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Lock("latest"), scheduling.Name("latest"),
			scheduling.Overlap(scheduling.OverlapCancelPrevious)),
		scheduling.NewTask(noop, scheduling.Cron("@yearly"), scheduling.Name("plain")),
	); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(o.release) // before Stop, which waits for the run
	h, err := New(Options{Scheduler: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	o.s, o.h = s, h
	return o
}

// The stages of the scenario: 00:01's run blocked; 00:02 waiting for it;
// 00:03 skipped as one waits; the first run released at 00:03:30, the
// waiting fire's run, and 00:04's.
const (
	blockedStage  = time.Minute + 30*time.Second
	bufferedStage = 2*time.Minute + 30*time.Second
	fullStage     = 3*time.Minute + 30*time.Second
	ranStage      = 4*time.Minute + 30*time.Second
)

// step advances the clock to epoch+to a second at a time. While the first
// run blocks, schedulingtest.Step cannot settle the scheduler (it waits
// for every run to end): each second then waits, a while on the real
// clock, for that second's poll of the task state, so that the fires and
// polls of each second come in their turn; and once the fire at 00:02
// waits, step waits for its record to reach the store, whose polls give
// the waiting fire back. Before and after, it settles every second as
// schedulingtest.Step.
func (o *overlapping) step(t *testing.T, to time.Duration) {
	t.Helper()
	for o.fc.Now().Before(epoch.Add(to)) {
		switch {
		case o.released.Load() || o.fc.Now().Add(time.Second).Before(epoch.Add(time.Minute)):
			if err := schedulingtest.Step(context.Background(), o.fc, time.Second, 0, o.s); err != nil {
				t.Fatal(err)
			}
		case o.fc.Now().Before(epoch.Add(time.Minute)): // settled at 00:00:59
			o.fc.Advance(time.Second)
			waitUntil(t, "the first run to start", func() bool {
				select {
				case <-o.started:
					return o.s.Tasks()[0].Running
				default:
					return false
				}
			})
		default:
			n := o.polls.n.Load()
			o.fc.Advance(time.Second)
			for deadline := time.Now().Add(time.Second); o.polls.n.Load() == n && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond) // polls a condition; the test's results do not depend on the delay
			}
			if o.fc.Now().Equal(epoch.Add(2*time.Minute + 10*time.Second)) {
				waitUntil(t, "the fire at 00:02 recorded as waiting", func() bool {
					runs, err := o.s.History(context.Background(), "sync")
					return err == nil && slices.ContainsFunc(runs, func(r taskstate.Run) bool { return r.Outcome == string(scheduling.OutcomeBuffered) })
				})
			}
		}
	}
}

// waitUntil polls cond on the real clock for up to 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polls a condition; the test's results do not depend on the delay
	}
}

// tasks returns the handler's GET /scheduledtasks, decoded, and each task
// as raw keys, by name.
func (o *overlapping) tasks(t *testing.T) (map[string]TaskJSON, map[string]map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	o.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks", nil))
	var typed TasksJSON
	var raw struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &typed); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /scheduledtasks: %d %v: %s", rec.Code, err, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(typed.Tasks) != 4 {
		t.Fatalf("GET /scheduledtasks: %v: %s", err, rec.Body)
	}
	byName, rawByName := map[string]TaskJSON{}, map[string]map[string]any{}
	for i, task := range typed.Tasks {
		byName[task.Name], rawByName[task.Name] = task, raw.Tasks[i]
	}
	return byName, rawByName
}

// The task list shows each task's overlap policy ("skip" for the
// default) and maxConcurrent; while a fire waits for the run going, its
// instant in waitingFire, not as a retry (retryAt stays null); the fire
// buffered and the one skipped as one waits, as they are; and the waiting
// fire's run as attempt 1 of its fire, once it ran.
func TestOverlapInTheAPI(t *testing.T) {
	o := newOverlapping(t)
	o.step(t, blockedStage)
	tasks, raw := o.tasks(t)
	for name, want := range map[string]struct {
		overlap string
		max     int
	}{"sync": {"buffer-one", 0}, "export": {"allow", 3}, "latest": {"cancel-previous", 0}, "plain": {"skip", 0}} {
		if got := tasks[name]; got.Overlap != want.overlap || got.MaxConcurrent != want.max || raw[name]["overlap"] != want.overlap ||
			raw[name]["maxConcurrent"] != float64(want.max) {
			t.Errorf("%s: overlap %q, maxConcurrent %d (raw %v, %v); want %q, %d", name, got.Overlap, got.MaxConcurrent,
				raw[name]["overlap"], raw[name]["maxConcurrent"], want.overlap, want.max)
		}
		if _, ok := raw[name]["waitingFire"]; !ok || raw[name]["waitingFire"] != nil {
			t.Errorf("%s: waitingFire %v (present %v) with no fire waiting, want null", name, raw[name]["waitingFire"], ok)
		}
	}
	if sync := tasks["sync"]; !sync.Running || sync.LastFire != nil {
		t.Errorf("sync while its first run blocks: running %v, lastFire %+v; want running, no fire ended", sync.Running, sync.LastFire)
	}

	o.step(t, bufferedStage)
	tasks, raw = o.tasks(t)
	sync := tasks["sync"]
	if sync.WaitingFire == nil || !sync.WaitingFire.Equal(epoch.Add(2*time.Minute)) || raw["sync"]["waitingFire"] != "2026-01-01T00:02:00Z" {
		t.Errorf("waitingFire %v, want the fire at 00:02", raw["sync"]["waitingFire"])
	}
	if sync.RetryAt != nil {
		t.Errorf("retryAt %v while a fire waits, want null: it is no retry", sync.RetryAt)
	}
	if f := sync.LastFire; f == nil || f.Outcome != "buffered" || !f.Fire.Equal(epoch.Add(2*time.Minute)) || f.Start != nil || f.Attempt != 1 {
		t.Errorf("lastFire %+v, want 00:02 buffered, not started", f)
	}
	if sync.LastRun != nil || !sync.Running || sync.Skips != 1 {
		t.Errorf("lastRun %+v, running %v, skips %d; want no run ended, the first running, one skip", sync.LastRun, sync.Running, sync.Skips)
	}
	if got, want := attempts(sync.RecentFires), []string{"buffered@00:02#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	o.step(t, fullStage)
	tasks, raw = o.tasks(t)
	sync = tasks["sync"]
	if f := sync.LastFire; f == nil || f.Outcome != string(scheduling.OutcomeBufferFull) || !f.Fire.Equal(epoch.Add(3*time.Minute)) {
		t.Errorf("lastFire %+v, want 00:03 skipped: one waiting", f)
	}
	if raw["sync"]["waitingFire"] != "2026-01-01T00:02:00Z" || sync.RetryAt != nil || sync.Skips != 2 {
		t.Errorf("waitingFire %v, retryAt %v, skips %d; want 00:02 still waiting, no retry, two skips", raw["sync"]["waitingFire"], sync.RetryAt, sync.Skips)
	}
	if c := sync.ClusterLastRun; c == nil || c.Outcome != "skipped: one waiting" || c.Start != nil {
		t.Errorf("clusterLastRun %+v, want 00:03 skipped: one waiting", c)
	}

	o.release()
	o.step(t, ranStage)
	tasks, raw = o.tasks(t)
	sync = tasks["sync"]
	if sync.WaitingFire != nil || raw["sync"]["waitingFire"] != nil || sync.RetryAt != nil {
		t.Errorf("waitingFire %v, retryAt %v once the waiting fire ran, want both null", raw["sync"]["waitingFire"], sync.RetryAt)
	}
	if l := sync.LastRun; l == nil || l.Outcome != "ok" || !l.Fire.Equal(epoch.Add(4*time.Minute)) || l.Attempt != 1 || sync.Runs != 3 {
		t.Errorf("lastRun %+v, runs %d; want 00:04's, ok, after 3 runs", l, sync.Runs)
	}
	// By fire: the waiting fire's run beside its buffered record.
	if got, want := attempts(sync.RecentFires), []string{"ok@00:04#1", "skipped: one waiting@00:03#1", "ok@00:02#1", "buffered@00:02#1", "ok@00:01#1"}; !slices.Equal(got, want) {
		t.Errorf("recentFires %q, want %q", got, want)
	}

	rec := httptest.NewRecorder()
	o.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/scheduledtasks/sync/runs", nil))
	var runs RunsJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &runs); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET runs: %d %v %s", rec.Code, err, rec.Body)
	}
	// As recorded: the first run when it ended, then the waiting fire's
	// run, as attempt 1 (it is no retry).
	if got, want := attempts(runs.Runs), []string{"ok@00:04#1", "ok@00:02#1", "ok@00:01#1", "skipped: one waiting@00:03#1", "buffered@00:02#1"}; !slices.Equal(got, want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
	waited, first := runs.Runs[1], runs.Runs[2]
	if waited.Start == nil || waited.Start.Before(epoch.Add(fullStage)) || !waited.Start.Before(epoch.Add(4*time.Minute)) || waited.Token <= first.Token {
		t.Errorf("the waiting fire's run %+v, want it started once the first (%+v) ended at 00:03:30, before 00:04, under a greater token", waited, first)
	}
	if first.Start == nil || !first.Start.Equal(epoch.Add(time.Minute)) || first.Duration != "2m30s" {
		t.Errorf("the first run %+v, want 00:01's, 2m30s long", first)
	}
	for _, r := range runs.Runs[3:] {
		if r.Start != nil || r.Token != 0 || r.Node != "node-a" {
			t.Errorf("skip %+v, want no start nor token, on node-a", r)
		}
	}
}
