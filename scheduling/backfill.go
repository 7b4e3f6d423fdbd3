package scheduling

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// MaxBackfill is the most instants one backfill may hold.
const MaxBackfill = 100_000

// ErrInvalidBackfill reports a backfill that cannot run: an empty or
// reversed range, one with no instant of the schedule or more than
// MaxBackfill, a task without a lock, an overlap policy it cannot take.
// The wrapping error names the argument, the value and the rule.
var ErrInvalidBackfill = errors.New("scheduling: invalid backfill")

// ErrNoBackfill reports a [Scheduler.CancelBackfill] of a task with no
// backfill running.
var ErrNoBackfill = errors.New("scheduling: no backfill running")

// BackfillOptions are the options of [Scheduler.Backfill].
type BackfillOptions struct {
	// Overlap is how the backfill's instants overlap: "" for the task's own
	// policy; OverlapSkip or OverlapBufferOne, one instant at a time, each
	// once the task's lock is free (a backfill's instant waits for the lock
	// rather than be skipped: it was asked for, and the next instant waits
	// for it); OverlapAllow, up to the task's MaxConcurrent at once.
	// OverlapCancelPrevious is refused: it would cancel the instants
	// before it.
	Overlap string
	// Force runs the instants that already ran, which are refused otherwise.
	Force bool
}

