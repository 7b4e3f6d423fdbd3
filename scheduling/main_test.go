package scheduling

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/locks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitIdle blocks until s's loop waits for a fire that is not yet due and
// no fire is in flight, so that a test may advance the clock.
func waitIdle(t testing.TB, s *Scheduler) {
	t.Helper()
	if err := s.waitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// step advances fc by d in increments of inc, letting every scheduler settle
// after each increment.
func step(t testing.TB, fc *clockwork.FakeClock, d, inc time.Duration, ss ...*Scheduler) {
	t.Helper()
	for _, s := range ss {
		waitIdle(t, s)
	}
	for done := time.Duration(0); done < d; done += inc {
		fc.Advance(inc)
		for _, s := range ss {
			waitIdle(t, s)
		}
	}
}

// stopStepping stops s, a spreading scheduler on fc, stepping fc while
// Stop hands s's tasks over (it waits two heartbeats on the clock).
func stopStepping(t testing.TB, fc *clockwork.FakeClock, s *Scheduler) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Stop(context.Background()) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Stop %s: %v", s.node, err)
			}
			return
		case <-time.After(time.Millisecond): // no result depends on the delay
			fc.Advance(100 * time.Millisecond)
		}
	}
}

// logRecorder is a slog.Handler that keeps records for assertions.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	msg   string
	level slog.Level
	attrs map[string]string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRec{msg: rec.Message, level: rec.Level, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, lr)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// find returns the records whose message contains msg.
func (r *logRecorder) find(msg string) []logRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRec
	for _, rec := range r.recs {
		if strings.Contains(rec.msg, msg) {
			out = append(out, rec)
		}
	}
	return out
}

// epoch is a round instant to start fake clocks at.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newTest returns a scheduler on a fake clock at epoch with a recording
// logger and, if locked, an in-process driver on the same clock. It is
// stopped at cleanup.
func newTest(t *testing.T, locked bool) (*Scheduler, *clockwork.FakeClock, *logRecorder, *locks.InProcessDriver) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(epoch)
	rec := &logRecorder{}
	cfg := Config{Clock: fc, Logger: slog.New(rec), Node: "node-a"}
	var d *locks.InProcessDriver
	if locked {
		d = locks.NewInProcessDriver(locks.WithClock(fc))
		cfg.Driver = d
	}
	s := New(cfg)
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s, fc, rec, d
}

// fires records the fire instants a task ran for.
type fires struct {
	mu    sync.Mutex
	fires []time.Time
	runs  []Run
}

func (f *fires) task(ctx context.Context) error {
	r, _ := RunFromContext(ctx)
	f.mu.Lock()
	f.fires = append(f.fires, r.Fire)
	f.runs = append(f.runs, r)
	f.mu.Unlock()
	return nil
}

func (f *fires) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fires)
}

func (f *fires) list() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.fires...)
}

func mustAdd(t testing.TB, s *Scheduler, tasks ...Task) {
	t.Helper()
	if err := s.Add(tasks...); err != nil {
		t.Fatalf("Add: %v", err)
	}
}

func mustStart(t testing.TB, s *Scheduler) {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// inTwoSteps takes fires through d's own Acquire and Claim
// (locks.AcquireThenClaim): the AcquireClaims of a test driver that embeds
// one and overrides Acquire or Claim.
func inTwoSteps(ctx context.Context, d locks.Driver, fires []locks.FireLock) []locks.FireLease {
	out := make([]locks.FireLease, len(fires))
	for i, f := range fires {
		out[i].Lease, out[i].Err = locks.AcquireThenClaim(ctx, d, f.Key, f.TTL, f.Claim)
	}
	return out
}
