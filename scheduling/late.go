package scheduling

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// maxLateFires bounds the late fires a takeover keeps for one task: a task
// firing every 100ms over the default detection span has some fifty, one
// firing every millisecond over an hour-long heartbeat would have millions.
// Beyond it the oldest are not tried, and the audit reports them missed.
const maxLateFires = 1000

// lateFires are the instants of a task that a takeover found due and not
// tried by this node, which this node runs late, oldest first, one after
// another, before any later fire of the task: claims are monotonic, so a
// later fire claimed first would leave them unclaimable.
type lateFires struct {
	mu      sync.Mutex // protects the fields below
	at      []lateFire // the instants still to try, oldest first
	active  bool       // the instants are pending: a later fire joins them
	running bool       // a chain (runLate) is trying them
	until   time.Time  // the deadline: instants still pending then are missed
	why     Outcome    // what kept the chain pending last: a joined fire dropped says so
	// busy is when the chain's last fire would have ended had it run at its
	// instant: a joined fire of a task that skips overlaps, due before it,
	// is skipped as it would have been on time.
	busy time.Time
}

// A lateFire is an instant that a chain tries.
type lateFire struct {
	at     time.Time
	joined bool   // this node's own scheduled fire, which joined the chain (joinLate)
	e      *entry // a joined fire's spec, as the node read the schedule at its instant
	due    time.Time
}

// lateTry is what a late fire's path tells its chain.
type lateTry struct {
	joined  bool    // see lateFire
	pending bool    // the lock was held, or a fire of the task in flight: try again later
	why     Outcome // what kept it pending
}

// lateReach is how far back a takeover at now looks for the fires a member
// that left may have left: from its last heartbeat, which prev (the last
// view that listed it, sent at prev.at) bounds from below, as a membership
// lives memberLife heartbeats; for a view without a time, memberLife+2
// heartbeats before now. Older fires ran on the member or were skipped
// there, and their claims (or the member's later ones) refuse them anyway.
func lateReach(prev *view, every time.Duration, now time.Time) time.Time {
	if prev.at.IsZero() {
		return now.Add(-(memberLife + 2) * every)
	}
	return prev.at.Add(-memberLife * every)
}

