package scheduling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// fireKey is the key under which the fires of the task named name are
// claimed. A fire is its task's name and its instant, whatever its spec:
// the key names no lock, cron or option, so that a stored schedule changed
// to another lock, a run of a spec replaced meanwhile, and every kind of
// run claim one fire under one key, and never run it twice. The "@" keeps
// it apart from the keys of earlier versions, which were the lock, "@" and
// the name.
func fireKey(name string) string { return "@" + name }

// ClaimTTL is how long a locked task's claim record lives after its latest
// claim. The record holds the latest fire claimed in the cluster, so a node
// that reaches an older fire, however late, finds it claimed; one record per
// task, whatever the schedule.
const ClaimTTL = 24 * time.Hour

// MaxClaimLateness is how late after its instant a node may still claim a
// fire. A node that reaches a fire later than this (it was paused, or its
// clock stepped) skips it as missed, so that no claim is attempted after
// the record of a later claim could have expired.
const MaxClaimLateness = ClaimTTL / 2

// MaxJitter is the longest Jitter: a fire must start well before
// MaxClaimLateness after its instant, when it could no longer be claimed.
const MaxJitter = MaxClaimLateness / 2

// MaxCatchUp is the longest catch-up window ([CatchUp]): a missed fire must
// still be claimable when the cluster comes back.
const MaxCatchUp = MaxClaimLateness

// MinRenewTTL is the shortest lock TTL a task with Renew may have: renewals
// run every third of the TTL and a failed one is retried every twelfth, each
// bounded by a sixth, and shorter intervals would only load the driver.
const MinRenewTTL = 100 * time.Millisecond

// MinLockWaitStep is the shortest LockWaitStep: a task waiting for its lock
// asks the driver once per step.
const MinLockWaitStep = time.Millisecond

