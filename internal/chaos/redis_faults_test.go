package chaos

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// eventually polls cond until it holds, failing t after within. It waits
// on real processes, so its bound is generous.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
}

// A scheduler whose Redis is killed for several seconds records each fire
// as a lock failure wrapping redislocks.ErrRedis and logs it, runs again
// once Redis is back on the same port, and leaves no goroutine behind.
func TestRedisUnreachableInProcess(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Second})
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "down"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s := scheduling.New(scheduling.Config{Driver: d, Node: "a", Location: time.UTC,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	var runs atomic.Int64
	err = s.Add(scheduling.NewTask(func(context.Context) error { runs.Add(1); return nil },
		scheduling.Name("Tick"), scheduling.Cron("@every 250ms"), scheduling.Lock("tick"), scheduling.LockTTL(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	info := func() scheduling.TaskInfo { return s.Tasks()[0] }
	eventually(t, 10*time.Second, "two runs before the outage", func() bool { return runs.Load() >= 2 })

	srv.Kill()
	killed, down := time.Now(), info().Failures
	eventually(t, 20*time.Second, "Redis down for 3s and four failed fires", func() bool {
		return time.Since(killed) >= 3*time.Second && info().Failures >= down+4
	})
	last := info().Last
	if last.Outcome != scheduling.OutcomeLockFailed || !errors.Is(last.Err, redislocks.ErrRedis) {
		t.Errorf("fire during the outage: outcome %q, err %v; want %q wrapping ErrRedis", last.Outcome, last.Err, scheduling.OutcomeLockFailed)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"lock failed; fire not run"`) || !strings.Contains(out, "redislocks: redis failed") {
		t.Errorf("the outage is not logged clearly:\n%s", out)
	}

	srv.Restart()
	back := runs.Load()
	eventually(t, 10*time.Second, "three runs after Redis came back", func() bool { return runs.Load() >= back+3 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	_ = c.Close()
	goleak.VerifyNone(t)
}

// While Redis is paused (SIGSTOP: connections open, nothing answered),
// acquisitions from many goroutines on several drivers end with an error
// wrapping ErrRedis and the context's deadline, not a lease and not a hang;
// a scheduler's fires fail within its client's read timeout; everything works
// again after Resume.
func TestRedisPausedBoundsAcquire(t *testing.T) {
	srv := redistest.Start(t)
	var drivers []*redislocks.Driver
	for range 3 {
		d, err := redislocks.New(redislocks.Options{Client: srv.Client(), Namespace: "paused"})
		if err != nil {
			t.Fatal(err)
		}
		drivers = append(drivers, d)
		if _, err := d.Acquire(context.Background(), "warm", time.Minute); err != nil && !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatal(err)
		}
	}
	slow := srv.Client(&redis.Options{ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	sd, err := redislocks.New(redislocks.Options{Client: slow, Namespace: "paused"})
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Driver: sd, Node: "a", Location: time.UTC, Logger: slog.New(slog.DiscardHandler)})
	var runs atomic.Int64
	err = s.Add(scheduling.NewTask(func(context.Context) error { runs.Add(1); return nil },
		scheduling.Name("Tick"), scheduling.Cron("@every 500ms"), scheduling.Lock("tick"), scheduling.LockTTL(2*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(context.Background()) }()
	eventually(t, 10*time.Second, "a run before the pause", func() bool { return runs.Load() >= 1 })

	srv.Pause()
	type result struct {
		lease locks.Lease
		err   error
	}
	results := make(chan result)
	const callers = 12
	for i := range callers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var r result
			if i%4 == 3 {
				r.lease, r.err = locks.Wait(ctx, drivers[i%3], "job", time.Minute, locks.WaitOptions{Budget: time.Hour})
			} else {
				r.lease, r.err = drivers[i%3].Acquire(ctx, "job", time.Minute)
			}
			results <- r
		}()
	}
	guard := time.After(10 * time.Second)
	for range callers {
		select {
		case r := <-results:
			if r.lease != nil {
				t.Errorf("an acquisition against a paused Redis returned a lease (token %d)", r.lease.Token())
			}
			if !errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, locks.ErrNotAcquired) {
				t.Errorf("acquisition against a paused Redis = %v; want the context's deadline, not ErrNotAcquired", r.err)
			}
		case <-guard:
			t.Fatal("acquisitions against a paused Redis hang past their 300ms contexts")
		}
	}
	fails := s.Tasks()[0].Failures
	eventually(t, 10*time.Second, "two failed fires while Redis is paused", func() bool { return s.Tasks()[0].Failures >= fails+2 })
	if last := s.Tasks()[0].Last; last.Outcome != scheduling.OutcomeLockFailed || !errors.Is(last.Err, redislocks.ErrRedis) {
		t.Errorf("fire while paused: outcome %q, err %v", last.Outcome, last.Err)
	}
	srv.Resume()

	for i, d := range drivers {
		l, err := d.Acquire(context.Background(), "after-"+string(rune('a'+i)), time.Minute)
		if err != nil {
			t.Fatalf("driver %d after Resume: %v", i, err)
		}
		_ = l.Release(context.Background())
	}
	// An acquisition that timed out was still queued in Redis and took the
	// lock when Redis woke, with no one to release it: the fires wait for
	// that 2s lease to expire, and then run.
	back := runs.Load()
	eventually(t, 10*time.Second, "runs after Resume", func() bool { return runs.Load() >= back+2 })
}

// Payroll example nodes: one is SIGSTOPped and the others carry on with
// every fire; Redis is then killed for several seconds, and the task's owner
// logs each fire it could not run, every node logs its failing heartbeats
// and stays up, and all resume when Redis restarts on the same port;
// finally Redis is paused (SIGSTOP) and the fires fail within go-redis's
// read timeout instead of piling up.
func TestPayrollNodesUnderFaults(t *testing.T) {
	srv := redistest.Start(t)
	p := nodetest.New(t)
	nodes := []string{"p0", "p1", "p2"}
	for _, n := range nodes {
		p.StartPayroll(n, srv.Addr(), "chaos", "3s")
	}
	const closed = "payroll closed"
	p.WaitFires(closed, "", 3, 60*time.Second)

	// A stopped node: the others run every fire. A node stopped while it
	// held the lock blocks the fires for its 3s lease, so count from 4s on.
	p.Signal("p1", syscall.SIGSTOP)
	from := nodetest.FireString(time.Now().Add(4 * time.Second).Truncate(time.Second))
	fires := p.WaitFires(closed, from, 3, 20*time.Second)[:3]
	p.CheckEveryFireOnce(closed, fires, time.Second)
	for _, f := range fires {
		if r := p.Runs(closed, f)[f]; r[0].Proc == "p1" {
			t.Errorf("the stopped node ran fire %s", f)
		}
	}
	p.Signal("p1", syscall.SIGCONT)

	// Redis down for several seconds. The nodes spread their tasks, and
	// one whose heartbeats fail keeps its last view: the owner of the task
	// logs each fire it could not run, and every node logs that its
	// heartbeats fail.
	failures := func(since int, n int, substr string) {
		t.Helper()
		skip := since
		for range n {
			_, i := p.WaitLine("a failed fire", skip, 20*time.Second, func(l nodetest.Line) bool {
				return l.Msg == "lock failed; fire not run" && l.Task == "PayrollController.CloseBooks" &&
					strings.Contains(l.Err, substr)
			})
			skip = i + 1
		}
		for _, node := range nodes {
			p.WaitLine(node+"'s failed heartbeat", since, 20*time.Second, func(l nodetest.Line) bool {
				return l.Proc == node && strings.HasPrefix(l.Msg, "membership heartbeat failed") && strings.Contains(l.Err, substr)
			})
		}
	}
	mark := len(p.All())
	srv.Kill()
	failures(mark, 3, "redislocks: redis failed")
	for _, n := range nodes {
		if !p.Running(n) {
			t.Fatalf("%s exited while Redis was down", n)
		}
	}
	srv.Restart()
	from = nodetest.FireString(time.Now().Add(2 * time.Second).Truncate(time.Second))
	fires = p.WaitFires(closed, from, 3, 20*time.Second)[:3]
	p.CheckEveryFireOnce(closed, fires, time.Second)

	// Redis hung.
	mark = len(p.All())
	srv.Pause()
	// The scheduler gives each acquisition the lock TTL; the client's own
	// read timeout may end it first.
	failures(mark, 1, "redislocks: redis failed")
	srv.Resume()
	from = nodetest.FireString(time.Now().Add(2 * time.Second).Truncate(time.Second))
	fires = p.WaitFires(closed, from, 3, 30*time.Second)[:3]
	p.CheckEveryFireOnce(closed, fires, time.Second)
	for _, n := range nodes {
		if !p.Running(n) {
			t.Fatalf("%s exited", n)
		}
	}
}
