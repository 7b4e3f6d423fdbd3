package scheduling_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

var quiet = slog.New(slog.DiscardHandler)

// cluster starts one scheduler per node on a shared in-process driver, all
// on the bubble's clock, each with a Recorder, and adds the tasks that
// tasks returns. Call inside a synctest bubble; stop with the returned func.
func cluster(t *testing.T, nodes int, d locks.Driver, tasks func() []scheduling.Task) ([]*schedulingtest.Recorder, func()) {
	t.Helper()
	var recs []*schedulingtest.Recorder
	var ss []*scheduling.Scheduler
	for i := range nodes {
		r := &schedulingtest.Recorder{}
		s := scheduling.New(scheduling.Config{Driver: d, Logger: quiet, Node: fmt.Sprint("n", i),
			Listeners: []scheduling.Listener{r}, Location: time.UTC})
		if err := s.Add(tasks()...); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		recs, ss = append(recs, r), append(ss, s)
	}
	return recs, func() {
		for _, s := range ss {
			if err := s.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}
	}
}

// work returns a task that works for d or until its context ends.
func work(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// A node that waits for the lock gets it after the winner's run ended; the
// fire is claimed before the wait, so it does not run that fire again.
// Runs longer than the period, waits longer than the period, clocks in sync.
func TestWaitersDoNotRerunAFire(t *testing.T) {
	for _, c := range []struct {
		name                  string
		nodes                 int
		cron                  string
		run, wait, ttl, total time.Duration
	}{
		{"every 400ms, 700ms runs, 3s wait", 2, "@every 400ms", 700 * time.Millisecond, 3 * time.Second, 10 * time.Second, 20 * time.Second},
		{"hourly, 90s runs, 2m wait", 3, "@hourly", 90 * time.Second, 2 * time.Minute, 10 * time.Minute, 6 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock()))
				recs, stop := cluster(t, c.nodes, d, func() []scheduling.Task {
					return []scheduling.Task{scheduling.NewTask(work(c.run), scheduling.Name("job"),
						scheduling.Cron(c.cron), scheduling.Lock("job"), scheduling.LockWait(c.wait),
						scheduling.LockTTL(c.ttl))}
				})
				time.Sleep(c.total)
				stop()
				if err := schedulingtest.AtMostOnce(recs...); err != nil {
					t.Fatal(err)
				}
				if n := len(schedulingtest.Runs(recs...)); n < 3 {
					t.Fatalf("%d fires ran, want several", n)
				}
			})
		})
	}
}

// One Extend that times out (the driver stalls longer than an attempt may
// take) does not end a renewed run: it is retried while the lease lasts.
func TestRenewalSurvivesASlowExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := schedulingtest.NewDriver(locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock())))
		slowed := false
		d.SetFaults(func(c schedulingtest.Call) schedulingtest.Fault {
			if c.Op == schedulingtest.OpExtend && !slowed {
				slowed = true
				return schedulingtest.Fault{Delay: 300 * time.Millisecond}
			}
			return schedulingtest.Fault{}
		})
		var extends []schedulingtest.Result
		d.Observe(func(r schedulingtest.Result) {
			if r.Op == schedulingtest.OpExtend {
				extends = append(extends, r)
			}
		})
		recs, stop := cluster(t, 1, d, func() []scheduling.Task {
			return []scheduling.Task{scheduling.NewTask(work(3*time.Second), scheduling.Name("job"),
				scheduling.Cron("@every 1h"), scheduling.Lock("job"), scheduling.LockTTL(900*time.Millisecond),
				scheduling.Renew())}
		})
		time.Sleep(time.Hour + 4*time.Second)
		stop()
		ended := recs[0].Ended()
		if len(ended) != 1 || ended[0].Outcome != scheduling.OutcomeOK || ended[0].LeaseLost || ended[0].RenewErr != nil {
			t.Fatalf("run %+v, want one run ending ok with its lease", ended)
		}
		if len(extends) < 2 || extends[0].Err == nil || extends[1].Err != nil {
			t.Fatalf("extends %+v: want the slow one to fail and the retry to succeed", extends)
		}
	})
}

// When no renewal gets through before the lease runs out, the run is
// cancelled with ErrRenewalFailed wrapping the driver's error; when a
// renewal finds the lease lost, with locks.ErrLeaseLost.
func TestRenewalFailureCauses(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault func(locks.Driver) schedulingtest.Fault
		want  []error
		not   error
	}{
		{"unreachable", func(locks.Driver) schedulingtest.Fault {
			return schedulingtest.Fault{Err: errors.New("connection refused")}
		}, []error{scheduling.ErrRenewalFailed, schedulingtest.ErrInjected}, locks.ErrLeaseLost},
		{"lost", nil, []error{locks.ErrLeaseLost}, scheduling.ErrRenewalFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock()))
				d := schedulingtest.NewDriver(inner)
				d.SetFaults(func(call schedulingtest.Call) schedulingtest.Fault {
					if call.Op != schedulingtest.OpExtend {
						return schedulingtest.Fault{}
					}
					if c.fault != nil {
						return c.fault(inner)
					}
					// Another holder took the key: the lease is lost.
					return schedulingtest.Fault{}
				})
				var cause error
				task := func(ctx context.Context) error {
					if c.fault == nil {
						l, _ := locks.FromContext(ctx)
						_ = l.Release(context.Background()) // the lease is gone under the run
					}
					<-ctx.Done()
					cause = context.Cause(ctx)
					return cause
				}
				_, stop := cluster(t, 1, d, func() []scheduling.Task {
					return []scheduling.Task{scheduling.NewTask(task, scheduling.Name("job"), scheduling.Cron("@every 1h"),
						scheduling.Lock("job"), scheduling.LockTTL(time.Second), scheduling.Renew())}
				})
				time.Sleep(time.Hour + 3*time.Second)
				stop()
				for _, w := range c.want {
					if !errors.Is(cause, w) {
						t.Errorf("cause %v, want %v", cause, w)
					}
				}
				if errors.Is(cause, c.not) {
					t.Errorf("cause %v, must not be %v", cause, c.not)
				}
			})
		})
	}
}