// A Run is what a running task knows about its run.
type Run struct {
	Task  string      // the task's name
	Fire  time.Time   // the scheduled instant, identical on every node
	Node  string      // the node running it
	Lease locks.Lease // the task's lease (its Token fences writes); nil if unlocked
	// Manual reports a run an operator asked for ([Scheduler.RunNow]); Fire
	// is then the instant it was asked for.
	Manual bool
	// Attempt is the run's attempt at its fire: 1 for the first run, k+1
	// for its k-th retry ([Retry]).
	Attempt int
	// Backfill reports a run of a backfill ([Scheduler.Backfill]); Fire is
	// then the past instant it runs for.
	Backfill bool
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

// A runKind is what started a fire. It is data of the one path that every
// run takes ([Scheduler.fire]), never a path of its own.
type runKind uint8

const (
	kindScheduled runKind = iota // the schedule reached the instant
	kindCatchUp                  // a node started after the instant, within the task's catch-up window
	kindManual                   // an operator asked (RunNow); the fire is the request's instant
	kindRetry                    // a failed run's retry, taken from the store; the fire is the failed run's
	kindBackfill                 // an instant of a backfill, taken from the store
)

// firing is one due fire of one entry.
type firing struct {
	e     *entry
	fire  time.Time
	at    time.Time // when it was due to start: fire, or later with Jitter; zero means fire
	kind  runKind
	retry taskstate.Retry // a retry's, as a poll read it
	taken bool            // a manual run, retry or backfill instant that this node took from the store
	step  *backfillStep   // a backfill instant's: what its take did; nil for other kinds
	// claimedElsewhere reports a paused fire that another node claimed
	// first: that node's record of it stands for the cluster's.
	claimedElsewhere bool
	// member is the fire's place in the lock batch of the fires dispatched
	// with it; nil outside one.
	member *batchMember
	// orphan is a retry or waiting fire of a deleted stored schedule,
	// which the fire takes from the store and drops (dropOrphan).
	orphan bool
	// also are locks that the fire takes before its own and holds with it
	// for its run: those of the specs that replaced e's, for a fire of a
	// replaced spec run after its instant (see alsoLock); nil for none.
	also []string
	// late is a takeover's late fire's word to its chain (runLate); nil
	// for other fires.
	late *lateTry
	// calendar is the calendar that excludes the fire's instant
	// (OutcomeExcluded); "" for none.
	calendar string
}

// alsoLock returns the firing of a fire of cur's task at instant fire, of
// kind kind, by the spec in force at fire. A fire of a spec that cur (or a
// spec between) replaced, on another lock, takes their locks too, so that
// it overlaps no run of theirs whenever it runs: it may run long after its
// instant (a retry, a fire that waited for the run going), once their gate
// opened.
func alsoLock(cur *entry, fire time.Time, kind runKind) firing {
	return alsoLockOf(cur, cur.inForce(fire), fire, kind)
}

// alsoLockOf is alsoLock for a fire of e, a spec that cur replaced (or
// cur): the spec a node ran the fire by, as it read the schedule then.
func alsoLockOf(cur, e *entry, fire time.Time, kind runKind) firing {
	f := firing{e: e, fire: fire, kind: kind}
	for x := cur; x != e && x != nil; x = x.prior {
		if l := x.spec.Lock; l != "" && l != e.spec.Lock && !slices.Contains(f.also, l) {
			f.also = append(f.also, l)
		}
	}
	return f
}

// fromStore reports a run that a node takes from the store (a manual request,
// a retry) rather than claims by its instant.
func (f *firing) fromStore() bool { return f.kind >= kindManual } // manual, retry, backfill: the kinds after kindManual

// manual reports a manual run, or a retry of one.
func (f *firing) manual() bool {
	return f.kind == kindManual || (f.kind == kindRetry && f.retry.Manual)
}

// attempt is f's attempt at its fire, 1 for its first run.
func (f *firing) attempt() int {
	if f.kind == kindRetry {
		return f.retry.Attempt
	}
	return 1
}

// due is when f was to start: its instant, shifted by its jitter.
func (f *firing) due() time.Time {
	if f.at.IsZero() {
		return f.fire
	}
	return f.at
}

// notRecorded is the outcome of a fire that is neither recorded nor told to
// listeners: Stop ended it before it ran, or a manual run left its request
// to a later poll or to the node that took it.
const notRecorded Outcome = ""

// outcomeRun is what admit answers for a fire that runs.
const outcomeRun Outcome = "run"

// storeTimeout bounds each task-state call of an unlocked task, which has no
// lock TTL to bound it.
const storeTimeout = 5 * time.Second

// A turn orders the first lock attempts of the locked fires of one batch
// that share a lock key.
type turn struct {
	prev <-chan struct{} // closed when the previous locked fire made its attempt; nil for the first
	next chan struct{}   // closed when this fire made its attempt
	all  <-chan struct{} // closed when every fire of the batch on the key made its attempt
}

// pass waits for the previous locked fire's attempt, then lets the next
// one make its own. A nil turn passes nothing.
func (t *turn) pass() {
	if t == nil {
		return
	}
	if t.prev != nil {
		<-t.prev
	}
	close(t.next)
}

// dispatch starts one goroutine per fire of a batch, each owning its fire's
// life. Locked fires that share a lock key make their first lock attempt
// (and claim) one after another in batch order, and start their runs only
// when all of them have made it, so that among tasks sharing a lock the
// earlier-registered one holds it while the others try: it wins and they
// skip. Fires on keys of their own wait for no other's turn: on a driver
// that takes many fires in one call (a locks.ClaimAcquirer), a thousand
// tasks on a thousand locks make their lock steps in one call (a
// lockBatch, one per lock TTL among them); on another, each makes its own
// at once.
func (s *Scheduler) dispatch(batch []firing) {
	s.takeoff(len(batch))
	var perKey map[string]int // locked fires per key
	for _, f := range batch {
		if k := f.e.spec.Lock; k != "" && len(batch) > 1 {
			if perKey == nil {
				perKey = make(map[string]int)
			}
			perKey[k]++
		}
	}
	var turns []*turn // by batch index; nil for a fire that waits for none
	tail := map[string]*turn{}
	for i, f := range batch {
		k := f.e.spec.Lock
		if perKey[k] < 2 {
			continue
		}
		if turns == nil {
			turns = make([]*turn, len(batch))
		}
		t := &turn{next: make(chan struct{})}
		if prev := tail[k]; prev != nil {
			t.prev = prev.next
		}
		tail[k], turns[i] = t, t
	}
	var batched []int // by batch index: the fires that make their lock steps in one call
	if _, ok := s.driver.(locks.ClaimAcquirer); ok {
		for i, f := range batch {
			if f.e.spec.Lock != "" && !f.fromStore() && f.e.spec.MaxConcurrent == 0 && perKey[f.e.spec.Lock] < 2 && f.e.passed() && f.also == nil {
				batched = append(batched, i)
			}
		}
	}
	if len(batched) > 1 {
		batchByTTL(batch, batched)
	}
	for i, f := range batch {
		var t *turn
		if turns != nil {
			if t = turns[i]; t != nil {
				t.all = tail[f.e.spec.Lock].next
			}
		}
		go s.fire(f, t)
	}
}

// fire owns one run of one task on this node, whatever started it (the
// schedule, a catch-up, an operator), from the busy check to the record:
// the single-flight flag is set here and cleared here, and the fire counts
// as in flight until this function returns. t is the turn of a locked fire
// dispatched in a batch with others on its key, nil otherwise.
func (s *Scheduler) fire(f firing, t *turn) {
	if f.step == nil { // a backfill's instant is landed by its driver (see drive)
		defer s.land()
	}
	// A fire that made no lock step, or did not run, holds up nothing of
	// its batch.
	defer f.member.started()
	defer f.member.leave(s)
	if f.orphan {
		s.dropOrphan(f)
		return
	}
	joined, busy := s.joinLate(&f, t)
	if joined {
		return
	}
	if busy {
		// A takeover's chain is the task's run going, and its queue is
		// older: a claim now (a buffering task's) would refuse its
		// instants (the simulation's seed 4937491439190989696 history 249).
		t.pass()
		s.tried(&f)
		s.skip(f, OutcomeRunning, nil)
		return
	}
	e := f.e
	if !e.enter() {
		t.pass()
		if s.spread != nil {
			s.tried(&f)
		}
		o := s.busyOutcome(&f) // before f is copied: it may claim the fire
		s.skip(f, o, nil)
		return
	}
	defer e.leave() // after the lease is released
	switch {
	case e.spec.Lock != "" || s.state != nil:
		s.fireAdmitted(f, t)
	case s.observed:
		s.executeObserved(s.runCtx, f, nil, nil)
	default:
		s.execute(s.runCtx, f, nil, nil)
	}
}

// busyOutcome is the outcome of a fire that found the previous one in
// flight: OutcomeRunning; or, for a locked task's scheduled or catch-up
// fire that this node owns, what the hold rules say (OutcomePaused and the
// like, claiming it, so that a catch-up after the resume does not run it,
// even though no node made a lock step for it); or, for a task whose fires
// wait for the run going ([Overlap]), OutcomeBuffered once this node
// claimed it.
//
//go:noinline
func (s *Scheduler) busyOutcome(f *firing) Outcome {
	e := f.e
	if f.fromStore() || s.state == nil || e.spec.Lock == "" || (s.spread != nil && !s.owns(e.spec.Lock)) {
		return e.runningOutcome()
	}
	switch o, _ := s.holdRule(f); {
	case o != outcomeRun && o != OutcomeLockFailed:
		return o
	case o == outcomeRun && e.buffers():
		ctx, cancel := withTimeout(s.acquireCtx, s.clock, e.spec.LockTTL)
		defer cancel()
		switch err := s.claim(ctx, f); {
		case err == nil:
			return OutcomeBuffered
		case errors.Is(err, locks.ErrClaimed):
			return OutcomeAlreadyRun
		case !s.stopping():
			s.log.Warn("claiming a fire to wait for the run going failed; fire skipped", "task", e.name, "fire", f.fire, "err", err)
		}
	}
	return e.runningOutcome()
}

// runningOutcome is the outcome of a fire of e skipped because the previous
// one is in flight on this node: OutcomeLockPending while that one is in
// its lock step (its driver call has not answered, or it waits for the
// key), OutcomeRunning once it runs.
func (e *entry) runningOutcome() Outcome {
	if e.waiting.Load() {
		return OutcomeLockPending
	}
	return OutcomeRunning
}

// fireAdmitted runs f if admit lets it, and records the skip otherwise.
// Out of line, so that fire's frame stays small: every run's goroutine
// starts with it.
//
//go:noinline
func (s *Scheduler) fireAdmitted(f firing, t *turn) {
	lease, o, err := s.admit(&f, t)
	if o != outcomeRun {
		s.skip(f, o, err)
		return
	}
	switch {
	case f.takenOver():
		s.log.Info("running a fire late after a takeover", "task", f.e.name, "fire", f.fire, "lateness", s.clock.Since(f.fire),
			"lock", f.e.spec.Lock, "token", token(lease))
	case f.kind == kindManual:
		s.log.Info("manual run", "task", f.e.name, "requested", f.fire, "lock", f.e.spec.Lock, "token", token(lease))
	case f.kind == kindRetry:
		if f.retry.Attempt == 1 {
			s.log.Info("running a fire that waited for the run before it", "task", f.e.name, "fire", f.fire, "lock", f.e.spec.Lock,
				"token", token(lease))
			break
		}
		s.log.Info("retrying a failed run", "task", f.e.name, "fire", f.fire, "attempt", f.retry.Attempt,
			"of", f.e.spec.Retries+1, "lock", f.e.spec.Lock, "token", token(lease))
	}
	switch {
	case lease != nil:
		s.runLocked(f, lease)
	case s.observed:
		s.executeObserved(s.runCtx, f, nil, nil)
	default:
		s.execute(s.runCtx, f, nil, nil)
	}
}

// token returns l's token, 0 for no lease.
func token(l locks.Lease) uint64 {
	if l == nil {
		return 0
	}
	return l.Token()
}

// admit decides whether f runs, in the same steps whatever started it:
//
//  0. Ownership, for a locked task of a spreading scheduler
//     ([Config.Spread]): a node that does not own the task's lock key
//     leaves the fire to the node that does, without a call.
//  1. The hold rules: a scheduled, catch-up or retry fire of a paused
//     task does not run, and is claimed (a retry taken), so that no node
//     catches it up after the resume; a manual run runs paused. A flag that
//     cannot be read fails the fire rather than run it. A scheduled or
//     catch-up fire of a task with a retry of an earlier fire pending does
//     not run either, and is claimed: the retry is the run still going.
//  2. The lease, for a locked task: Acquire, then [locks.Wait] within the
//     task's LockWait (a manual run or a retry does not wait: it stays in
//     the store for a later poll).
//  3. The claim: a scheduled or catch-up fire claims its instant; a manual
//     run takes its request from the store, a retry its attempt, which the
//     store records as taken by this node until the run is recorded.
//  4. The lease check: a lease that ended during the steps above (a slow
//     driver or store, a paused process) does not run the task: another
//     node may hold the key by now.
//
// Each driver and store call is bounded by the lock TTL (an unlocked task's
// by storeTimeout). It returns the lease to run under (nil for an unlocked
// task) with outcomeRun, or the outcome of a fire that does not run and the
// error behind a failure.
func (s *Scheduler) admit(f *firing, t *turn) (locks.Lease, Outcome, error) {
	e := f.e
	if s.stopping() {
		t.pass()
		return nil, notRecorded, nil
	}
	if e.spec.Lock != "" && s.spread != nil {
		// A late fire's owner was decided when it was taken over or
		// joined its chain; the view may have changed since, and the
		// owner of now would not try a past fire.
		if f.late == nil && !s.owns(e.spec.Lock) {
			t.pass()
			return nil, OutcomeNotOwner, nil
		}
		s.tried(f)
	}
	if f.kind != kindManual && s.state != nil {
		if o, err := s.holdRule(f); o != outcomeRun {
			t.pass()
			return nil, o, err
		}
	}
	if e.spec.Lock == "" {
		if f.kind != kindManual {
			return nil, outcomeRun, nil
		}
		ctx, cancel := withTimeout(s.acquireCtx, s.clock, storeTimeout)
		defer cancel()
		if err := s.claim(ctx, f); err != nil {
			o, err := s.notClaimed(err)
			return nil, o, err
		}
		return nil, outcomeRun, nil
	}
	lease, o, err := s.lock(f, t)
	if lease == nil {
		return nil, o, err
	}
	if s.debugOn() {
		s.log.Debug("lock acquired", "task", e.name, "fire", f.fire, "lock", e.spec.Lock, "token", lease.Token())
	}
	if e.spec.MaxRuns > 0 && f.kind != kindManual {
		if o, err := s.takeRun(f); o != outcomeRun {
			rctx, rcancel := withTimeout(context.Background(), s.clock, e.spec.LockTTL)
			s.releaseLease(e, lease, rctx)
			rcancel()
			return nil, o, err
		}
	}
	if t != nil {
		<-t.all
	}
	select {
	case <-lease.Done():
		// The lock step (a slow claim or take, a paused process) outlasted
		// the lease: another node may hold the key now. The task is not
		// called. (A gate's lease ends with either of its two: the other
		// is given back.)
		if _, ok := lease.(*pairLease); ok {
			ctx, cancel := withTimeout(context.Background(), s.clock, e.spec.LockTTL)
			_ = lease.Release(ctx)
			cancel()
		}
		return nil, OutcomeLockFailed, fmt.Errorf("%w: the lease on %q ended before the run could start: the lock step took longer than the lock TTL (%v)",
			locks.ErrLeaseLost, e.spec.Lock, e.spec.LockTTL)
	default:
	}
	return lease, outcomeRun, nil
}

// holdRule answers outcomeRun for a fire of a task that is not paused and
// has no retry of an earlier fire pending, OutcomePaused for one that is
// paused (claiming a locked task's fire, taking a retry), OutcomeRetrying
// for a scheduled or catch-up fire while a retry is pending (claiming it),
// and a lock failure when the flag cannot be read: the store is as
// unreachable as the lock most likely is, and a paused task must not run
// because the flag could not be read.
func (s *Scheduler) holdRule(f *firing) (Outcome, error) {
	// The store's calls are bounded as every driver and store call of the
	// fire; the usual fire, whose flag is known, makes none (and sets no
	// timer).
	call := func() (context.Context, context.CancelFunc) {
		return withTimeout(s.acquireCtx, s.clock, s.callBound(f.e))
	}
	o := OutcomeExcluded
	if f.calendar = s.excludedBy(f.e, f.fire); f.calendar != "" {
		if f.kind == kindRetry || f.kind == kindBackfill {
			// A retry of a fire that ran, and a backfill's instant
			// (backfills pass over excluded instants), are not
			// excluded by an update of a calendar since.
			f.calendar, o = "", outcomeRun
		}
	} else {
		paused, err := s.pauses.paused(f.e.name, s.clock.Now(), func(task string) (bool, error) {
			ctx, cancel := call()
			defer cancel()
			p, err := s.state.Paused(ctx, task)
			return p.Paused, err
		})
		switch {
		case err != nil && s.stopping():
			return notRecorded, nil
		case err != nil:
			return OutcomeLockFailed, fmt.Errorf("reading whether the task is paused: %w", err)
		}
		o = OutcomePaused
		if !paused {
			o = s.notPausedRule(f)
		}
	}
	if o == outcomeRun {
		return o, nil
	}
	switch {
	case f.kind == kindBackfill:
		return o, nil // it waits in the store for the resume (a paused task's)
	case f.kind == kindRetry || (s.claims != nil && f.e.spec.Lock != "" && s.clock.Since(f.fire) <= MaxClaimLateness):
		// A fire skipped while paused is claimed, so that a catch-up after
		// the resume finds it had its turn; a paused retry is taken, so
		// that no node runs it after the resume.
		ctx, cancel := call()
		defer cancel()
		err := s.claim(ctx, f)
		f.claimedElsewhere = errors.Is(err, locks.ErrClaimed)
		if err != nil && !f.claimedElsewhere && !s.stopping() {
			s.log.Warn("claiming a skipped fire failed; another node may run it", "task", f.e.name, "fire", f.fire,
				"attempt", f.attempt(), "outcome", string(o), "err", err)
		}
	}
	return o, nil
}

// notPausedRule is holdRule's answer for a fire of a task that is not
// paused: outcomeRun, unless a retry of an earlier fire is pending.
func (s *Scheduler) notPausedRule(f *firing) Outcome {
	r, pending := s.retryPending(f.e, f.fire)
	switch {
	case f.kind == kindRetry || f.kind == kindBackfill || !pending:
		return outcomeRun
	case r.Attempt == 1: // a fire waiting for the run going
		return OutcomeBufferFull
	}
	return OutcomeRetrying
}

// callBound bounds each driver and store call of e's fires: its lock TTL
// (a call slower than the lease it is for is of no use), storeTimeout for
// an unlocked task.
func (s *Scheduler) callBound(e *entry) time.Duration {
	if e.spec.Lock == "" {
		return storeTimeout
	}
	return e.spec.LockTTL
}

// lockOwn takes f's lease on its task's lock and claims the fire (steps 2
// and 3 of admit; lock adds a gate's), in one driver call where the driver
// can (see acquire). It returns the lease, or the outcome of a fire that
// does not run and the error behind a failure.
//
// The fire is claimed while the lease is held, or before waiting for it: so
// of the nodes that wait for one fire's lock, only the claimant is left
// waiting, and a node that gets the lock after a run of the same fire ended
// finds the fire claimed.
func (s *Scheduler) lockOwn(f *firing, t *turn) (locks.Lease, Outcome, error) {
	e := f.e
	// Until the step ends, a fire of the task that finds this one in
	// flight is skipped as OutcomeLockPending: nothing runs yet.
	e.waiting.Store(true)
	defer e.waiting.Store(false)
	passed := t == nil
	if !passed && t.prev != nil {
		<-t.prev
	}
	pass := func() {
		if !passed {
			passed = true
			close(t.next)
		}
	}
	defer pass()
	if s.stopping() {
		return nil, notRecorded, nil
	}
	if s.claims == nil { // Add refuses such tasks; this guards the run itself
		return nil, OutcomeLockFailed, fmt.Errorf("%w: task %s needs lock %q", ErrNoDriver, e.name, e.spec.Lock)
	}
	if !f.fromStore() && s.clock.Since(f.fire) > MaxClaimLateness {
		return nil, OutcomeMissed, nil
	}
	// A fire in a lock batch makes its step in the batch's call, which has
	// its own bound.
	ctx, cancel := s.acquireCtx, context.CancelFunc(func() {})
	if f.member == nil {
		ctx, cancel = withTimeout(s.acquireCtx, s.clock, e.spec.LockTTL)
	}
	defer cancel()
	// A takeover's late fire neither waits nor claims while the key is
	// held: its chain tries it again once the lease lapses.
	wait := e.spec.LockWait > 0 && !f.fromStore() && !f.takenOver()
	// A fire that waits for the run going claims itself even if the key is
	// held, so that no other node waits for it too.
	buffers := e.buffers() && !f.fromStore() && !f.takenOver()
	lease, err := s.acquire(ctx, f, wait || buffers)
	if err == nil {
		return lease, "", nil
	}
	if (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) && !s.stopping() {
		err = fmt.Errorf("%w (the driver did not answer within the lock TTL, %v)", err, e.spec.LockTTL)
	}
	switch {
	case !errors.Is(err, locks.ErrNotAcquired):
		o, err := s.notClaimed(err)
		return nil, o, err
	case !wait && buffers:
		return nil, OutcomeBuffered, nil
	case !wait:
		return nil, OutcomeLockHeld, nil
	}
	// The key is held and the fire claimed: this node waits for the key.
	cancel()
	pass()
	if s.debugOn() {
		s.log.Debug("waiting for lock", "task", e.name, "fire", f.fire, "lock", e.spec.Lock, "budget", e.spec.LockWait)
	}
	lease, err = locks.Wait(s.acquireCtx, s.driver, e.spec.Lock, e.spec.LockTTL, locks.WaitOptions{
		Budget: e.spec.LockWait, Step: e.spec.LockWaitStep, Clock: s.clock})
	switch {
	case err == nil:
		return lease, "", nil
	case errors.Is(err, locks.ErrNotAcquired) && buffers:
		// Another fire may have been left waiting while this one waited
		// for the lock: one waits at most.
		if s.anyPending(e) {
			return nil, OutcomeBufferFull, nil
		}
		return nil, OutcomeBuffered, nil
	case errors.Is(err, locks.ErrNotAcquired):
		return nil, OutcomeLockHeld, nil
	}
	return nil, s.failed(), err
}

// acquire takes f's lease and claims f in one step where the driver can
// ([locks.AcquireClaim]): a scheduled or catch-up fire claims its instant
// under its task's claim key, the instant in Unix milliseconds being the
// claim's sequence number; with wait, the fire is claimed even if the key
// is held, as the caller waits for it next. A manual run or a retry takes
// the lease, then its request or attempt from the store (see claim). A
// fire that another node claimed first (or whose request or attempt it
// took) gets an error wrapping locks.ErrClaimed, and no lease.
func (s *Scheduler) acquire(ctx context.Context, f *firing, wait bool) (locks.Lease, error) {
	e := f.e
	if !f.fromStore() {
		fl := locks.FireLock{Key: e.spec.Lock, TTL: e.spec.LockTTL,
			Claim: locks.FireClaim{Key: e.claimKey, Seq: f.fire.UnixMilli(), TTL: ClaimTTL, EvenIfHeld: wait}}
		switch {
		case e.spec.MaxConcurrent > 0:
			return locks.AcquireSlot(ctx, s.driver, fl.Key, e.spec.MaxConcurrent, fl.TTL, &fl.Claim)
		case f.member != nil:
			return f.member.join(s, fl)
		}
		return locks.AcquireClaim(ctx, s.driver, fl.Key, fl.TTL, fl.Claim)
	}
	var lease locks.Lease
	var err error
	if n := e.spec.MaxConcurrent; n > 0 {
		lease, err = locks.AcquireSlot(ctx, s.driver, e.spec.Lock, n, e.spec.LockTTL, nil)
	} else {
		lease, err = s.driver.Acquire(ctx, e.spec.Lock, e.spec.LockTTL)
	}
	if err != nil {
		return nil, err
	}
	if err := s.claim(ctx, f); err != nil {
		rctx, cancel := withTimeout(context.Background(), s.clock, e.spec.LockTTL)
		defer cancel()
		s.releaseLease(e, lease, rctx)
		return nil, err
	}
	return lease, nil
}

// claim claims f without a lease: a scheduled or catch-up fire (a skipped
// one, see holdRule) as acquire does; a manual run by taking its request
// from the store, f.fire becoming the instant the request was made; a
// retry by taking its attempt. It returns an error wrapping
// locks.ErrClaimed if another node was first.
func (s *Scheduler) claim(ctx context.Context, f *firing) error {
	switch f.kind {
	case kindBackfill:
		return s.takeBackfill(ctx, f)
	case kindRetry:
		ok, err := s.state.TakeRetry(ctx, f.e.name, s.node, f.retry)
		switch {
		case err != nil:
			return fmt.Errorf("taking attempt %d of the retry: %w", f.retry.Attempt, err)
		case !ok:
			return fmt.Errorf("%w: attempt %d of %s at %v was taken", locks.ErrClaimed, f.retry.Attempt, f.e.name, f.fire)
		}
		f.taken = true
		s.retryTaken(f.e, f.retry)
		return nil
	case kindManual:
		at, ok, err := s.state.TakeRequest(ctx, f.e.name, s.node)
		switch {
		case err != nil:
			return fmt.Errorf("taking the manual-run request: %w", err)
		case !ok:
			return fmt.Errorf("%w: the request of %s was taken", locks.ErrClaimed, f.e.name)
		}
		f.fire, f.taken = at, true
		return nil
	}
	ok, err := s.claims.Claim(ctx, f.e.claimKey, f.fire.UnixMilli(), ClaimTTL)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s at %v", locks.ErrClaimed, f.e.name, f.fire)
	}
	return err
}

