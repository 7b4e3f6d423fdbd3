package scheduling

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// flaky fails the first fails attempts of each fire (panicking on the
// second, when panics is set), and records every run.
type flaky struct {
	exclusive
	fails  int
	panics bool
	mu     sync.Mutex
	starts []time.Time // by run
}

func (f *flaky) run(clock func() time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		_ = f.exclusive.task(ctx)
		r, _ := RunFromContext(ctx)
		f.mu.Lock()
		f.starts = append(f.starts, clock())
		f.mu.Unlock()
		if r.Attempt <= f.fails {
			if f.panics && r.Attempt == 2 {
				panic("attempt 2 panics")
			}
			return errors.New("attempt failed")
		}
		return nil
	}
}

func (f *flaky) snapshot() ([]Run, []time.Time) {
	f.exclusive.mu.Lock()
	runs := append([]Run(nil), f.exclusive.runs...)
	f.exclusive.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	return runs, append([]time.Time(nil), f.starts...)
}

// Backoff: each delay is in [0, min(backoff·2^(k-1), cap)), the same for
// the same task, fire and attempt, spread over the whole window (full
// jitter), and never overflows, whatever the attempt and durations.
func TestRetryDelayBackoffAndCap(t *testing.T) {
	const backoff, cap = 10 * time.Second, 5 * time.Minute
	for k := 1; k <= 12; k++ {
		window := min(backoff<<(k-1), cap)
		var most, sum time.Duration
		const n = 2000
		for i := range n {
			fire := epoch.Add(time.Duration(i) * time.Hour)
			d := retryDelay("report", fire, k, backoff, cap)
			if d < 0 || d >= window {
				t.Fatalf("attempt %d of fire %v: delay %v, want in [0, %v)", k+1, fire, d, window)
			}
			if again := retryDelay("report", fire, k, backoff, cap); again != d {
				t.Fatalf("attempt %d: delay %v, then %v for the same fire", k+1, d, again)
			}
			most, sum = max(most, d), sum+d
		}
		if most < window*95/100 {
			t.Errorf("attempt %d: longest of %d delays %v, want near the window %v (full jitter)", k+1, n, most, window)
		}
		if mean := sum / n; mean < window*45/100 || mean > window*55/100 {
			t.Errorf("attempt %d: mean delay %v, want about half the window %v", k+1, mean, window)
		}
	}
	if a, b := retryDelay("a", epoch, 1, time.Hour, time.Hour), retryDelay("b", epoch, 1, time.Hour, time.Hour); a == b {
		t.Errorf("tasks a and b retry the same fire after the same delay %v: failing tasks would retry in step", a)
	}
	for _, c := range []struct {
		k            int
		backoff, cap time.Duration
	}{{MaxRetries, MaxRetryBackoff, MaxRetryBackoff}, {63, time.Second, MaxRetryBackoff}, {64, 1, 1}, {math.MaxInt32, time.Nanosecond, time.Hour}} {
		if d := retryDelay("x", epoch, c.k, c.backoff, c.cap); d < 0 || d >= c.cap {
			t.Errorf("attempt %d, backoff %v, cap %v: delay %v, want in [0, cap)", c.k+1, c.backoff, c.cap, d)
		}
	}
}

