package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// MaxClaimTTL caps the TTL of a fire claim. A claim lives one period of the
// task's schedule (the time to its next fire), up to this cap, so nodes
// whose clocks differ by less than that never run the same fire twice.
const MaxClaimTTL = time.Minute

// A Run is what a running task knows about its run.
type Run struct {
	Task  string      // the task's name
	Fire  time.Time   // the scheduled instant, identical on every node
	Node  string      // the node running it
	Lease locks.Lease // the task's lease (its Token fences writes); nil if unlocked
}

type runKey struct{}

// runContext carries a Run; one allocation, where context.WithValue with a
// Run would take two.
type runContext struct {
	context.Context
	run Run
}

func (c *runContext) Value(key any) any {
	if key == (runKey{}) {
		return &c.run
	}
	return c.Context.Value(key)
}

// RunFromContext returns the Run of the task running with ctx.
func RunFromContext(ctx context.Context) (Run, bool) {
	if r, ok := ctx.Value(runKey{}).(*Run); ok {
		return *r, true
	}
	return Run{}, false
}

// An Outcome says how a fire ended on this node.
type Outcome string

// Outcomes of a fire.
const (
	OutcomeOK         Outcome = "ok"                     // the task returned nil
	OutcomeError      Outcome = "error"                  // the task returned an error
	OutcomePanic      Outcome = "panic"                  // the task panicked
	OutcomeLockHeld   Outcome = "skipped: lock held"     // another holder had the lock
	OutcomeRunning    Outcome = "skipped: still running" // the previous run on this node was still going
	OutcomeAlreadyRun Outcome = "skipped: already run"   // another node claimed this fire
	OutcomeLockFailed Outcome = "failed: lock"           // the driver failed, or there was none
)

// LastRun describes the last fire of a task on this node.
type LastRun struct {
	Fire     time.Time     // the scheduled instant
	Start    time.Time     // when the task started; zero if it did not run
	Duration time.Duration // how long it ran
	Outcome  Outcome
	Err      error  // the task's error, panic or lock failure
	Token    uint64 // the lease's fencing token; 0 if unlocked or not acquired
	Node     string
}

// TaskInfo describes one task in a scheduler's registry.
type TaskInfo struct {
	Name     string
	Type     string // the controller type; "" for a plain func
	Method   string
	Spec     Spec
	Next     time.Time // the next fire; zero if none
	Running  bool      // a run is going on this node
	Last     LastRun   // zero Fire if it never fired
	Runs     uint64    // fires that ran (whatever they returned)
	Skips    uint64    // fires skipped: lock held, still running, already run
	Failures uint64    // runs that errored or panicked, and lock failures
}

// dispatch starts the fires of one batch. Unlocked tasks start at once.
// Locked ones acquire their locks and claims one after another in batch
// order, and only then start, so that among tasks sharing a lock the
// earlier-registered one holds it while the others try: it wins and they
// skip. The caller has counted the dispatch as begun.
func (s *Scheduler) dispatch(batch []firing) {
	var locked []firing
	// Count the runs as begun before any starts, in one step: the batch is
	// on the path to every run's start.
	s.active.Add(int64(len(batch)))
	s.runWG.Add(len(batch))
	var busy []firing
	for _, f := range batch {
		if !f.e.running.CompareAndSwap(false, true) {
			s.end()
			busy = append(busy, f)
			continue
		}
		if f.e.spec.Lock == "" {
			go s.run(f, nil)
			continue
		}
		s.end()
		locked = append(locked, f)
	}
	// Skips are recorded, logged and told to listeners after the runs of
	// the batch started: they are not on the path to a run.
	for _, f := range busy {
		s.skip(f, OutcomeRunning, nil, 0)
		s.log.Info("previous run still going; fire skipped", "task", f.e.name, "fire", f.fire)
	}
	if len(locked) == 0 {
		s.end()
		return
	}
	go func() {
		defer s.end()
		leases := make([]locks.Lease, len(locked))
		for i, f := range locked {
			leases[i] = s.acquire(f)
		}
		for i, f := range locked {
			if leases[i] != nil {
				s.start(f, leases[i])
			}
		}
	}()
}

