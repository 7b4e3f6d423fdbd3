package chaos

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// newFailoverDriver returns a driver in namespace ns on a new Sentinel
// client of s; both are closed by t.Cleanup.
func newFailoverDriver(t *testing.T, s *redistest.Sentinel, ns string, minReplicas int) (*redislocks.Driver, *redis.Client) {
	t.Helper()
	c := s.Client()
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: ns, MinReplicas: minReplicas})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, c
}

// isolateReplica makes every later write of the master miss the replica:
// the replica is stopped (SIGSTOP) and the master closes its replication
// link, so nothing written afterwards is sent or buffered for it, and the
// stopped replica cannot reconnect. Writes made before have reached it.
func isolateReplica(t *testing.T, s *redistest.Sentinel) {
	t.Helper()
	s.Master.WaitReplicated()
	s.Replica.Pause()
	n, err := s.Master.Client().ClientKillByFilter(context.Background(), "TYPE", "replica").Result()
	if err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE replica = %d, %v; want the one link closed", n, err)
	}
}

// failOverIsolated kills the master and lets the sentinels promote the
// replica that isolateReplica stopped, so the writes it missed are lost.
func failOverIsolated(t *testing.T, s *redistest.Sentinel) {
	t.Helper()
	s.Master.Kill()
	s.Replica.Resume()
	s.WaitPromoted()
}

