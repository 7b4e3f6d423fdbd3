package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/admin"
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

// overlapNode is a real admin handler on a started scheduler (node
// node-a, in-process locks and task state, a fake clock at epoch) whose
// task "sync" fires every minute with overlap buffer-one and retries a
// failed run twice (none fails): its first run, of 00:01, blocks until
// release, so that the fire at 00:02 waits for it (buffered) and the one
// at 00:03 is skipped (skipped: one waiting).
type overlapNode struct {
	s        *scheduling.Scheduler
	fc       *clockwork.FakeClock
	polls    *pollCounter
	url      string
	started  chan struct{}
	release  func()
	released atomic.Bool
}

func startOverlapNode(t *testing.T) *overlapNode {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := &overlapNode{fc: fc, polls: &pollCounter{Store: store}, started: make(chan struct{})}
	s := scheduling.New(scheduling.Config{Clock: fc, Node: "node-a", Logger: slog.New(slog.DiscardHandler), State: n.polls,
		Driver: locks.NewInProcessDriver(locks.WithClock(fc))})
	released := make(chan struct{})
	var once sync.Once
	n.release = func() {
		once.Do(func() {
			n.released.Store(true)
			close(released)
		})
	}
	var runs atomic.Int32
	if err := s.Add(scheduling.NewTask(func(context.Context) error {
		if runs.Add(1) == 1 {
			close(n.started)
			<-released
		}
		return nil
	}, scheduling.Cron("@every 1m"), scheduling.Lock("sync"), scheduling.LockTTL(time.Hour), scheduling.Name("sync"),
		scheduling.Overlap(scheduling.OverlapBufferOne), scheduling.Retry(2))); err != nil {
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
	t.Cleanup(n.release) // before Stop, which waits for the run
	h, err := admin.New(admin.Options{Scheduler: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	n.s, n.url = s, srv.URL
	return n
}

// stepTo advances the clock to epoch+to a second at a time, settling the
// scheduler every second (schedulingtest.Step) but while the first run
// blocks, which Step would wait for: each second then waits, a while on
// the real clock, for that second's poll of the task state, and once the
// fire at 00:02 waits, for its record to reach the store.
func (n *overlapNode) stepTo(t *testing.T, to time.Duration) {
	t.Helper()
	for n.fc.Now().Before(epoch.Add(to)) {
		switch {
		case n.released.Load() || n.fc.Now().Add(time.Second).Before(epoch.Add(time.Minute)):
			if err := schedulingtest.Step(context.Background(), n.fc, time.Second, 0, n.s); err != nil {
				t.Fatal(err)
			}
		case n.fc.Now().Before(epoch.Add(time.Minute)): // settled at 00:00:59
			n.fc.Advance(time.Second)
			waitUntil(t, "the first run to start", func() bool {
				select {
				case <-n.started:
					return n.s.Tasks()[0].Running
				default:
					return false
				}
			})
		default:
			polls := n.polls.n.Load()
			n.fc.Advance(time.Second)
			for deadline := time.Now().Add(time.Second); n.polls.n.Load() == polls && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond) // polls a condition; the test's results do not depend on the delay
			}
			if n.fc.Now().Equal(epoch.Add(2*time.Minute + 10*time.Second)) {
				waitUntil(t, "the fire at 00:02 recorded as waiting", func() bool {
					runs, err := n.s.History(context.Background(), "sync")
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

// ndigo tasks shows a buffered fire and the one skipped while it waits as
// their outcomes, with no retry due (a waiting fire is no retry); ndigo
// runs lists both skips as they are, and the waiting fire's run, once the
// first ended, as attempt 1 of its fire (1/3), not as a retry.
func TestOverlapInTheTables(t *testing.T) {
	n := startOverlapNode(t)
	env := map[string]string{"NDIGO_ADMIN": n.url}
	n.stepTo(t, 2*time.Minute+30*time.Second)
	res := ndigo(t, env, "tasks")
	if want := []string{"sync", "@every 1m", "sync", "2026-01-01T00:03:00Z", "no", "2026-01-01T00:02:00Z", "buffered", "-",
		"node-a", "-", "buffered", "-", "0"}; res.code != 0 || !slices.Equal(row(t, rows(t, res.stdout), "sync"), want) {
		t.Errorf("tasks with 00:02 waiting: exit %d, row %q, want %q (%s)", res.code, row(t, rows(t, res.stdout), "sync"), want, res.stderr)
	}

	n.stepTo(t, 3*time.Minute+30*time.Second)
	res = ndigo(t, env, "tasks")
	if want := []string{"sync", "@every 1m", "sync", "2026-01-01T00:04:00Z", "no", "2026-01-01T00:03:00Z", "skipped: one waiting", "-",
		"node-a", "-", "skipped: one waiting", "-", "0"}; res.code != 0 || !slices.Equal(row(t, rows(t, res.stdout), "sync"), want) {
		t.Errorf("tasks with 00:03 skipped: exit %d, row %q, want %q (%s)", res.code, row(t, rows(t, res.stdout), "sync"), want, res.stderr)
	}

	n.release()
	n.stepTo(t, 4*time.Minute+30*time.Second)
	res = ndigo(t, env, "runs", "sync")
	got := rows(t, res.stdout)
	want := [][]string{
		{"FIRE", "KIND", "ATTEMPT", "NODE", "TOKEN", "START", "DURATION", "OUTCOME", "ERROR"},
		{"2026-01-01T00:04:00Z", "scheduled", "1/3", "node-a", "3", "2026-01-01T00:04:00Z", "0s", "ok", "-"},
		{"2026-01-01T00:02:00Z", "scheduled", "1/3", "node-a", "2", "2026-01-01T00:03:31Z", "0s", "ok", "-"},
		{"2026-01-01T00:01:00Z", "scheduled", "1/3", "node-a", "1", "2026-01-01T00:01:00Z", "2m30s", "ok", "-"},
		{"2026-01-01T00:03:00Z", "scheduled", "-", "node-a", "-", "-", "0s", "skipped: one waiting", "-"},
		{"2026-01-01T00:02:00Z", "scheduled", "-", "node-a", "-", "-", "0s", "buffered", "-"},
	}
	if res.code != 0 || len(got) != len(want) {
		t.Fatalf("runs: exit %d:\n%s\nwant %d lines (%s)", res.code, res.stdout, len(want), res.stderr)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("runs line %d: %q, want %q", i, got[i], want[i])
		}
	}
	res = ndigo(t, env, "tasks")
	if got := row(t, rows(t, res.stdout), "sync"); got[5] != "2026-01-01T00:04:00Z" || got[6] != "ok" || got[7] != "1/3" || got[11] != "-" {
		t.Errorf("tasks once the waiting fire ran: %q, want 00:04's first attempt and no retry due", got)
	}
	res = ndigo(t, env, "--json", "tasks")
	if !strings.Contains(res.stdout, `"overlap": "buffer-one",`) || !strings.Contains(res.stdout, `"waitingFire": null,`) {
		t.Errorf("tasks --json: %s; want the overlap policy and no fire waiting", res.stdout)
	}
}