// acquire takes f's lock and claim. It returns the lease, or nil when the
// fire does not run now (skipped, failed, or left to a lock waiter).
func (s *Scheduler) acquire(f firing) locks.Lease {
	e := f.e
	if s.stopping() {
		e.running.Store(false)
		return nil
	}
	if s.driver == nil {
		s.fail(f, fmt.Errorf("%w: task %s needs lock %q", ErrNoDriver, e.name, e.spec.Lock))
		return nil
	}
	lease, err := s.driver.Acquire(s.acquireCtx, e.spec.Lock, e.spec.LockTTL)
	if errors.Is(err, locks.ErrNotAcquired) && e.spec.LockWait > 0 {
		s.log.Debug("waiting for lock", "task", e.name, "fire", f.fire,
			"lock", e.spec.Lock, "budget", e.spec.LockWait)
		s.begin()
		go func() {
			defer s.end()
			lease, err := locks.Wait(s.acquireCtx, s.driver, e.spec.Lock, e.spec.LockTTL, locks.WaitOptions{
				Budget: e.spec.LockWait, Step: e.spec.LockWaitStep, Clock: s.clock})
			if lease = s.claim(f, lease, err); lease != nil {
				s.start(f, lease)
			}
		}()
		return nil
	}
	return s.claim(f, lease, err)
}

// claim takes the fire claim for f once its lock acquisition ended. It
// returns the lease if the fire is to run, and otherwise records why not.
func (s *Scheduler) claim(f firing, lease locks.Lease, err error) locks.Lease {
	e := f.e
	if errors.Is(err, locks.ErrNotAcquired) {
		s.skip(f, OutcomeLockHeld, nil, 0)
		s.log.Info(fmt.Sprintf("lock '%s' is held", e.spec.Lock), "task", e.name, "fire", f.fire, "lock", e.spec.Lock)
		return nil
	}
	if err != nil && s.stopping() {
		e.running.Store(false) // the wait was cut short by Stop
		return nil
	}
	if err != nil {
		s.fail(f, err)
		return nil
	}
	ttl := MaxClaimTTL
	if next := e.sched.Next(f.fire); !next.IsZero() {
		ttl = min(next.Sub(f.fire), MaxClaimTTL)
	}
	// The claim outlives the run: it keeps a lagging node from running the
	// same fire. Its key names the fire, so it never delays the next one.
	key := e.spec.Lock + "@" + strconv.FormatInt(f.fire.UnixMilli(), 10) + ":" + e.name
	if err := s.claimFire(e, key, ttl); err != nil {
		s.releaseLease(e, lease)
		switch {
		case errors.Is(err, locks.ErrNotAcquired):
			s.skip(f, OutcomeAlreadyRun, nil, 0)
			s.log.Info("fire already run on another node", "task", e.name, "fire", f.fire, "lock", e.spec.Lock)
		case s.stopping():
			e.running.Store(false)
		default:
			s.fail(f, err)
		}
		return nil
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("lock acquired", "task", e.name, "fire", f.fire, "lock", e.spec.Lock, "token", lease.Token())
	}
	return lease
}

// claimFire claims a fire under key for ttl. It returns an error wrapping
// locks.ErrNotAcquired when another node claimed it first. A driver with
// marks (locks.Marker) claims with a mark, which simply expires. Otherwise
// the claim is a lease, which this node releases when it claims its next
// fire (a lagging node has reached this fire by then), so that claims do not
// pile up in drivers that keep expired keys.
func (s *Scheduler) claimFire(e *entry, key string, ttl time.Duration) error {
	c, ok := locks.As[locks.Claimer](s.driver)
	if !ok {
		return fmt.Errorf("%w: driver %T keeps no claims (locks.Claimer)", ErrNoDriver, s.driver)
	}
	set, err := c.Claim(s.acquireCtx, key, 0, ttl)
	if err == nil && !set {
		err = fmt.Errorf("%w: fire claim %q is taken", locks.ErrNotAcquired, key)
	}
	return err
}

// start starts a locked run, unless Stop was called meanwhile.
func (s *Scheduler) start(f firing, lease locks.Lease) {
	if s.stopping() {
		s.releaseLease(f.e, lease)
		f.e.running.Store(false)
		return
	}
	s.begin()
	go s.run(f, lease)
}

// skip records a skipped fire and tells the listeners.
func (s *Scheduler) skip(f firing, o Outcome, err error, token uint64) {
	f.e.record(LastRun{Fire: f.fire, Outcome: o, Err: err, Token: token, Node: s.node}, counts{skips: 1})
	if o != OutcomeRunning {
		f.e.running.Store(false)
	}
	s.notifySkip(f, o, err)
}

// fail records a fire that could not run for lack of its lock.
func (s *Scheduler) fail(f firing, err error) {
	f.e.record(LastRun{Fire: f.fire, Outcome: OutcomeLockFailed, Err: err, Node: s.node}, counts{failures: 1})
	f.e.running.Store(false)
	s.log.Error("lock failed; fire not run", "task", f.e.name, "fire", f.fire, "lock", f.e.spec.Lock, "err", err)
	s.notifySkip(f, OutcomeLockFailed, err)
}