// A failed run is retried, after its backoff, as a run of the same fire
// with the next attempt number, under a fencing token above the failed
// attempt's, once in the cluster; the history keeps every attempt; a run
// that succeeds ends the retries.
func TestRetryRunsTheFireAgainAfterItsBackoff(t *testing.T) {
	c := newCluster(t)
	f := &flaky{fails: 2, panics: true}
	const backoff = 30 * time.Second
	c.start(3, func() []Task {
		return []Task{NewTask(f.run(c.fc.Now), Cron("@hourly"), Lock("k"), Name("report"), Retry(3), RetryBackoff(backoff))}
	})
	fire := epoch.Add(time.Hour)
	c.step(time.Hour, time.Minute)
	runs, _ := f.snapshot()
	if len(runs) != 1 || runs[0].Attempt != 1 || !runs[0].Fire.Equal(fire) {
		t.Fatalf("runs after the first fire: %+v; want attempt 1 of %v", runs, fire)
	}
	for k := 1; k <= 2; k++ {
		delay := retryDelay("report", fire, k, backoff, 100*backoff)
		// The failed attempt returned at once: its retry is due delay
		// after it started.
		_, starts := f.snapshot()
		due := starts[k-1].Add(delay)
		c.step(delay+3*time.Second, time.Second)
		runs, starts = f.snapshot()
		if len(runs) != k+1 {
			t.Fatalf("after attempt %d failed and its backoff %v: %d runs, want %d", k, delay, len(runs), k+1)
		}
		r := runs[k]
		if r.Attempt != k+1 || !r.Fire.Equal(fire) || r.Manual || r.Lease == nil || r.Lease.Token() <= runs[k-1].Lease.Token() {
			t.Fatalf("run %d = %+v; want attempt %d of %v under a token above %d", k+1, r, k+1, fire, runs[k-1].Lease.Token())
		}
		if s := starts[k]; s.Before(due) || s.After(due.Add(2*time.Second)) {
			t.Errorf("attempt %d started at %v, want within a poll after its due time %v", k+1, s, due)
		}
	}
	c.step(10*time.Minute, time.Second)
	runs, _ = f.snapshot()
	if len(runs) != 3 || f.most.Load() != 1 {
		t.Fatalf("%d runs (at most %d at once) after attempt 3 succeeded, want 3, one at a time", len(runs), f.most.Load())
	}
	hist, err := c.nodes[0].History(context.Background(), "report")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hist {
		got = append(got, string(h.Outcome)+"@"+strings.Repeat("+", h.Attempt))
	}
	if want := "ok@+++ panic@++ error@"; strings.Join(got, " ") != want {
		t.Errorf("history %v, want %s (newest first; + per attempt above the first)", got, want)
	}
	if p, _ := c.store.Poll(context.Background()); len(p.Retries) != 0 {
		t.Errorf("retries %v pending after the success", p.Retries)
	}
}