// notClaimed returns the outcome of a fire whose lock step or claim failed
// with err, and the error to report: none for a fire another node claimed.
func (s *Scheduler) notClaimed(err error) (Outcome, error) {
	if errors.Is(err, locks.ErrClaimed) {
		return OutcomeAlreadyRun, nil
	}
	return s.failed(), err
}

// failed is the outcome of a fire whose lock step failed: not recorded if
// Stop cut it short, a lock failure otherwise.
func (s *Scheduler) failed() Outcome {
	if s.stopping() {
		return notRecorded
	}
	return OutcomeLockFailed
}

// skip records a fire that does not run, logs it and tells the listeners.
// A manual run or a retry that did not take its request or attempt is not
// a skip: it stays for a later poll (lock held, a fire in flight here), or
// another node took it; nor is a takeover's late fire that stays for its
// chain or that another node claimed (lateSkip).
func (s *Scheduler) skip(f firing, o Outcome, err error) {
	f.member.leave(s)
	f.member.started()
	e := f.e
	if (f.fromStore() && !f.taken && o != OutcomeLockFailed) || lateSkip(&f, o) {
		o = notRecorded
	}
	if o == OutcomeBuffered {
		switch left, lerr := s.buffer(&f); {
		case lerr != nil:
			o, err = OutcomeLockFailed, fmt.Errorf("leaving the fire to wait for the run going: %w", lerr)
		case !left:
			o = OutcomeBufferFull
		}
	}
	switch o {
	case notRecorded:
		return
	case OutcomeLockFailed:
		s.record(f, &LastRun{Fire: f.fire, Outcome: o, Err: err, Node: s.node, Manual: f.manual(), Attempt: f.attempt(),
			Backfill: f.kind == kindBackfill}, counts{failures: 1}, nil)
		s.log.Error("lock failed; fire not run", "task", e.name, "fire", f.fire, "lock", e.spec.Lock, "manual", f.manual(),
			"attempt", f.attempt(), "err", err)
	case OutcomeBuffered:
		s.record(f, &LastRun{Fire: f.fire, Outcome: o, Node: s.node, Attempt: 1}, counts{skips: 1}, nil)
		s.log.Info("a run of the task is going; fire waits for it", "task", e.name, "fire", f.fire, "lock", e.spec.Lock,
			"overlap", e.spec.Overlap)
	default:
		var why error
		if o == OutcomeExcluded {
			why = errors.New("calendar " + f.calendar) // shown as "excluded: calendar NAME"
		}
		prev, _ := s.record(f, &LastRun{Fire: f.fire, Outcome: o, Err: why, Node: s.node, Manual: f.manual(), Attempt: f.attempt(),
			Backfill: f.kind == kindBackfill}, counts{skips: 1}, nil)
		ctx := context.Background()
		switch o {
		case OutcomeLockHeld:
			s.log.Log(ctx, s.skipAt, fmt.Sprintf("lock '%s' is held", e.spec.Lock), "task", e.name, "fire", f.fire, "lock", e.spec.Lock)
		case OutcomeAlreadyRun:
			s.log.Log(ctx, s.skipAt, "fire already claimed by another node", "task", e.name, "fire", f.fire, "lock", e.spec.Lock)
		case OutcomeMissed:
			s.log.Warn("fire reached too late to claim; skipped", "task", e.name, "fire", f.fire, "lateness", s.clock.Since(f.fire))
		case OutcomePaused:
			// Once per stretch of paused fires on this node, not at every
			// fire: the task's last fire and the skip metric count the others.
			if prev != OutcomePaused {
				s.log.Log(ctx, s.skipAt, "task paused; fire skipped", "task", e.name, "fire", f.fire, "attempt", f.attempt())
			}
		case OutcomeExcluded:
			if prev != OutcomeExcluded { // once per stretch, as for a pause
				s.log.Log(ctx, s.skipAt, "fire excluded by a calendar; skipped", "task", e.name, "fire", f.fire, "calendar", f.calendar)
			}
		case OutcomeRetrying:
			if prev != OutcomeRetrying { // once per stretch, as for a pause
				s.log.Log(ctx, s.skipAt, "a retry of an earlier fire is pending; fire skipped", "task", e.name, "fire", f.fire)
			}
		case OutcomeBufferFull:
			s.log.Log(ctx, s.skipAt, "a fire already waits for the run going; fire skipped", "task", e.name, "fire", f.fire)
		case OutcomeNotOwner: // every node but one, every fire: not worth a line
		case OutcomeLockPending:
			s.log.Log(ctx, s.skipAt, "previous fire still waiting for its lock; fire skipped", "task", e.name, "fire", f.fire)
		case OutcomeRunning:
			s.log.Log(ctx, s.skipAt, "previous run still going; fire skipped", "task", e.name, "fire", f.fire)
		}
	}
	if s.notify != nil {
		ev := Event{Task: e.name, Lock: e.spec.Lock, Fire: f.fire, Node: s.node, Outcome: o, Err: err, Manual: f.manual(), Attempt: f.attempt(),
			Backfill: f.kind == kindBackfill}
		s.notify.skipped(&ev)
	}
}