func (s *Scheduler) notifySkip(f firing, o Outcome, err error) {
	if s.notify == nil {
		return
	}
	ev := Event{Task: f.e.name, Lock: f.e.spec.Lock, Fire: f.fire, Node: s.node, Outcome: o, Err: err}
	s.notify.skipped(&ev)
}

func (s *Scheduler) releaseLease(e *entry, l locks.Lease) {
	if err := l.Release(context.Background()); err != nil {
		s.log.Warn("lease release failed", "task", e.name, "lock", e.spec.Lock, "token", l.Token(), "err", err)
	}
}

// An activeRun is a locked run in flight, so that Stop can release its lease.
type activeRun struct {
	e     *entry
	lease locks.Lease
	fire  time.Time
	since time.Time // when the run started holding the lease, on the scheduler's clock
	once  sync.Once
}

func (r *activeRun) release(s *Scheduler) {
	r.once.Do(func() { s.releaseLease(r.e, r.lease) })
}

// run runs one fire of a task. lease is nil for an unlocked task. The caller
// has counted the run as begun and set e.running.
//
// The work is split across small functions so that a run's goroutine starts
// with little stack: a thousand runs due on one tick should not each copy
// their stack while growing it.
func (s *Scheduler) run(f firing, lease locks.Lease) {
	// Deferred calls run in reverse: the lease is released before the slot
	// frees and before Stop sees the run end.
	defer s.end()
	defer f.e.running.Store(false)
	switch {
	case lease != nil:
		s.runLocked(f, lease)
	case s.observed:
		s.executeObserved(s.runCtx, f, nil, nil)
	default:
		s.execute(s.runCtx, f, nil, nil)
	}
}

// runLocked runs f under lease, which it releases when the run ends.
func (s *Scheduler) runLocked(f firing, lease locks.Lease) {
	r := &activeRun{e: f.e, lease: lease, fire: f.fire, since: s.clock.Now()}
	s.mu.Lock()
	s.locked[r] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.locked, r)
		s.mu.Unlock()
		r.release(s)
	}()
	ctx, cancel := locks.WithLease(s.runCtx, lease)
	defer cancel()
	var rn *renewal
	if f.e.spec.Renew {
		rn = s.renew(ctx, f.e, lease)
		defer rn.stop()
	}
	if s.observed {
		s.executeObserved(ctx, f, lease, rn)
		return
	}
	s.execute(ctx, f, lease, rn)
}

// execute calls the task with its run context and records the outcome.
// Runs that listeners or debug logging observe go through executeObserved
// instead, chosen by the caller from a field set by New, so that this path,
// every run's when nothing observes, stays as it was: in BenchmarkLateness,
// a branch to the observed path inside it raised the median lateness by a
// quarter.
func (s *Scheduler) execute(ctx context.Context, f firing, lease locks.Lease, rn *renewal) {
	e := f.e
	if e.spec.MaxRunTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clockwork.WithTimeout(ctx, s.clock, e.spec.MaxRunTime)
		defer cancel()
	}
	ctx = &runContext{Context: ctx, run: Run{Task: e.name, Fire: f.fire, Node: s.node, Lease: lease}}
	start := s.clock.Now()
	err, panicked := call(ctx, e.fn)
	s.finish(f, lease, rn, start, err, panicked, nil)
}

// debugOn reports whether the logger takes debug records.
func (s *Scheduler) debugOn() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }

// executeObserved is execute for a run that listeners or debug logging
// observe.
//
//go:noinline
func (s *Scheduler) executeObserved(ctx context.Context, f firing, lease locks.Lease, rn *renewal) {
	e := f.e
	if e.spec.MaxRunTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clockwork.WithTimeout(ctx, s.clock, e.spec.MaxRunTime)
		defer cancel()
	}
	ctx = &runContext{Context: ctx, run: Run{Task: e.name, Fire: f.fire, Node: s.node, Lease: lease}}
	start := s.clock.Now()
	ctx, ev := s.started(ctx, f, lease, start, s.debugOn())
	err, panicked := call(ctx, e.fn)
	s.finish(f, lease, rn, start, err, panicked, ev)
}

// started logs a run's start and tells the listeners, whose context the
// task then runs with. It returns the event that finish completes.
//
//go:noinline
func (s *Scheduler) started(ctx context.Context, f firing, lease locks.Lease, start time.Time, debug bool) (context.Context, *runEvent) {
	ev := &runEvent{debug: debug}
	ev.Event = Event{Task: f.e.name, Lock: f.e.spec.Lock, Fire: f.fire, Node: s.node, Start: start,
		Lateness: start.Sub(f.fire)}
	if lease != nil {
		ev.Token = lease.Token()
	}
	if debug { // the arguments cost allocations even when Debug is off
		s.logStart(&ev.Event)
	}
	if s.notify != nil {
		ctx = s.notify.beforeRun(ctx, ev)
	}
	return ctx, ev
}