// instantsInForce returns cur's task's instants in [from, to], oldest
// first, each with the entry of the spec in force at it (cur, or a spec it
// replaced), at most the newest limit of them.
func instantsInForce(cur *entry, from, to time.Time, limit int) []firing {
	var specs []*entry
	for e := cur; e != nil; e = e.prior {
		specs = append(specs, e)
	}
	slices.Reverse(specs)
	var out []firing
	for _, e := range specs {
		start, end := from, to
		switch {
		case e.prior != nil && e.prior.until.After(start):
			start = e.prior.until // the spec before it has the instants before
		case e.prior == nil && e.stored != nil && e.stored.From.After(start):
			start = e.stored.From // a stored schedule's instants start at its creation
		}
		if !e.until.IsZero() && !e.until.After(end) {
			end = e.until.Add(-time.Nanosecond) // its fires are those before until
		}
		// The bound only guards against a schedule that does not advance.
		for t, i := start.Add(-time.Nanosecond), 0; i < 1_000_000; i++ {
			n := e.sched.Next(t)
			if n.IsZero() || n.After(end) {
				break
			}
			out = append(out, alsoLock(cur, n, kindCatchUp))
			t = n
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// runLates starts a chain for each task of taken (a takeover's fires, in
// order per task) whose late fires are not pending yet, and adds the
// later instants to those pending. A chain's
// instants stay pending while the lock is held (the member that left died
// holding the lease), tried again at each heartbeat (resumeLates) until
// the lease lapses, at most a lock TTL and two heartbeats after the
// takeover; the instants still pending then are recorded missed.
func (s *Scheduler) runLates(taken []firing) {
	s.mu.Lock()
	every := s.spread.every
	s.mu.Unlock()
	now := s.clock.Now()
	for i := 0; i < len(taken); {
		j := i + 1
		for j < len(taken) && taken[j].e.name == taken[i].e.name {
			j++
		}
		e := taken[i].e
		l := &e.late
		l.mu.Lock()
		start := !l.active
		if start {
			l.at, l.active, l.running = l.at[:0], true, true
		}
		for _, f := range taken[i:j] { // a second takeover adds its later instants
			if n := len(l.at); (n == 0 || f.fire.After(l.at[n-1].at)) && n < maxLateFires {
				l.at = append(l.at, lateFire{at: f.fire})
			}
		}
		l.until = now.Add(e.spec.LockTTL + 2*every)
		l.mu.Unlock()
		if start {
			s.mu.Lock()
			if s.spread.lates == nil {
				s.spread.lates = make(map[*flight]string)
			}
			s.spread.lates[e.flight] = e.name
			s.mu.Unlock()
			s.takeoff(1)
			go s.runLate(e.name, e.flight)
		}
		i = j
	}
}

// resumeLates starts again the chains whose late fires wait for a held
// lock.
func (s *Scheduler) resumeLates() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fl, task := range s.spread.lates {
		l := &fl.late
		l.mu.Lock()
		resume := !l.running
		l.running = true
		l.mu.Unlock()
		if resume {
			s.takeoffLocked(1)
			go s.runLate(task, fl)
		}
	}
}

// joinLate leaves f, a scheduled fire that this node owns of a task whose
// late fires are pending, to their chain, which runs it after them: run
// now, it would claim its instant first and leave theirs unclaimable. It
// does not join past the chain's deadline, by which the lease of the
// member that left has lapsed, nor while the chain waits for a run of the
// task here: the task is busy, and the fire is skipped as one that finds
// the run before it going. A fire that joins a task that skips overlaps is
// skipped in its turn if the chain's run before it, started at its own
// instant, would still have been going at this one's (see runLate): so a
// chain whose runs are longer than the period skips what the task would
// have skipped on time, and does not pile up fires behind it, each later
// than the last (the simulation's seed 15462860377904919152 history 83,
// seed 6893811210285634024 history 381); a chain of short runs loses none
// of the fires due while it runs (TestClusterWalkThrough on PostgreSQL:
// runs of 10 ms skipped the fire due in the first). The chain tries a
// joined fire whoever owns the task then (seed 14185607628684295526
// history 243: the owner came back while the fires waited, and they were
// skipped as not owner everywhere).
func (s *Scheduler) joinLate(f *firing, t *turn) (joined, busy bool) {
	if f.kind != kindScheduled || f.late != nil || f.e.spec.Lock == "" || s.spread == nil || !s.owns(f.e.spec.Lock) {
		return false, false // a fire another node owns is skipped as not owner
	}
	l := &f.e.late
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return false, false
	}
	if l.why == OutcomeRunning || f.fire.After(l.until) {
		l.mu.Unlock()
		return false, true
	}
	full := len(l.at) >= maxLateFires
	if !full {
		l.at = append(l.at, lateFire{at: f.fire, joined: true, e: f.e, due: f.at})
	}
	l.mu.Unlock()
	t.pass()
	if full {
		s.skip(*f, OutcomeMissed, nil)
	}
	return true, false
}

// runLate is the chain of task's late fires: it tries them through the
// one fire path, oldest first, each once its previous one ran or was
// refused (a claim refused: the member that left, or another node, had
// it; not run again, and not recorded); it stops at one whose lock is
// held, or that finds a fire of the task in flight here, which the next
// heartbeat tries again, until the deadline. This node's own fires that
// joined the chain come after every takeover's instant, and each runs in
// its turn as it would have on time: it waits or buffers as its spec says,
// and its skips are recorded (a deadline would record missed a fire that
// no fault touched: the simulation's seed 6533955827891765782 history
// 12). Counted as a fire in flight while it runs: it never waits
// for the clock, so a test that steps a fake clock until the fires land
// does not wait for it.
func (s *Scheduler) runLate(task string, fl *flight) {
	defer s.land()
	l := &fl.late
	for {
		if s.endLate(fl, s.stopping()) {
			return
		}
		l.mu.Lock()
		lf, until := l.at[0], l.until
		l.mu.Unlock()
		s.mu.Lock()
		cur := s.byName[task]
		s.mu.Unlock()
		if cur == nil || cur.flight != fl {
			// Deleted, or created again: the instants are of a task gone.
			// The fires of this node's own that joined are recorded as
			// what kept them waiting (not a silent loss: the simulation's
			// seed 15050948897812883904 history 130).
			l.mu.Lock()
			at, why := slices.Clone(l.at), l.why
			l.mu.Unlock()
			s.endLate(fl, true)
			for _, lf := range at {
				if lf.joined {
					s.skip(firing{e: lf.e, fire: lf.at, at: lf.due, kind: kindScheduled}, cmp.Or(why, OutcomeLockHeld), nil)
				}
			}
			return
		}
		f := alsoLock(cur, lf.at, kindCatchUp)
		if lf.joined {
			// By the spec it was due by: an update read since does not
			// make it another spec's fire (the simulation's seed
			// 15977122186169711341 history 207).
			f = alsoLockOf(cur, lf.e, lf.at, kindScheduled)
			f.at = lf.due
		} else if !f.e.sched.Next(lf.at.Add(-time.Nanosecond)).Equal(lf.at) {
			// Not an instant of the spec in force at it: an update that
			// the takeover had not read (the simulation's seed
			// 7799348695535355068 history 237).
			s.popLate(l)
			continue
		}
		if !lf.joined && s.clock.Now().After(until) {
			// The lease stayed held past the bound: a holder other than
			// the member that left, whose lease would have lapsed.
			s.popLate(l)
			s.skip(f, OutcomeMissed, nil)
			continue
		}
		l.mu.Lock()
		busy := l.busy
		l.mu.Unlock()
		if lf.joined && (f.e.spec.Overlap == "" || f.e.spec.Overlap == OverlapSkip) && busy.After(lf.at) {
			s.popLate(l)
			s.skip(f, OutcomeRunning, nil)
			continue
		}
		f.late = &lateTry{joined: lf.joined}
		s.takeoff(1)
		start := s.clock.Now()
		s.fire(f, nil)
		l.mu.Lock()
		l.busy = lf.at.Add(s.clock.Since(start))
		l.mu.Unlock()
		if f.late.pending {
			l.mu.Lock()
			l.running, l.why = false, f.late.why
			l.mu.Unlock()
			return
		}
		s.popLate(l)
	}
}

// takenOver reports whether f is a takeover's late fire, rather than
// this node's own scheduled fire run by the chain it joined (which waits,
// buffers and records its skips as it would have).
func (f *firing) takenOver() bool {
	return f.late != nil && !f.late.joined
}

// popLate drops l's oldest instant.
func (s *Scheduler) popLate(l *lateFires) {
	l.mu.Lock()
	l.at = l.at[1:]
	l.mu.Unlock()
}

// endLate ends fl's late fires if none is left, or all of them with all:
// a later fire no longer joins them. It reports whether it did.
func (s *Scheduler) endLate(fl *flight, all bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &fl.late
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.at) > 0 && !all {
		return false
	}
	delete(s.spread.lates, fl)
	l.at, l.active, l.running = l.at[:0], false, false
	return true
}

// lateSkip reports whether a takeover's late fire's skip with o leaves it
// to its chain (pending, or refused: not recorded) rather than recording
// it.
func lateSkip(f *firing, o Outcome) bool {
	if f.late == nil || f.late.joined {
		return false
	}
	switch o {
	case OutcomeLockHeld, OutcomeRunning, OutcomeLockPending:
		f.late.pending, f.late.why = true, o
		return true
	case OutcomeAlreadyRun:
		return true
	}
	return false
}