// record is where every fire that ran or was skipped is recorded: in this
// node's registry, and in the shared history when shared says so, with the
// retry that a failed run leaves (nil for none).
// It returns the outcome of the fire before, and the shared record's
// sequence number (0 for none).
func (s *Scheduler) record(f firing, last *LastRun, c counts, retry *taskstate.Retry) (prev Outcome, seq uint64) {
	prev = f.e.record(*last, c)
	if s.state != nil && shared(&f, last.Outcome, c) {
		seq = s.recordShared(f.e, last, retry, f.kind == kindRetry)
	}
	return prev, seq
}

// shared reports whether a fire's outcome on this node goes into the
// history the nodes share. What it leaves out, the audit derives
// ([Scheduler.Audit]), so that a fire costs one record in the cluster,
// not one per node:
//
//   - a run, whatever it returned, and a manual run's request that this
//     node took (so that a taken request always ends with an outcome);
//   - a lock failure, on every node that had it, but not that of a manual
//     run whose request stays pending for the next poll;
//   - a fire reached too late to claim (OutcomeMissed);
//   - a paused fire, by the node that claimed it (every node, for an
//     unlocked task, as every node runs it), and a fire skipped while a
//     retry was pending, by the node that claimed it;
//   - not a fire that another holder of the lock, another node's claim, a
//     run in flight or another node's ownership kept from running here:
//     the record of whatever ran stands for it.
func shared(f *firing, o Outcome, c counts) bool {
	switch {
	case c.runs > 0 || f.taken:
		return true
	case f.fromStore():
		return false
	}
	switch o {
	case OutcomeLockFailed, OutcomeMissed, OutcomeBuffered:
		return true
	case OutcomePaused, OutcomeRetrying, OutcomeBufferFull, OutcomeExcluded:
		return !f.claimedElsewhere
	}
	return false
}