// Every spec that Add accepts runs without a panic, at the extremes of
// every duration.
func TestAcceptedSpecsRun(t *testing.T) {
	durs := []time.Duration{1, time.Millisecond, scheduling.MinRenewTTL - 1, scheduling.MinRenewTTL, time.Second,
		locks.MaxTTL, locks.MaxTTL + 1, 1<<63 - 1}
	accepted := 0
	for _, ttl := range durs {
		for _, wait := range []time.Duration{0, 1, time.Second, 1<<63 - 1} {
			for _, maxRun := range []time.Duration{0, 1, time.Hour, 1<<63 - 1} {
				step := []time.Duration{1, scheduling.MinLockWaitStep, time.Hour}[int(wait%3)]
				for _, renew := range []bool{false, true} {
					opts := []scheduling.Option{scheduling.Name("t"), scheduling.Cron("@every 1s"), scheduling.Lock("k"), scheduling.LockTTL(ttl),
						scheduling.LockWait(wait), scheduling.LockWaitStep(step)}
					if maxRun > 0 {
						opts = append(opts, scheduling.MaxRunTime(maxRun))
					}
					if renew {
						opts = append(opts, scheduling.Renew())
					}
					synctest.Test(t, func(t *testing.T) {
						d := locks.NewInProcessDriver(locks.WithClock(clockwork.NewRealClock()))
						s := scheduling.New(scheduling.Config{Driver: d, Logger: quiet})
						if err := s.Add(scheduling.NewTask(work(1500*time.Millisecond), opts...)); err != nil {
							if !strings.Contains(err.Error(), "lockTtl") && !strings.Contains(err.Error(), "maxRunTime") &&
								!strings.Contains(err.Error(), "lockWaitStep") {
								t.Errorf("ttl %v wait %v maxRun %v renew %v: %v", ttl, wait, maxRun, renew, err)
							}
							return
						}
						accepted++
						if err := s.Start(); err != nil {
							t.Fatal(err)
						}
						time.Sleep(3 * time.Second)
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						defer cancel()
						_ = s.Stop(ctx)
					})
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no spec accepted")
	}
}

// hiding is a driver wrapper that embeds locks.Driver and so hides the
// claims of the driver it wraps.
type hiding struct{ locks.Driver }

type unwrapping struct{ locks.Driver }

func (u unwrapping) Unwrap() locks.Driver { return u.Driver }

// A wrapper that hides the driver's claims is refused when a locked task is
// added, with the fix in the message; one that unwraps is accepted.
func TestWrapperHidingClaimsIsRefused(t *testing.T) {
	task := scheduling.NewTask(work(0), scheduling.Cron("@every 1s"), scheduling.Lock("k"), scheduling.Name("t"))
	s := scheduling.New(scheduling.Config{Driver: hiding{locks.NewInProcessDriver()}, Logger: quiet})
	err := s.Add(task)
	if !errors.Is(err, scheduling.ErrInvalidSpec) || !strings.Contains(err.Error(), "locks.Claimer") ||
		!strings.Contains(err.Error(), "Unwrap() locks.Driver") {
		t.Fatalf("Add behind a hiding wrapper: %v", err)
	}
	s = scheduling.New(scheduling.Config{Driver: unwrapping{locks.NewInProcessDriver()}, Logger: quiet})
	if err := s.Add(task); err != nil {
		t.Fatalf("Add behind an unwrapping wrapper: %v", err)
	}
}

// minDriver is a driver whose leases need more than 2ms, as the Redis
// driver's drift margin asks.
type minDriver struct{ *locks.InProcessDriver }

func (minDriver) MinTTL() time.Duration { return 2 * time.Millisecond }

// A lock TTL at or below the driver's minimum is refused when the task is
// added: every run would start without a live lease.
func TestLockTTLAboveDriverMinimum(t *testing.T) {
	s := scheduling.New(scheduling.Config{Driver: schedulingtest.NewDriver(minDriver{locks.NewInProcessDriver()}), Logger: quiet})
	err := s.Add(scheduling.NewTask(work(0), scheduling.Name("t"), scheduling.Cron("@every 1s"), scheduling.Lock("k"), scheduling.LockTTL(2*time.Millisecond)))
	if !errors.Is(err, scheduling.ErrInvalidSpec) || !strings.Contains(err.Error(), "minimum lease TTL (2ms)") {
		t.Fatalf("Add with lockTtl at the driver's minimum: %v", err)
	}
	if err := s.Add(scheduling.NewTask(work(0), scheduling.Name("t"), scheduling.Cron("@every 1s"), scheduling.Lock("k"), scheduling.LockTTL(3*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
}