// finish records and logs how a run ended, and tells the listeners. ev is
// nil when neither listeners nor debug logging want it.
//
// What only locked runs, listeners or debug logging need is in functions of
// its own, kept out of line, so that this frame stays small: every run's
// goroutine passes through it, and a deeper stack would make each of them
// grow its stack.
func (s *Scheduler) finish(f firing, lease locks.Lease, rn *renewal, start time.Time,
	err error, panicked bool, ev *runEvent) {
	e := f.e
	last := LastRun{Fire: f.fire, Start: start, Duration: s.clock.Since(start), Outcome: OutcomeOK,
		Err: err, Node: s.node}
	var end leaseEnd
	if lease != nil {
		last.Token = lease.Token()
		end = s.endLease(f, lease, rn)
	}
	switch {
	case panicked:
		last.Outcome = OutcomePanic
		s.log.Error("task panicked", "task", e.name, "fire", f.fire, "err", err)
	case err != nil:
		last.Outcome = OutcomeError
		s.log.Error("task failed", "task", e.name, "fire", f.fire, "err", err)
	}
	c := counts{runs: 1}
	if last.Outcome != OutcomeOK {
		c.failures = 1
	}
	e.record(last, c)
	if ev != nil {
		s.ended(ev, last.Outcome, err, last.Duration, end)
	}
}

// logStart logs a run's start at debug level; out of line, so that its
// arguments do not deepen the stack on the way to the listeners.
//
//go:noinline
func (s *Scheduler) logStart(ev *Event) {
	s.log.Debug("task started", "task", ev.Task, "fire", ev.Fire, "lateness", ev.Lateness, "token", ev.Token)
}

// leaseEnd is how a run's lease fared.
type leaseEnd struct {
	lost     bool  // it ended before the task returned
	renewErr error // the failed renewal's error
}

// endLease stops the renewal of a run's lease and checks whether the lease
// was lost under the run.
//
//go:noinline
func (s *Scheduler) endLease(f firing, lease locks.Lease, rn *renewal) leaseEnd {
	end := leaseEnd{renewErr: rn.stop()}
	select {
	case <-lease.Done(): // not yet released: the lease ended under the run
		end.lost = true
		s.log.Warn("lease lost before the task returned; its context was cancelled", "task", f.e.name,
			"fire", f.fire, "lock", f.e.spec.Lock, "token", lease.Token())
	default:
	}
	return end
}

// ended logs a run's end at debug level and tells the listeners.
//
//go:noinline
func (s *Scheduler) ended(ev *runEvent, o Outcome, err error, d time.Duration, end leaseEnd) {
	ev.Outcome, ev.Err, ev.Duration, ev.LeaseLost, ev.RenewErr = o, err, d, end.lost, end.renewErr
	if ev.debug {
		s.log.Debug("task finished", "task", ev.Task, "fire", ev.Fire, "outcome", string(o),
			"duration", d, "token", ev.Token)
	}
	if s.notify != nil {
		s.notify.afterRun(ev)
	}
}

// call runs fn, turning a panic into an error wrapping ErrPanic.
func call(ctx context.Context, fn func(context.Context) error) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack()), true
		}
	}()
	return fn(ctx), false
}

// A renewal extends a lease in the background while its run lasts.
type renewal struct {
	quit chan struct{}
	done chan struct{} // closed when the renewing goroutine returned
	once sync.Once
	err  error // the failed extension's error; read after done
}

// renew extends lease every third of the lock TTL until the renewal is
// stopped. A failed extension that finds the lease lost closes the lease's
// Done channel, which cancels the run's context.
func (s *Scheduler) renew(ctx context.Context, e *entry, lease locks.Lease) *renewal {
	ticker := s.clock.NewTicker(e.spec.LockTTL / 3)
	rn := &renewal{quit: make(chan struct{}), done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(rn.done)
		defer ticker.Stop()
		for {
			select {
			case <-rn.quit:
				return
			case <-lease.Done():
				return
			case <-ticker.Chan():
				if err := lease.Extend(ctx, e.spec.LockTTL); err != nil {
					rn.err = err
					s.log.Error("lease renewal failed", "task", e.name, "lock", e.spec.Lock, "token", lease.Token(), "err", err)
					return
				}
				if s.onRenew != nil {
					s.onRenew()
				}
			}
		}
	}()
	return rn
}

// stop ends the renewal and returns its error, if an extension failed. It is
// idempotent, and a nil renewal returns nil.
func (rn *renewal) stop() error {
	if rn == nil {
		return nil
	}
	rn.once.Do(func() { close(rn.quit) })
	<-rn.done
	return rn.err
}