// releaseLease releases l, logging a failure.
func (s *Scheduler) releaseLease(e *entry, l locks.Lease, ctx context.Context) {
	if err := l.Release(ctx); err != nil {
		s.log.Warn("lease release failed", "task", e.name, "lock", e.spec.Lock, "token", l.Token(), "err", err)
	}
}

// runLocked runs f under lease, which it holds, renews if the task asks,
// and releases when the task returns.
func (s *Scheduler) runLocked(f firing, lease locks.Lease) {
	h := &holding{e: f.e, lease: lease, fire: f.fire, since: s.clock.Now()}
	ctx, cancel := context.WithCancelCause(locks.NewContext(s.runCtx, runLease(lease)))
	h.cancel = cancel
	s.mu.Lock()
	s.held[h] = struct{}{}
	s.mu.Unlock()
	k := s.keep(ctx, f.e, lease, cancel)
	k.h = h
	f.member.started()
	if s.observed {
		s.executeObserved(ctx, f, lease, k)
	} else {
		s.execute(ctx, f, lease, k)
	}
	cancel(context.Canceled)
	s.mu.Lock()
	delete(s.held, h)
	s.mu.Unlock()
	// The runs of the fire's batch start before its lease is released: a
	// release is housework, and those runs are late by what it costs.
	f.member.awaitStarts()
	if h.recorded != 0 {
		s.awaitRecord(h.recorded, lease.Done())
	}
	rctx, rcancel := withTimeout(context.Background(), s.clock, f.e.spec.LockTTL)
	defer rcancel()
	if err := h.release(rctx); err != nil {
		s.log.Warn("lease release failed", "task", f.e.name, "lock", f.e.spec.Lock, "token", lease.Token(), "err", err)
	}
}