// Retries stop after the last attempt; the next fire starts over at
// attempt 1. A retry of a manual run is manual too.
func TestRetryGivesUpAfterTheLastAttempt(t *testing.T) {
	c := newCluster(t)
	f := &flaky{fails: math.MaxInt}
	c.start(2, func() []Task {
		return []Task{NewTask(f.run(c.fc.Now), Cron("@hourly"), Lock("k"), Name("report"), Retry(2),
			RetryBackoff(time.Second), RetryMaxBackoff(time.Second))}
	})
	c.step(time.Hour+30*time.Second, time.Second)
	runs, _ := f.snapshot()
	if len(runs) != 3 {
		t.Fatalf("%d runs of a fire that always fails with Retry(2), want 3", len(runs))
	}
	if err := c.nodes[1].RunNow(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	c.step(time.Hour, time.Second)
	runs, _ = f.snapshot()
	var attempts []int
	manual := 0
	for _, r := range runs {
		attempts = append(attempts, r.Attempt)
		if r.Manual {
			manual++
		}
	}
	if want := []int{1, 2, 3, 1, 2, 3, 1, 2, 3}; !equalInts(attempts, want) || manual != 3 {
		t.Fatalf("attempts %v (%d manual), want %v: a fire, a manual run and the next fire, 3 attempts each (3 manual)", attempts, manual, want)
	}
	if f.most.Load() != 1 {
		t.Errorf("%d runs overlapped, want 1", f.most.Load())
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A scheduled fire due while a retry of an earlier fire is pending is
// skipped on every node, recorded once by the node that claimed it; once
// the retry ran, the fires run again.
func TestFireDueWhileARetryIsPendingIsSkipped(t *testing.T) {
	c := newCluster(t)
	f := &flaky{fails: 1}
	const backoff = 10 * time.Minute
	c.start(3, func() []Task {
		return []Task{NewTask(f.run(c.fc.Now), Cron("* * * * *"), Lock("k"), Name("sync"), Retry(1), RetryBackoff(backoff))}
	})
	first := epoch.Add(time.Minute)
	delay := retryDelay("sync", first, 1, backoff, 100*backoff)
	if delay < 2*time.Minute {
		t.Fatalf("the hash gives a delay of %v: pick a task name whose delay spans a few fires", delay)
	}
	c.step(time.Minute+delay+time.Minute, time.Second)
	runs, _ := f.snapshot()
	var fires []time.Time
	for _, r := range runs {
		fires = append(fires, r.Fire)
	}
	if len(runs) < 3 || !runs[0].Fire.Equal(first) || runs[1].Attempt != 2 || !runs[1].Fire.Equal(first) {
		t.Fatalf("runs of fires %v; want the first fire, then its retry, then the next fires", fires)
	}
	skipped := c.skips.skippedFires(OutcomeRetrying)
	for m := first.Add(time.Minute); m.Before(first.Add(delay)); m = m.Add(time.Minute) {
		if !skipped[m] {
			t.Errorf("fire %v, due while the retry was pending, was not skipped with %q", m, OutcomeRetrying)
		}
	}
	if next := runs[2].Fire; !next.After(first.Add(delay)) || next.After(first.Add(delay+time.Minute)) {
		t.Errorf("the first fire run after the retry is %v, want the first after the retry ran (%v)", next, first.Add(delay))
	}
	hist, err := c.nodes[0].History(context.Background(), "sync")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[time.Time]int{}
	for _, h := range hist {
		if h.Outcome == string(OutcomeRetrying) {
			recorded[h.Fire]++
		}
	}
	for m := range skipped {
		if recorded[m] != 1 {
			t.Errorf("fire %v skipped while retrying is in the history %d times, want once (by its claimer)", m, recorded[m])
		}
	}

	// The audit finds the first fire ran (its last attempt, the retry),
	// every fire skipped while a retry was pending skipped (the later
	// fires fail once too), and none failed or missed.
	c.step(3*time.Minute, time.Second)
	skipped = c.skips.skippedFires(OutcomeRetrying)
	a, err := c.nodes[2].Audit(context.Background(), "sync")
	if err != nil {
		t.Fatal(err)
	}
	if a.Missed != 0 || a.Failed != 0 || a.Ran+a.Skipped != len(a.Fires) {
		t.Errorf("audit: %d ran, %d skipped, %d failed, %d missed of %d; want only ran and skipped", a.Ran, a.Skipped, a.Failed, a.Missed, len(a.Fires))
	}
	for _, af := range a.Fires {
		switch {
		case af.Fire.Equal(first) && (af.Status != FireRan || af.Attempt != 2 || af.Outcome != OutcomeOK):
			t.Errorf("audit of the first fire: %+v; want ran, ok, at attempt 2", af)
		case skipped[af.Fire] != (af.Status == FireSkipped) || (skipped[af.Fire] && af.Outcome != OutcomeRetrying):
			t.Errorf("audit of %v: %+v; want skipped, %q, exactly for the fires skipped while retrying", af.Fire, af, OutcomeRetrying)
		}
	}
}

// A retry that falls due while its task is paused is taken and recorded as
// paused, and does not run after the resume.
func TestRetryOfAPausedTaskIsDropped(t *testing.T) {
	c := newCluster(t)
	f := &flaky{fails: 1}
	c.start(2, func() []Task {
		return []Task{NewTask(f.run(c.fc.Now), Cron("@daily"), Lock("k"), Name("report"), Retry(3), RetryBackoff(time.Hour))}
	})
	c.step(24*time.Hour, time.Minute)
	if err := c.nodes[1].Pause(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Hour, time.Minute)
	if err := c.nodes[1].Resume(context.Background(), "report"); err != nil {
		t.Fatal(err)
	}
	c.step(3*time.Hour, time.Minute)
	runs, _ := f.snapshot()
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1: the retry due while paused must not run", len(runs))
	}
	hist, _ := c.nodes[0].History(context.Background(), "report")
	if len(hist) != 2 || hist[0].Outcome != string(OutcomePaused) || hist[0].Attempt != 2 {
		t.Fatalf("history %+v; want the paused attempt 2, then the failed run", hist)
	}
	if p, _ := c.store.Poll(context.Background()); len(p.Retries) != 0 {
		t.Errorf("retries %v pending after the paused one was dropped", p.Retries)
	}
}

// The node that failed a run dies before the retry is due: another node
// runs it, once.
func TestRetryRunsOnAnotherNodeWhenTheFailedOneStops(t *testing.T) {
	c := newCluster(t)
	f := &flaky{fails: 1}
	c.start(3, func() []Task {
		return []Task{NewTask(f.run(c.fc.Now), Cron("@daily"), Lock("k"), Name("report"), Retry(1), RetryBackoff(time.Hour))}
	})
	c.step(24*time.Hour, time.Minute)
	runs, _ := f.snapshot()
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	failed := runs[0].Node
	var alive []*Scheduler
	for _, s := range c.nodes {
		if s.node == failed {
			if err := s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			continue
		}
		alive = append(alive, s)
	}
	step(t, c.fc, 2*time.Hour, time.Minute, alive...)
	runs, _ = f.snapshot()
	if len(runs) != 2 || runs[1].Attempt != 2 || runs[1].Node == failed {
		t.Fatalf("runs %+v; want the retry, attempt 2, on a node other than %s", runs, failed)
	}
}

// Bad retry options fail validation, naming the option, the value and the
// rule.
func TestRetryValidation(t *testing.T) {
	noop := func(context.Context) error { return nil }
	for _, c := range []struct {
		name  string
		state bool
		opts  []Option
		want  string
	}{
		{"unlocked", true, []Option{Retry(3)}, `option retry = "3": needs lock`},
		{"no state", false, []Option{Lock("k"), Retry(3)}, `option retry = "3": needs a task state store`},
		{"too many", true, []Option{Lock("k"), Retry(MaxRetries + 1)}, `option retry = "101": must not exceed 100`},
		{"negative", true, []Option{Lock("k"), Retry(-1)}, `option retry = "-1": must not be negative`},
		{"negative backoff", true, []Option{Lock("k"), Retry(1), RetryBackoff(-time.Second)}, `option retryBackoff = "-1s": must be positive`},
		{"huge backoff", true, []Option{Lock("k"), Retry(1), RetryBackoff(math.MaxInt64)}, `option retryBackoff = "2562047h47m16.854775807s": must not exceed 24h0m0s`},
		{"backoff without retry", true, []Option{Lock("k"), RetryBackoff(time.Second)}, `option retryBackoff = "1s": needs retry`},
		{"cap below backoff", true, []Option{Lock("k"), Retry(1), RetryBackoff(time.Minute), RetryMaxBackoff(time.Second)},
			`option retryMaxBackoff = "1s": must not be below retryBackoff (1m0s)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Driver: newCluster(t).driver}
			if c.state {
				st, _ := taskstate.NewInProcess(0)
				cfg.State = st
			}
			s := New(cfg)
			err := s.Add(NewTask(noop, append([]Option{Cron("@daily"), Name("report")}, c.opts...)...))
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Add: %v; want ErrInvalidSpec with %q", err, c.want)
			}
		})
	}
	s := New(Config{Driver: newCluster(t).driver, State: func() taskstate.Store { st, _ := taskstate.NewInProcess(0); return st }()})
	mustAdd(t, s, NewTask(noop, Cron("@daily"), Lock("k"), Name("ok"), Retry(2)))
	spec := s.Tasks()[0].Spec
	if spec.Retries != 2 || spec.RetryBackoff != DefaultRetryBackoff || spec.RetryMaxBackoff != 100*DefaultRetryBackoff {
		t.Errorf("spec %+v; want 2 retries, the default backoff and 100 times it as the cap", spec)
	}
}