// waitFollows waits until c's commands reach the promoted replica: its
// pooled connections to the dead master are gone.
func waitFollows(t *testing.T, c *redis.Client) {
	t.Helper()
	eventually(t, 10*time.Second, "the Sentinel client following the new master", func() bool {
		role, err := c.Do(context.Background(), "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
}

// A real Sentinel failover to a replica that missed the last mints (its
// token counters are behind): every token minted on the new master is
// greater than every token minted before the failover, on the old master,
// replicated or not.
func TestTokensIncreaseAcrossFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	d, c := newFailoverDriver(t, s, "failover", 0)
	ctx := context.Background()
	keys := []string{"a", "b", "c"}
	var maxBefore uint64
	mint := func() {
		for _, k := range keys {
			l, err := d.Acquire(ctx, k, time.Minute)
			if err != nil {
				t.Fatalf("Acquire %q before the failover: %v", k, err)
			}
			maxBefore = max(maxBefore, l.Token())
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	mint()
	isolateReplica(t, s)
	for range 50 { // mints the promoted replica will not know of
		mint()
	}
	failOverIsolated(t, s)
	waitFollows(t, c)

	for _, k := range keys {
		counter, err := c.Get(ctx, "ndigo:{failover:"+k+"}:token").Uint64()
		if err != nil || counter >= maxBefore {
			t.Fatalf("the new master's counter of %q = %d, %v; want one below the last mint %d (the lost mints)", k, counter, err, maxBefore)
		}
		l, err := d.Acquire(ctx, k, time.Minute)
		if err != nil {
			t.Fatalf("Acquire %q after the failover: %v", k, err)
		}
		if l.Token() <= maxBefore {
			t.Errorf("token of %q after the failover = %d; want above every earlier token (max %d)", k, l.Token(), maxBefore)
		}
	}
}

// With MinReplicas 1 a lease exists only once the replica has it, so a
// failover keeps it: a new Acquire on the promoted replica gets
// ErrNotAcquired while the old lease's TTL lasts. Without MinReplicas a lease
// written while the replica was cut off is lost in the failover and a
// second holder gets the key while the first still holds it (its Done has
// not closed); its token is greater, so fenced storage refuses the first.
// With the replica cut off, a MinReplicas Acquire fails with
// ErrNotReplicated instead of granting that losable lease.
func TestFailoverKeepsReplicatedLease(t *testing.T) {
	s := redistest.StartSentinel(t)
	safe, _ := newFailoverDriver(t, s, "failover", 1)
	plain, _ := newFailoverDriver(t, s, "failover", 0)
	ctx := context.Background()
	const ttl = time.Minute

	kept, err := safe.Acquire(ctx, "kept", ttl)
	if err != nil {
		t.Fatalf("Acquire with MinReplicas 1 and a live replica: %v", err)
	}
	isolateReplica(t, s)
	lost, err := plain.Acquire(ctx, "lost", ttl)
	if err != nil {
		t.Fatalf("Acquire without MinReplicas, replica cut off: %v", err)
	}
	if _, err := safe.Acquire(ctx, "refused", ttl); !errors.Is(err, redislocks.ErrNotReplicated) || !errors.Is(err, redislocks.ErrRedis) {
		t.Fatalf("Acquire with MinReplicas 1, replica cut off = %v; want ErrNotReplicated", err)
	}
	failOverIsolated(t, s)

	// Drivers of another node, on their own clients.
	safe2, c2 := newFailoverDriver(t, s, "failover", 1)
	plain2, _ := newFailoverDriver(t, s, "failover", 0)
	waitFollows(t, c2)
	if v, err := c2.Get(ctx, "ndigo:{failover:kept}:lock").Result(); err != nil || !strings.HasPrefix(v, strconv.FormatUint(kept.Token(), 10)+":") {
		t.Fatalf("the new master's copy of the replicated lease = %q, %v; want token %d", v, err, kept.Token())
	}
	for _, d := range []*redislocks.Driver{safe2, plain2} {
		if l, err := d.Acquire(ctx, "kept", ttl); !errors.Is(err, locks.ErrNotAcquired) {
			t.Errorf("second holder of the replicated lease after the failover: %v, %v; want ErrNotAcquired", l, err)
		}
	}

	second, err := plain2.Acquire(ctx, "lost", ttl)
	if err != nil {
		t.Fatalf("Acquire of the lost lease's key after the failover = %v; want the key free on the new master", err)
	}
	select {
	case <-lost.Done():
		t.Fatal("the first holder's lease ended; the test needs it still held to show two holders")
	default:
	}
	if second.Token() <= lost.Token() {
		t.Errorf("second holder's token %d is not above the first holder's %d", second.Token(), lost.Token())
	}
	if err := lost.Extend(ctx, ttl); !errors.Is(err, locks.ErrLeaseLost) {
		t.Errorf("Extend by the first holder = %v; want ErrLeaseLost (the new master knows only the second)", err)
	}
	if _, err := plain2.Acquire(ctx, "refused", ttl); err != nil {
		t.Errorf("Acquire of the key refused before the failover = %v; want it free", err)
	}
}

// fireRecorder is a scheduling.Listener that records every run and skip of
// the schedulers it is given to.
type fireRecorder struct {
	scheduling.NopListener
	mu    sync.Mutex // protects runs and skips
	runs  []scheduling.Event
	skips []scheduling.Event
}

func (r *fireRecorder) AfterRun(_ context.Context, e scheduling.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, e)
}

func (r *fireRecorder) Skipped(e scheduling.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skips = append(r.skips, e)
}

// events returns copies of the runs and skips recorded so far.
func (r *fireRecorder) events() (runs, skips []scheduling.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs), slices.Clone(r.skips)
}

// schedTTL is the lease TTL of the failover tests' task, which fires every
// second.
const schedTTL = 2 * time.Second

// failoverSchedulers are two schedulers ("a" and "b") on their own Sentinel
// clients, sharing task Tick (every second, lock "tick"), with one recorder.
type failoverSchedulers struct {
	t      *testing.T
	rec    *fireRecorder
	scheds []*scheduling.Scheduler
	first  time.Time // the first fire both schedulers run
}

// startSchedulers starts the schedulers on s with drivers of minReplicas.
// Their clients fail a command after 300ms without retrying, so that fires
// sent to a hung master fail within a period.
func startSchedulers(t *testing.T, s *redistest.Sentinel, minReplicas int) *failoverSchedulers {
	t.Helper()
	fs := &failoverSchedulers{t: t, rec: &fireRecorder{}}
	for _, node := range []string{"a", "b"} {
		c := s.Client(&redis.FailoverOptions{ContextTimeoutEnabled: true, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "sched", MinReplicas: minReplicas})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		sc := scheduling.New(scheduling.Config{Driver: d, Node: node, Location: time.UTC,
			Logger: slog.New(slog.DiscardHandler), Listeners: []scheduling.Listener{fs.rec}})
		err = sc.Add(scheduling.NewTask(func(context.Context) error { return nil },
			scheduling.Name("Tick"), scheduling.Cron("* * * * * *"), scheduling.Lock("tick"), scheduling.LockTTL(schedTTL)))
		if err != nil {
			t.Fatal(err)
		}
		fs.scheds = append(fs.scheds, sc)
	}
	for _, sc := range fs.scheds {
		if err := sc.Start(); err != nil {
			t.Fatal(err)
		}
	}
	fs.first = time.Now().Truncate(time.Second).Add(time.Second)
	return fs
}

// waitRuns waits until n fires at or after from have run.
func (fs *failoverSchedulers) waitRuns(n int, from time.Time, within time.Duration, what string) {
	fs.t.Helper()
	eventually(fs.t, within, what, func() bool {
		runs, _ := fs.rec.events()
		return len(slices.DeleteFunc(runs, func(e scheduling.Event) bool { return e.Fire.Before(from) })) >= n
	})
}

// stop stops both schedulers.
func (fs *failoverSchedulers) stop() {
	fs.t.Helper()
	for _, sc := range fs.scheds {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := sc.Stop(ctx); err != nil {
			fs.t.Error(err)
		}
		cancel()
	}
}

// check checks the recorded fires against the failover window
// [windowStart, windowEnd]: outside it every fire ran exactly once and every
// skip was "lock held" or "already run"; inside it no fire ran more than
// twice and a skip may also be "still running" or a lock failure wrapping
// ErrRedis, of which there was at least one. Tokens increase with the fires
// throughout. It returns the lock failures.
func (fs *failoverSchedulers) check(windowStart, windowEnd time.Time) []scheduling.Event {
	t := fs.t
	t.Helper()
	runs, skips := fs.rec.events()
	inWindow := func(f time.Time) bool { return !f.Before(windowStart) && !f.After(windowEnd) }
	byFire := map[time.Time][]scheduling.Event{}
	var last time.Time
	for _, e := range runs {
		byFire[e.Fire] = append(byFire[e.Fire], e)
		if e.Fire.After(last) {
			last = e.Fire
		}
	}
	for f := fs.first; !f.After(last); f = f.Add(time.Second) {
		n := len(byFire[f])
		switch {
		case inWindow(f) && n > 2:
			t.Errorf("fire %s (in the failover window) ran %d times; want at most 2", f.Format("15:04:05"), n)
		case !inWindow(f) && n != 1:
			t.Errorf("fire %s (outside the failover window) ran %d times; want once", f.Format("15:04:05"), n)
		}
	}
	slices.SortFunc(runs, func(a, b scheduling.Event) int { return cmp.Compare(a.Token, b.Token) })
	for i := 1; i < len(runs); i++ {
		if runs[i].Token == runs[i-1].Token || runs[i].Fire.Before(runs[i-1].Fire) {
			t.Errorf("tokens do not follow the fires: %d for fire %s, %d for fire %s", runs[i-1].Token, runs[i-1].Fire.Format("15:04:05"),
				runs[i].Token, runs[i].Fire.Format("15:04:05"))
		}
	}
	var failed []scheduling.Event
	for _, e := range skips {
		switch {
		case e.Outcome == scheduling.OutcomeLockHeld || e.Outcome == scheduling.OutcomeAlreadyRun:
		case inWindow(e.Fire) && e.Outcome == scheduling.OutcomeLockFailed && errors.Is(e.Err, redislocks.ErrRedis):
			failed = append(failed, e)
		case inWindow(e.Fire) && (e.Outcome == scheduling.OutcomeRunning || e.Outcome == scheduling.OutcomeLockPending):
		default:
			t.Errorf("node %s skipped fire %s: %s, %v; not expected at that fire", e.Node, e.Fire.Format("15:04:05"), e.Outcome, e.Err)
		}
	}
	if len(failed) == 0 {
		t.Error("no fire failed with ErrRedis in the failover window")
	}
	return failed
}

// Two schedulers on Sentinel clients share a locked task that fires every
// second while the master hangs (SIGSTOP) and the sentinels promote the
// replica. Outside the failover window every fire runs exactly once; inside
// it (from one period before the pause until the lease TTL plus a period
// after the promotion) a fire may be skipped, failing with ErrRedis or
// finding the lock held by a lease whose release could not reach the hung
// master, and a fire whose lease was on the old master only may run a
// second time on the new one, never more. Tokens increase across the
// failover.
func TestSchedulerAcrossFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	fs := startSchedulers(t, s, 0)
	fs.waitRuns(3, fs.first, 10*time.Second, "three runs before the failover")
	paused := time.Now()
	s.PauseMaster()
	promoted := time.Now()
	windowEnd := promoted.Add(schedTTL + time.Second)
	fs.waitRuns(3, windowEnd, 15*time.Second, "three runs after the failover window")
	fs.stop()
	t.Logf("master paused at %s, replica promoted %v later", paused.Format("15:04:05.000"), promoted.Sub(paused))
	fs.check(paused.Add(-time.Second), windowEnd)
}

// The same with MinReplicas 1: once the replica is promoted it has no
// replica of its own, so fires fail with ErrNotReplicated (the driver gives
// every lease back) until the old master is resumed as a replica of the new
// one; from then on every fire runs exactly once again.
func TestSchedulerAcrossFailoverMinReplicas(t *testing.T) {
	s := redistest.StartSentinel(t)
	fs := startSchedulers(t, s, 1)
	fs.waitRuns(3, fs.first, 10*time.Second, "three runs before the failover")
	paused := time.Now()
	s.PauseMaster()
	eventually(t, 10*time.Second, "a fire refused for want of a replica", func() bool {
		_, skips := fs.rec.events()
		return slices.ContainsFunc(skips, func(e scheduling.Event) bool { return errors.Is(e.Err, redislocks.ErrNotReplicated) })
	})
	s.RejoinMaster()
	rejoined := time.Now()
	windowEnd := rejoined.Add(schedTTL + time.Second)
	fs.waitRuns(3, windowEnd, 15*time.Second, "three runs after the old master rejoined")
	fs.stop()
	t.Logf("master paused at %s, rejoined as a replica %v later", paused.Format("15:04:05.000"), rejoined.Sub(paused))
	fs.check(paused.Add(-time.Second), windowEnd)
}