// execute calls the task with its run context and records the outcome.
// Runs that listeners or debug logging observe go through executeObserved
// instead, chosen by the caller from a field set by New, so that this path,
// every run's when nothing observes, stays lean: in BenchmarkLateness, a
// branch to the observed path inside it raised the median lateness by a
// quarter.
func (s *Scheduler) execute(ctx context.Context, f firing, lease locks.Lease, k *keeper) {
	e := f.e
	if e.spec.MaxRunTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, s.clock, e.spec.MaxRunTime)
		defer cancel()
	}
	ctx = &runContext{Context: ctx, run: Run{Task: e.name, Fire: f.fire, Node: s.node, Lease: runLease(lease), Manual: f.manual(), Attempt: f.attempt(),
		Backfill: f.kind == kindBackfill}}
	start := s.clock.Now()
	e.runStart.Store(start.UnixNano())
	err, panicked := call(ctx, e.fn)
	s.finish(f, lease, k, start, err, panicked, nil)
}

// debugOn reports whether the logger takes debug records.
func (s *Scheduler) debugOn() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }

// executeObserved is execute for a run that listeners or debug logging
// observe.
//
//go:noinline
func (s *Scheduler) executeObserved(ctx context.Context, f firing, lease locks.Lease, k *keeper) {
	e := f.e
	if e.spec.MaxRunTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTimeout(ctx, s.clock, e.spec.MaxRunTime)
		defer cancel()
	}
	ctx = &runContext{Context: ctx, run: Run{Task: e.name, Fire: f.fire, Node: s.node, Lease: runLease(lease), Manual: f.manual(), Attempt: f.attempt(),
		Backfill: f.kind == kindBackfill}}
	start := s.clock.Now()
	e.runStart.Store(start.UnixNano())
	ctx, ev := s.started(ctx, f, lease, start, s.debugOn())
	err, panicked := call(ctx, e.fn)
	s.finish(f, lease, k, start, err, panicked, ev)
}