// Backfill runs the task named name once for each instant of its schedule
// in [from, to], in order, through the one path of every run (lock, hold
// rules, the take of the instant, renewal, record); to must be before now,
// the schedule running the later instants. An instant runs on
// whatever node of the cluster takes it first, under the task's lock, with
// its fencing token, as a run whose [Run].Backfill is set and whose Fire is
// the instant. It returns the backfill as started; its progress is in
// every node's [TaskInfo].Backfill from their next poll.
//
// The backfill lives in the task state: this node starts driving it at
// once, and every node that has the task goes on with it from its next poll
// if the driving node stops or dies; each instant is taken once
// ([taskstate.Store.TakeBackfill]). An instant that already ran is refused
// unless opts.Force: one that a backfill ran, that the task's kept history
// shows ran when this backfill started, or of which it holds a run when a
// node takes the instant, under the task's lock (a run still going when
// the backfill started is refused once it ended: a locked run's lease is
// released once its record is sent). Each instant taken is claimed as its
// fire, so a node that reaches that fire late finds it claimed. A scheduled
// fire whose run the kept history no longer holds (it keeps the task's
// newest runs, as many as its audit needs), or whose record its node could not send
// before its lease ended, is not known to have run, and a backfill over it
// runs it again: keep backfills to ranges that did not run, or a history
// long enough. A task with [OverlapAllow], whose runs take free slots
// rather than the lock, is backfilled only to its lease (or MaxRunTime)
// and a minute before now, so that no scheduled run of an instant is still
// going in another slot; one that renews its lease needs MaxRunTime. A
// paused task's
// backfill waits for the resume; a failed instant is recorded and not
// retried. A task has one backfill running at a time; another gets an error
// wrapping [taskstate.ErrBackfillRunning].
func (s *Scheduler) Backfill(ctx context.Context, name string, from, to time.Time, opts BackfillOptions, co ...ControlOption) (taskstate.Backfill, error) {
	e, err := s.lookup(name)
	if err != nil {
		return taskstate.Backfill{}, err
	}
	ev, err := s.event(ctx, co, "backfill", e.name)
	if err != nil {
		return taskstate.Backfill{}, err
	}
	if _, err := backfillPolicy(e, opts.Overlap); err != nil {
		return taskstate.Backfill{}, err
	}
	now := s.clock.Now()
	if !to.Before(now) {
		// The schedule runs those instants, under claims of their own: a
		// backfill of them would run them twice.
		return taskstate.Backfill{}, fmt.Errorf("%w: task %s: to %v: must be before now (%v): a backfill runs past instants, the schedule the others",
			ErrInvalidBackfill, e.name, to, now)
	}
	if e.spec.MaxConcurrent > 0 {
		// A run of an allow task takes a free slot, not the lock: a
		// scheduled run of an instant still going holds another slot, and
		// the history tells of it only once it ended. So the backfill
		// reaches only instants whose runs have ended and been recorded
		// (the audit's horizon: the longest a run can take, and a minute).
		lag, known := auditLag(e, 0)
		switch {
		case !known:
			return taskstate.Backfill{}, fmt.Errorf("%w: task %s: overlap allow with renew and no maxRunTime: a run of any instant may still be going "+
				"in another slot, and a backfill would run it again; set maxRunTime", ErrInvalidBackfill, e.name)
		case to.After(now.Add(-lag)):
			return taskstate.Backfill{}, fmt.Errorf("%w: task %s: to %v: must be at least %v before now (%v) for a task with overlap allow: "+
				"a scheduled run of a later instant may still be going in another slot (its lease and a minute for its record)",
				ErrInvalidBackfill, e.name, to.UTC(), lag, now.UTC())
		}
	}
	total, err := backfillInstants(e, from, to)
	if err != nil {
		return taskstate.Backfill{}, err
	}
	runs, err := s.state.Runs(ctx, e.name, 0)
	if err != nil {
		return taskstate.Backfill{}, fmt.Errorf("reading the task's history for the instants that ran: %w", err)
	}
	var ran []time.Time
	for _, r := range runs {
		if !r.Fire.Before(from) && !r.Fire.After(to) && taskstate.RanAt(r, r.Fire) {
			ran = append(ran, r.Fire)
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails
	b := taskstate.Backfill{ID: hex.EncodeToString(id[:]), Task: e.name, From: from.UTC(), To: to.UTC(), Force: opts.Force,
		Overlap: opts.Overlap, Total: total, State: taskstate.BackfillRunning, Node: s.node, Created: s.clock.Now().UTC()}
	err = s.act(ctx, ev, nil, b, func(kept taskstate.Event, again bool) error {
		if again {
			// The backfill first asked, unless it started.
			if err := json.Unmarshal([]byte(kept.After), &b); err != nil {
				return fmt.Errorf("scheduling: backfill %s: the trail's entry %d: %w", e.name, kept.Seq, err)
			}
			p, err := s.state.Poll(ctx)
			if err != nil {
				return err
			}
			if cur, ok := p.Backfills[e.name]; ok && cur.ID == b.ID {
				b = cur
				return nil
			}
		}
		if err := s.state.StartBackfill(ctx, b, ran); err != nil {
			return err
		}
		s.log.Info("backfill started", "task", e.name, "from", b.From, "to", b.To, "instants", total, "force", opts.Force,
			"backfill", b.ID)
		s.mu.Lock()
		drive := s.status == started && !s.stopping() && s.toDrive(e)
		s.mu.Unlock()
		if drive {
			go s.drive(e, b)
		}
		return nil
	})
	if err != nil {
		return taskstate.Backfill{}, err
	}
	return b, nil
}

// CancelBackfill cancels the running backfill of the task named name: no
// node takes its next instant; a run of it in flight finishes.
func (s *Scheduler) CancelBackfill(ctx context.Context, name string, opts ...ControlOption) error {
	e, err := s.lookup(name)
	if err != nil {
		return err
	}
	ev, err := s.event(ctx, opts, "cancel-backfill", e.name)
	if err != nil {
		return err
	}
	p, err := s.state.Poll(ctx)
	if err != nil {
		return err
	}
	b, ok := p.Backfills[e.name]
	var before, after any // the backfill found, and cancelled if it runs
	if ok {
		before = b
	}
	if ok && b.State == taskstate.BackfillRunning {
		cancelled := b
		cancelled.State = taskstate.BackfillCancelled
		after = cancelled
	}
	return s.act(ctx, ev, before, after, func(kept taskstate.Event, again bool) error {
		if again {
			// The backfill the first call found, cancelled by it or ended.
			var first taskstate.Backfill
			if err := json.Unmarshal([]byte(kept.Before), &first); err == nil && first.ID != "" {
				if p, err = s.state.Poll(ctx); err != nil {
					return err
				}
				b, ok = p.Backfills[e.name]
				if !ok || b.ID != first.ID || b.State != taskstate.BackfillRunning {
					return nil
				}
			}
		}
		if ok && b.State == taskstate.BackfillRunning {
			if ok, err = s.state.EndBackfill(ctx, e.name, b.ID, taskstate.BackfillCancelled); err != nil {
				return err
			}
		}
		if !ok || b.State != taskstate.BackfillRunning {
			return fmt.Errorf("%w: task %q", ErrNoBackfill, e.name)
		}
		s.log.Info("backfill cancelled", "task", e.name, "backfill", b.ID, "taken", b.Taken, "refused", b.Refused, "of", b.Total)
		return nil
	})
}

// backfillPolicy returns the overlap policy of e's backfills given policy
// ("" for e's own), or an error wrapping ErrInvalidBackfill.
func backfillPolicy(e *entry, policy string) (string, error) {
	switch {
	case e.spec.Lock == "":
		return "", fmt.Errorf("%w: task %s: needs lock: a backfill's instants are taken under the task's lock, once each", ErrInvalidBackfill, e.name)
	case policy == "":
		policy = e.spec.Overlap
	}
	switch policy {
	case "", OverlapSkip, OverlapBufferOne:
		return OverlapSkip, nil
	case OverlapAllow:
		if e.spec.MaxConcurrent == 0 {
			return "", fmt.Errorf("%w: task %s: overlap %q: needs the task's maxConcurrent, which bounds the runs at once",
				ErrInvalidBackfill, e.name, policy)
		}
		return OverlapAllow, nil
	case OverlapCancelPrevious:
		return "", fmt.Errorf("%w: task %s: overlap %q: refused for a backfill, whose instants would cancel the ones before them; use %q, %q or %q",
			ErrInvalidBackfill, e.name, policy, OverlapSkip, OverlapBufferOne, OverlapAllow)
	}
	return "", fmt.Errorf("%w: task %s: overlap %q: must be one of %q, %q, %q (or empty: the task's own)",
		ErrInvalidBackfill, e.name, policy, OverlapSkip, OverlapBufferOne, OverlapAllow)
}

// backfillInstants counts the instants of e's schedule in [from, to], or
// returns an error wrapping ErrInvalidBackfill.
func backfillInstants(e *entry, from, to time.Time) (int, error) {
	switch {
	case from.IsZero() || to.IsZero():
		return 0, fmt.Errorf("%w: task %s: range [%v, %v]: from and to must be set", ErrInvalidBackfill, e.name, from, to)
	case to.Before(from):
		return 0, fmt.Errorf("%w: task %s: range [%v, %v]: to must not be before from", ErrInvalidBackfill, e.name, from, to)
	case !from.After(time.Unix(0, 0)):
		return 0, fmt.Errorf("%w: task %s: from %v: must be after %v", ErrInvalidBackfill, e.name, from, time.Unix(0, 0).UTC())
	}
	n := 0
	for t := nextInForce(e, from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = nextInForce(e, t) {
		if n++; n > MaxBackfill {
			return 0, fmt.Errorf("%w: task %s: range [%v, %v]: holds more than %d instants of the schedule; split it",
				ErrInvalidBackfill, e.name, from, to, MaxBackfill)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: task %s: range [%v, %v]: holds no instant of the schedule %q",
			ErrInvalidBackfill, e.name, from, to, e.cron)
	}
	return n, nil
}

// nextInstant is the instant of b after cursor (zero: before the first),
// zero past its end.
func nextInstant(e *entry, b taskstate.Backfill, cursor time.Time) time.Time {
	if cursor.IsZero() {
		cursor = b.From.Add(-time.Nanosecond)
	}
	if t := nextInForce(e, cursor); !t.IsZero() && !t.After(b.To) {
		return t
	}
	return time.Time{}
}

// nextInForce returns the first instant of e's task after t by the spec in
// force at it: of a stored schedule, e's from its From, before that each
// spec it replaced (that this node knows) in the span it was in force;
// zero if none.
func nextInForce(e *entry, t time.Time) time.Time {
	var first time.Time
	for x := e; x != nil; x = x.prior {
		after := t
		if x.prior != nil && x.prior.until.After(after) {
			after = x.prior.until.Add(-time.Nanosecond) // the spec before it has the instants before
		}
		n := x.sched.Next(after)
		if n.IsZero() || !x.until.IsZero() && !n.Before(x.until) {
			continue
		}
		if first.IsZero() || n.Before(first) {
			first = n
		}
	}
	return first
}

// A backfillStep is what the take of one instant of a backfill did, which
// the firing of the instant reports to the node driving the backfill.
type backfillStep struct {
	id      string
	take    taskstate.BackfillTake // set before decided is closed
	decided chan struct{}          // closed once the instant is taken, refused, or left
	once    sync.Once
}

func (st *backfillStep) decide(t taskstate.BackfillTake) {
	st.once.Do(func() {
		st.take = t
		close(st.decided)
	})
}

// polledBackfills notes the backfills a poll read, and returns the running
// ones of this node's tasks that this node is now to drive, each counted
// in flight, and the running ones of stored schedules deleted (that this
// node saw deleted, and that its read of the schedules at the poll's
// generation gen does not hold), to cancel: no node drove them to the
// delete (a driver cancels the backfill when it finds its schedule gone),
// and a schedule created again under the name must not take them up (it
// did, running the new spec's instants over the old range: the cluster
// simulation's seed 14376964605074284134 history 97). s.mu is held.
func (s *Scheduler) polledBackfills(polled map[string]taskstate.Backfill, gen int64) (drive []driven, cancel []taskstate.Backfill) {
	s.backfills = polled
	for name, b := range polled {
		if b.State != taskstate.BackfillRunning {
			continue
		}
		e := s.byName[name]
		switch {
		case e != nil && s.toDrive(e):
			drive = append(drive, driven{e, b})
		case e == nil && s.stored.gone[name] && s.stored.fresh && s.stored.gen == gen:
			cancel = append(cancel, b)
		}
	}
	return drive, cancel
}

// driven is a backfill of a task that this node is to drive.
type driven struct {
	e *entry
	b taskstate.Backfill
}

// toDrive marks e's backfill driven by this node and counts its driver in
// flight, unless it is driven already or e has no lock, and reports
// whether it marked it. s.mu is held.
func (s *Scheduler) toDrive(e *entry) bool {
	if s.driving[e.name] || e.spec.Lock == "" {
		return false
	}
	s.driving[e.name] = true
	s.takeoffLocked(1)
	return true
}

// drive takes b's instants in order, each through the one path of every run
// (fire), while this node can: it stops when an instant cannot be taken
// here (the lock is held, another node took it, the task is paused, the
// store failed), and the next poll starts it again where the cluster got.
// With the allow policy an instant starts once the one before it is taken;
// otherwise once it ended.
//
// The node counts as in flight (Stop waits for it, and so do the test
// kit's settles) the larger of one and this node's fires of b going: the
// fires of b do not land themselves, drive lands them, so that the count
// never drops to zero between two instants, and a blocked run of b counts
// once, not once more for the goroutine waiting for it.
func (s *Scheduler) drive(e *entry, b taskstate.Backfill) {
	ended := make(chan struct{}, max(e.spec.MaxConcurrent, 1)+1)
	inFlight := 0 // this node's fires of b going, each holding a flight but the first
	end := func() {
		<-ended
		if inFlight--; inFlight > 0 {
			s.land()
		}
	}
	defer func() {
		for inFlight > 0 {
			end()
		}
		s.mu.Lock()
		delete(s.driving, e.name)
		s.mu.Unlock()
		s.land()
	}()
	policy, err := backfillPolicy(e, b.Overlap)
	if err != nil { // this build's task cannot run it (its spec differs)
		s.log.Warn("backfill not driven here", "task", e.name, "backfill", b.ID, "err", err)
		return
	}
	for cursor := b.Cursor; !s.stopping(); {
		// A stored schedule's backfill follows its updates, and ends at
		// its delete.
		s.mu.Lock()
		cur := s.byName[e.name]
		s.mu.Unlock()
		if cur == nil || (e.stored != nil) != (cur.stored != nil) {
			s.cancelDeleted(e.name, b)
			return
		}
		e = cur
		next, f := s.backfillNext(e, b, cursor)
		if next.IsZero() {
			for inFlight > 0 {
				end()
			}
			s.endBackfill(e, b)
			return
		}
		step := &backfillStep{id: b.ID, decided: make(chan struct{})}
		f.step = step
		if inFlight > 0 {
			s.takeoff(1)
		}
		inFlight++
		go func() {
			s.fire(f, nil)
			step.decide(taskstate.BackfillStale) // it made no take, or the take was not its
			ended <- struct{}{}
		}()
		<-step.decided
		switch {
		case step.take != taskstate.BackfillStale:
			cursor = next
			if policy != OverlapAllow {
				end()
			}
		case policy == OverlapAllow && inFlight > 1:
			// Every place was taken by this node's runs of b: the
			// instant waits for one of them to end.
			end()
			end()
		default:
			return
		}
	}
}

// backfillNext returns the instant of b after cursor that drive takes
// next, the first that no calendar excludes (no node runs an excluded
// instant, a backfill neither), zero past b's end, and its firing by the
// spec in force at it. The specs' spans are read under s.mu: an update of
// the stored schedule writes them (insert), and the drive read them
// without it (a data race, the cluster simulation's seed
// 16414993436747368796 history 225).
func (s *Scheduler) backfillNext(e *entry, b taskstate.Backfill, cursor time.Time) (time.Time, firing) {
	for {
		s.mu.Lock()
		next := nextInstant(e, b, cursor)
		var f firing
		if !next.IsZero() {
			f = alsoLock(e, next, kindBackfill)
		}
		s.mu.Unlock()
		if next.IsZero() || s.excludedBy(f.e, next) == "" {
			return next, f
		}
		cursor = next
	}
}

// cancelDeleted ends b, a backfill of the task named name, which is no
// longer in the registry: its stored schedule was deleted. A schedule
// created again under its name does not take it up.
func (s *Scheduler) cancelDeleted(name string, b taskstate.Backfill) {
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, storeTimeout)
	defer cancel()
	ok, err := s.state.EndBackfill(ctx, name, b.ID, taskstate.BackfillCancelled)
	switch {
	case err != nil && !s.stopping():
		s.log.Warn("cancelling the backfill of a deleted schedule failed", "task", name, "backfill", b.ID, "err", err)
	case ok:
		s.log.Info("backfill cancelled: its schedule was deleted", "task", name, "backfill", b.ID)
	}
}

// endBackfill marks b done once its last instant was taken.
func (s *Scheduler) endBackfill(e *entry, b taskstate.Backfill) {
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, storeTimeout)
	defer cancel()
	ok, err := s.state.EndBackfill(ctx, e.name, b.ID, taskstate.BackfillDone)
	switch {
	case err != nil && !s.stopping():
		s.log.Warn("marking a backfill done failed; the next poll tries again", "task", e.name, "backfill", b.ID, "err", err)
	case ok:
		s.log.Info("backfill done", "task", e.name, "backfill", b.ID, "instants", b.Total)
	}
}

// takeBackfill takes f's instant of its backfill from the store (the
// claim of a backfill's run), and tells the node driving it what it did.
func (s *Scheduler) takeBackfill(ctx context.Context, f *firing) error {
	// The instant is claimed as its fire: a node that reaches the fire
	// late (its clock lags, it was paused) finds it claimed, not free. A
	// claim refused says only that this instant or a later one was claimed
	// (the claim record keeps the latest); the take decides by the history.
	if _, err := s.claims.Claim(ctx, f.e.claimKey, f.fire.UnixMilli(), ClaimTTL); err != nil {
		return fmt.Errorf("claiming instant %v of backfill %s: %w", f.fire, f.step.id, err)
	}
	// A fire of the instant that waits in the store for the run going
	// (buffer-one, cancel-previous) runs it: the backfill takes the
	// instant once that run is in the history, which refuses it. As the
	// last poll read the waiting fires: one left since is not seen.
	s.mu.Lock()
	r, waits := s.retries[f.e.name]
	s.mu.Unlock()
	if waits && r.Attempt == 1 && r.Fire.Equal(f.fire) {
		return fmt.Errorf("%w: instant %v of %s waits in the store for the run going (backfill %s)", locks.ErrClaimed, f.fire, f.e.name, f.step.id)
	}
	t, err := s.state.TakeBackfill(ctx, f.e.name, f.step.id, s.node, f.fire)
	switch {
	case err != nil:
		return fmt.Errorf("taking instant %v of backfill %s: %w", f.fire, f.step.id, err)
	case t == taskstate.BackfillRefused:
		f.step.decide(t)
		return fmt.Errorf("%w: instant %v of %s already ran (backfill %s refuses it)", locks.ErrClaimed, f.fire, f.e.name, f.step.id)
	case t == taskstate.BackfillStale:
		return fmt.Errorf("%w: instant %v of backfill %s of %s was taken", locks.ErrClaimed, f.fire, f.step.id, f.e.name)
	}
	f.taken = true
	f.step.decide(t)
	return nil
}