// started logs a run's start and tells the listeners, whose context the
// task then runs with. It returns the event that finish completes.
//
//go:noinline
func (s *Scheduler) started(ctx context.Context, f firing, lease locks.Lease, start time.Time, debug bool) (context.Context, *runEvent) {
	ev := &runEvent{debug: debug}
	ev.Event = Event{Task: f.e.name, Lock: f.e.spec.Lock, Fire: f.fire, Node: s.node, Start: start,
		Lateness: start.Sub(f.due()), Manual: f.manual(), Attempt: f.attempt(), Backfill: f.kind == kindBackfill}
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
func (s *Scheduler) finish(f firing, lease locks.Lease, k *keeper, start time.Time,
	err error, panicked bool, ev *runEvent) {
	last := LastRun{Fire: f.fire, Start: start, Duration: s.clock.Since(start), Outcome: OutcomeOK,
		Err: err, Node: s.node, Manual: f.manual(), Attempt: f.attempt(), Backfill: f.kind == kindBackfill}
	f.e.runStart.CompareAndSwap(start.UnixNano(), 0) // a later run of allow keeps its own
	var end leaseEnd
	if lease != nil {
		last.Token = lease.Token()
		end = s.endLease(f, lease, k)
	}
	superseded := k != nil && k.h != nil && k.h.superseded.Load()
	if err != nil {
		last.Outcome = s.failure(f, err, panicked, superseded)
	}
	c := counts{runs: 1}
	var retry *taskstate.Retry
	if last.Outcome != OutcomeOK {
		c.failures = 1
		if !superseded {
			retry = s.nextRetry(&f, &last)
		}
	}
	_, seq := s.record(f, &last, c, retry)
	if k != nil && k.h != nil {
		k.h.recorded = seq
	}
	if seq != 0 && f.e.spec.PauseAfterFailures > 0 && (last.Outcome == OutcomeError || last.Outcome == OutcomePanic) && !f.manual() {
		s.takeoff(1)
		go s.pauseIfFailing(f.e, seq, err)
	}
	if ev != nil {
		s.ended(ev, last.Outcome, err, last.Duration, end)
	}
}

// failure logs a run that did not return nil and returns its outcome. A
// run that returns an error after Stop cancelled it at the stop deadline
// was cut, not failed: it is logged at Warn.
//
//go:noinline
func (s *Scheduler) failure(f firing, err error, panicked, superseded bool) Outcome {
	switch {
	case superseded && !panicked:
		s.log.Info("run cancelled by a later fire", "task", f.e.name, "fire", f.fire, "err", err)
		return OutcomeCancelled
	case panicked:
		var stack string
		if pe := (*PanicError)(nil); errors.As(err, &pe) {
			stack = string(pe.Stack)
		}
		s.log.Error("task panicked", "task", f.e.name, "fire", f.fire, "err", err, "stack", stack)
		return OutcomePanic
	case errors.Is(context.Cause(s.runCtx), ErrStopTimeout):
		s.log.Warn("run cancelled by stop", "task", f.e.name, "fire", f.fire, "err", err)
		return OutcomeCancelled
	}
	s.log.Error("task failed", "task", f.e.name, "fire", f.fire, "err", err)
	return OutcomeError
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

// endLease stops the keeper of a run's lease and checks whether the lease
// was lost under the run.
//
//go:noinline
func (s *Scheduler) endLease(f firing, lease locks.Lease, k *keeper) leaseEnd {
	end := leaseEnd{renewErr: k.stop()}
	select {
	case <-lease.Done(): // not yet released by the run: it ended under the run
		if errors.Is(context.Cause(s.runCtx), ErrStopTimeout) {
			break // Stop released it at its deadline, and said so
		}
		end.lost = true
		s.log.Warn("lease lost before the task returned; its context was cancelled", "task", f.e.name,
			"fire", f.fire, "lock", f.e.spec.Lock, "token", lease.Token(), "err", end.renewErr)
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
			err, panicked = &PanicError{Value: r, Stack: debug.Stack()}, true
		}
	}()
	return fn(ctx), false
}

// A keeper watches a run's lease while the run lasts: it cancels the run's
// context when the lease ends, and renews the lease if the task asks. The
// watching and the renewing are separate goroutines, so that a renewal
// stuck in a slow driver call never delays the cancellation.
type keeper struct {
	quit    chan struct{}
	h       *holding      // the run's lease as Leases lists it
	watched chan struct{} // closed when the watching goroutine returned
	renewed chan struct{} // closed when the renewing goroutine returned
	once    sync.Once

	mu  sync.Mutex // protects err
	err error      // the last completed renewal's error; nil after a success
}

// keep starts the keeper of a run's lease. cancel cancels the run's context.
//
// Renewal: the lease is extended every third of the lock TTL, each attempt
// bounded by a sixth. An attempt that fails without finding the lease lost
// (the driver was slow or unreachable) is retried every twelfth of the TTL,
// as long as the lease lasts. The run is cancelled with cause
// locks.ErrLeaseLost when the lease is found lost or runs out (a paused
// process, say), and with an error wrapping ErrRenewalFailed and the
// driver's error when it ran out after a renewal attempt had failed: the
// driver was slow or unreachable, and no retry got through in time.
func (s *Scheduler) keep(ctx context.Context, e *entry, lease locks.Lease, cancel context.CancelCauseFunc) *keeper {
	k := &keeper{quit: make(chan struct{}), watched: make(chan struct{}), renewed: make(chan struct{})}
	// Done and the renewal timer are armed before keep returns, so that both
	// count from the run's start, not from when the goroutines get to run.
	done := lease.Done()
	go func() {
		defer close(k.watched)
		select {
		case <-k.quit:
		case <-done:
			k.lost(cancel)
		}
	}()
	if !e.spec.Renew {
		close(k.renewed)
		return k
	}
	ctx = context.WithoutCancel(ctx)
	ttl := e.spec.LockTTL
	t := s.clock.NewTimer(ttl / 3)
	go func() {
		defer close(k.renewed)
		defer t.Stop()
		for {
			select {
			case <-k.quit:
				return
			case <-done:
				return
			case <-t.Chan():
			}
			// The next renewal is a third of the TTL after this one
			// began, whatever this one takes; a failure brings it closer.
			t.Reset(ttl / 3)
			ectx, ecancel := withTimeout(ctx, s.clock, ttl/6)
			err := lease.Extend(ectx, ttl)
			ecancel()
			k.setErr(err)
			switch {
			case err == nil:
			case errors.Is(err, locks.ErrLeaseLost):
				s.log.Error("lease renewal failed: lease lost", "task", e.name, "lock", e.spec.Lock, "token", lease.Token(), "err", err)
				return // Extend closed Done: the watcher cancels the run
			default:
				s.log.Warn("lease renewal failed; retrying while the lease lasts", "task", e.name,
					"lock", e.spec.Lock, "token", lease.Token(), "err", err)
				t.Reset(max(ttl/12, time.Millisecond))
			}
		}
	}()
	return k
}

func (k *keeper) setErr(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// lost cancels the run whose lease ended, with the cause the renewal left.
func (k *keeper) lost(cancel context.CancelCauseFunc) {
	k.mu.Lock()
	err := k.err
	k.mu.Unlock()
	if err != nil && !errors.Is(err, locks.ErrLeaseLost) {
		cancel(fmt.Errorf("%w: %w", ErrRenewalFailed, err))
		return
	}
	cancel(locks.ErrLeaseLost)
}

// stop ends the keeper and returns the renewal's error, if the last
// extension failed.
func (k *keeper) stop() error {
	k.once.Do(func() { close(k.quit) })
	<-k.watched
	<-k.renewed
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// withTimeout returns a copy of parent that is cancelled d from now on clock
// c; its Err is then context.DeadlineExceeded, as is its cause. On the real
// clock it is context.WithTimeout; on another clock a timer of that clock
// cancels it (clockwork's own fake-clock contexts block in Err until they
// are done), so that a run past its MaxRunTime sees the same error in a test
// on a fake clock as in production.
func withTimeout(parent context.Context, c clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if c == realClock {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	tc := &timedContext{Context: ctx}
	t := c.AfterFunc(d, func() {
		tc.expired.Store(true)
		cancel(context.DeadlineExceeded)
	})
	return tc, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// A timedContext is a context that a fake clock's timer ended: its Err is
// context.DeadlineExceeded, as a real deadline's is. Its Deadline stays the
// parent's: a fake instant would mislead the network clients that set
// socket deadlines from it.
type timedContext struct {
	context.Context
	expired atomic.Bool // set before the timer cancels the context
}

func (c *timedContext) Err() error {
	err := c.Context.Err()
	if err != nil && c.expired.Load() && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

var realClock = clockwork.NewRealClock()
