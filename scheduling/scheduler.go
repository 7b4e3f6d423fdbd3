package scheduling

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling/internal/testhook"
	"github.com/ndigo/ndigo/taskstate"
)

// Config configures a Scheduler. Every field is optional.
type Config struct {
	// Driver hands out the leases of locked tasks. Without one, adding a
	// locked task fails: a locked task never runs unguarded.
	Driver locks.Driver
	// Clock drives the schedule, lock waits, renewals and MaxRunTime; nil
	// means the real clock.
	Clock clockwork.Clock
	// Logger receives skips, failures and panics; nil means slog.Default().
	Logger *slog.Logger
	// Node names this process in [Run] and [LastRun]; "" means
	// "<hostname>-<pid>".
	Node string
	// Location is the zone of cron expressions without a CRON_TZ= prefix;
	// nil means time.Local. Nodes that share locked tasks must agree on it
	// (or the expressions must name their zone), or they compute different
	// fire instants.
	Location *time.Location
	// Listeners are told about every run and skip, in this order; see
	// [Listener].
	Listeners []Listener
	// SkipLevel is the level of the lines about skipped fires (lock held,
	// already claimed by another node, still running); the zero value is
	// slog.LevelInfo. Every node but one logs one per locked task and fire.
	SkipLevel slog.Level
	// State is the task state the nodes share: paused flags, manual-run
	// requests and the run history (see [Scheduler.Pause]). Without one,
	// no fire is paused, nothing is recorded, and the control methods
	// return ErrNoState.
	State taskstate.Store
	// RequestPoll is how often the scheduler looks in State for manual
	// runs asked for on any node; zero means DefaultRequestPoll. A request
	// made through this scheduler is looked for at once.
	RequestPoll time.Duration
	// Spread spreads the fires of locked tasks over the live nodes, so that
	// a fire costs one node's driver calls instead of every node's: each
	// node heartbeats its membership of a group (the nodes with the same
	// locked tasks) through the driver, which must be a [locks.Membership],
	// and tries only the fires of the lock keys that rendezvous hashing
	// gives it among the live members. A fire that two nodes try while
	// their views differ (a node joining, leaving or dying) still runs once:
	// the lock and the claim decide it, as without Spread. See the package
	// documentation, "Spreading".
	Spread bool
	// Heartbeat is how often a spreading node renews its membership; zero
	// means DefaultHeartbeat, or a quarter of the shortest lock TTL if that
	// is shorter. A member that misses three is dropped, and its tasks go to
	// the others. The default follows the tasks: a task added after Start,
	// or a stored schedule, with a shorter lock TTL shortens it from when
	// the node has it, and its deletion lengthens it back.
	Heartbeat time.Duration
}

// A Scheduler runs tasks at their fire instants. It is safe for concurrent
// use. Build one with [New], or let [Module] build it from the fx graph.
type Scheduler struct {
	driver locks.Driver
	clock  clockwork.Clock
	log    *slog.Logger
	node   string
	loc    *time.Location
	skipAt slog.Level // Config.SkipLevel
	notify *notifier  // nil without listeners, so that runs pay nothing for them
	// observed is set by New when listeners or the logger's debug level
	// want each run's start and end; a logger's level raised to debug later
	// does not get them.
	observed bool

	wake     chan struct{} // nudges the loop when the earliest fire changes
	stop     chan struct{} // closed by Stop
	loopDone chan struct{} // closed when the loop returns

	claims locks.Claimer // the driver's fire claims; nil without a driver that keeps them
	minTTL time.Duration // the driver's minimum lease TTL (locks.MinTTLer)

	spread    *spread // nil unless Config.Spread
	configErr error   // what Start returns: a Config that New could not use

	state         taskstate.Store // nil without one: no pause, manual runs or shared history
	poll          time.Duration   // Config.RequestPoll
	pollFailing   atomic.Bool     // the last look for requests failed
	recordFailing atomic.Bool     // the last Record call failed
	startedAt     time.Time       // when Start ran; guarded by mu
	trailMu       sync.Mutex      // guards trailAt
	trailAt       time.Time       // the instant of this node's last trail attempt (attemptAt)
	pauses        pauseCache      // the paused flags read, kept while the store's pause generation holds
	records       recorder        // the runs on their way to the shared history
	stored        schedules       // the stored schedules and the handlers that run them
	cals          calendarView    // the calendars, read with the stored schedules
	schedFailing  atomic.Bool     // the last read of the stored schedules failed

	runCtx        context.Context // parent of every run; cancelled at the stop deadline
	cancelRuns    context.CancelCauseFunc
	acquireCtx    context.Context // lock acquisitions and waits; cancelled when Stop begins
	cancelAcquire context.CancelFunc

	mu           sync.Mutex // protects the fields below
	status       state
	entries      []*entry                      // in registration order
	seq          int32                         // the last entry's seq
	byName       map[string]*entry             // the task names taken
	retries      map[string]taskstate.Retry    // the pending retries this node knows of, by task (see retryPending)
	left         map[string]time.Time          // when this node left each task's pending run in retries (see dueRetries)
	backfills    map[string]taskstate.Backfill // each task's last backfill, as the last poll read it
	driving      map[string]bool               // the tasks whose running backfill this node drives
	due          entryHeap                     // entries with a next fire, earliest first
	held         map[*holding]struct{}
	landed       chan struct{} // closed when flying drops to 0; replaced when it rises
	landedClosed bool
	parked       bool       // the loop waits for the earliest fire
	idle         *sync.Cond // signalled when parked turns true or flying drops to 0
	nextPoll     time.Time  // when the loop looks for manual-run requests next, with a state store

	flying atomic.Int64 // fires in flight: from dispatch to the end of fire
}

type state uint8

const (
	created state = iota
	started
	stopped
)

// New returns a Scheduler configured by cfg. It does nothing until Start.
func New(cfg Config) *Scheduler {
	s := &Scheduler{
		driver:   cfg.Driver,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		node:     cfg.Node,
		loc:      cfg.Location,
		skipAt:   cfg.SkipLevel,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		byName:   map[string]*entry{},
		retries:  map[string]taskstate.Retry{},
		driving:  map[string]bool{},
		left:     map[string]time.Time{},
		held:     map[*holding]struct{}{},
		landed:   make(chan struct{}),
		state:    cfg.State,
		poll:     cfg.RequestPoll,
	}
	s.stored.read = make(chan struct{}, 1)
	if s.poll <= 0 {
		s.poll = DefaultRequestPoll
	}
	close(s.landed)
	s.landedClosed = true
	s.spread, s.configErr = checkSpread(cfg)
	if s.driver != nil {
		s.claims, _ = locks.As[locks.Claimer](s.driver)
		if m, ok := locks.As[locks.MinTTLer](s.driver); ok {
			s.minTTL = m.MinTTL()
		}
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.node == "" {
		s.node = DefaultNodeName()
	}
	if ls := slices.DeleteFunc(slices.Clone(cfg.Listeners), func(l Listener) bool { return l == nil }); len(ls) > 0 {
		s.notify = &notifier{listeners: ls, log: s.log}
	}
	s.observed = s.notify != nil || s.debugOn()
	s.idle = sync.NewCond(&s.mu)
	s.records.wake = make(chan struct{}, 1)
	// Unique among the nodes and their restarts: a node name need not be.
	s.records.prefix = strconv.FormatUint(rand.Uint64(), 36) + "."
	s.runCtx, s.cancelRuns = context.WithCancelCause(context.Background())
	s.acquireCtx, s.cancelAcquire = context.WithCancel(s.runCtx)
	return s
}

// Add validates tasks and schedules them. If any spec is invalid, it adds
// none and returns a *ValidationError listing every problem: the controller
// type, the method, the option, the value and the rule. Tasks may be added
// before or after Start.
func (s *Scheduler) Add(tasks ...Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == stopped {
		return errors.New("scheduling: Add after Stop")
	}
	cache := newParseCache(s.loc, len(tasks))
	if err := validateTasks(tasks, s.taken(""), s.lockRules(), cache); err != nil {
		return err
	}
	if len(s.entries) == 0 {
		// A first Add sizes the registry at once rather than by doubling.
		s.entries = make([]*entry, 0, len(tasks))
		s.byName = make(map[string]*entry, len(tasks))
		s.due = make(entryHeap, 0, len(tasks))
	}
	now := s.clock.Now()
	specs := specPool{}
	for _, t := range tasks {
		sched, _ := cache.taskSchedule(t) // validated above
		s.insert(t, sched, specs, now, nil, time.Time{})
	}
	if s.status == started {
		s.warnShortHistories(s.entries[len(s.entries)-len(tasks):], now)
	}
	s.changed(now)
	return nil
}

// insert adds t to the registry, in the place of old (the entry of a stored
// schedule that t updates) if not nil, its spec shared through specs. t's
// fires are those from from on (zero: from now); old keeps those before,
// and leaves the schedule at from. s.mu is held.
func (s *Scheduler) insert(t Task, sched schedule, specs specPool, now time.Time, old *entry, from time.Time) *entry {
	s.seq++
	e := &entry{flight: new(flight), fn: t.fn, name: t.Name(), typ: t.typ, method: t.method, cron: t.decl.Cron,
		spec: specs.share(t.Spec()), sched: sched, seq: s.seq, index: -1, zone: exprZone(t.decl.Cron, s.loc)}
	if from.After(now) {
		e.setNext(e.sched.Next(from.Add(-time.Nanosecond)))
	} else {
		e.nextAfter(now)
	}
	if e.spec.Lock != "" {
		e.claimKey = fireKey(e.name)
	}
	if old != nil {
		e.flight, e.seq = old.flight, old.seq
		s.entries[slices.Index(s.entries, old)] = e
		// old's fires before from are old's: it stays scheduled until
		// then, out of the registry, e's prior, and the fires of its
		// instants that run later (a retry, a fire that waited for the run
		// going, a takeover's) run its spec (inForce).
		old.until, e.prior = from, old
		if !from.After(now) || old.ended() {
			s.unschedule(old)
		}
		trimPriors(e)
	} else {
		s.entries = append(s.entries, e)
	}
	s.byName[e.name] = e
	if !e.next.IsZero() {
		heap.Push(&s.due, e)
	}
	return e
}

// trimPriors keeps the specs that e replaced to taskstate.MaxReplaced, as
// the store keeps them.
func trimPriors(e *entry) {
	for n := 0; e.prior != nil; e, n = e.prior, n+1 {
		if n == taskstate.MaxReplaced {
			e.prior = nil
			return
		}
	}
}

// unschedule takes e out of the schedule: it fires no more, and a fire of
// it in flight goes on. s.mu is held.
func (s *Scheduler) unschedule(e *entry) {
	e.gone = true
	if e.index >= 0 {
		heap.Remove(&s.due, int(e.index))
	}
}

// remove takes e out of the registry and the schedule, and the entries of
// the specs it replaced with it. s.mu is held.
func (s *Scheduler) remove(e *entry) {
	for p := e; p != nil; p = p.prior {
		s.unschedule(p)
	}
	s.entries = slices.DeleteFunc(s.entries, func(x *entry) bool { return x == e })
	delete(s.byName, e.name)
}

// taken returns whether a name is taken by a task of the registry other
// than the one named except. s.mu is held while it is called.
func (s *Scheduler) taken(except string) func(string) bool {
	return func(name string) bool {
		_, ok := s.byName[name]
		return ok && name != except
	}
}

// changed tells the loop, and a spreading scheduler's group, that the tasks
// changed at now. s.mu is held.
func (s *Scheduler) changed(now time.Time) {
	if s.spread != nil && s.status == started {
		s.regroup(now)
	}
	s.nudge()
}

// DriverName describes the scheduler's lock driver, as [DriverName] does:
// "redislocks (namespace prod)", "locks.InProcessDriver (this process
// only)", or "none".
func (s *Scheduler) DriverName() string {
	if s.driver == nil {
		return "none"
	}
	return DriverName(s.driver)
}

// lockRules returns what locked tasks need of this scheduler's driver.
func (s *Scheduler) lockRules() lockRules {
	r := lockRules{driver: s.driver, claims: s.claims != nil, minTTL: s.minTTL, state: s.state != nil, locked: map[string]lockUser{}}
	for _, e := range s.entries {
		if e.spec.Lock != "" {
			r.locked[e.spec.Lock] = lockUser{e.name, e.spec.Overlap == OverlapAllow}
		}
	}
	return r
}

// nudge makes the loop recompute its timer. s.mu must be held.
func (s *Scheduler) nudge() {
	s.parked = false
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the scheduler's loop and returns at once. The schedule starts
// then: fires that fell due between Add and Start do not run.
//
// A task with a catch-up window ([CatchUp]) runs its most recent fire within
// the window now, on the node that claims it, if no node claimed it.
func (s *Scheduler) Start() error {
	if err := s.checkCalendars(); err != nil {
		return err
	}
	s.mu.Lock()
	switch s.status {
	case started:
		s.mu.Unlock()
		return errors.New("scheduling: already started")
	case stopped:
		s.mu.Unlock()
		return errors.New("scheduling: Start after Stop")
	}
	if s.configErr != nil {
		s.mu.Unlock()
		return s.configErr
	}
	s.status = started
	s.startedAt = s.clock.Now()
	// Fires that fell due between Add and Start are not run late: the
	// schedule starts now.
	now := s.clock.Now()
	for _, e := range s.due {
		if !e.at().After(now) {
			e.nextAfter(now)
		}
	}
	heap.Init(&s.due)
	s.logStarted()
	s.warnShortHistories(s.entries, now)
	missed := s.catchUps(now, s.entries)
	s.nextPoll = now // requests made while no node ran are looked for at once
	if s.spread != nil {
		s.regroup(now)
	}
	go s.loop()
	s.mu.Unlock()
	if len(missed) > 0 {
		s.dispatch(missed)
	}
	return nil
}

// zoneName names loc (nil: the local zone) for the startup line: its name;
// for the local zone, whose name is "Local", also its abbreviation and
// offset at now, e.g. "Local (CET, UTC+01:00)"; for a fixed zone without a
// name, its offset.
func zoneName(loc *time.Location, now time.Time) string {
	if loc == nil {
		loc = time.Local
	}
	abbr, offset := now.In(loc).Zone()
	sign := '+'
	if offset < 0 {
		sign, offset = '-', -offset
	}
	utc := fmt.Sprintf("UTC%c%02d:%02d", sign, offset/3600, offset%3600/60)
	switch {
	case loc == time.Local:
		return "Local (" + abbr + ", " + utc + ")"
	case loc.String() == "":
		return utc
	}
	return loc.String()
}

// DefaultNodeName is the node name of a scheduler whose Config.Node is
// empty: "<hostname>-<pid>".
func DefaultNodeName() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Node returns the scheduler's node name (Config.Node, or the one it made).
func (s *Scheduler) Node() string { return s.node }

// Zone names the zone the schedules are evaluated in, as the startup line
// does: "Europe/Paris", "UTC", "Local (CET, UTC+01:00)", or an offset for
// an unnamed fixed zone.
func (s *Scheduler) Zone() string { return zoneName(s.loc, s.clock.Now()) }

// logStarted says at Info what the scheduler runs: node, driver and zone, then
// one line per task with its schedule, lock and next fire. s.mu is held.
func (s *Scheduler) logStarted() {
	if !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	s.log.Info("scheduler started", "node", s.node, "driver", s.DriverName(), "zone", zoneName(s.loc, s.clock.Now()), "tasks", len(s.entries))
	for _, e := range s.entries {
		args := []any{"task", e.name, "cron", e.cron}
		if e.spec.Lock != "" {
			args = append(args, "lock", e.spec.Lock)
		}
		if !e.next.IsZero() {
			args = append(args, "next", e.next)
		}
		s.log.Info("task scheduled", args...)
	}
}

// Stop stops the scheduler: no new fires start, fires waiting for their
// lock give up, and runs in flight get until shortly before ctx's deadline
// to return. Stop keeps back a quarter of the time ctx has left, at most 2s,
// for what follows, so that it returns before ctx ends (and before an fx
// application gives up on its stop hooks): the runs still going are
// cancelled (their context's cause wraps ErrStopTimeout), their leases are
// released at once, and Stop waits for them to return for three quarters of
// what is left. Then it returns an error wrapping ErrStopTimeout that names
// the runs it cut.
// A ctx without a deadline is waited for in full. A run that ignores its
// cancelled context goes on without its lease.
//
// A spreading scheduler ([Config.Spread]) first hands its tasks over: it
// stops its heartbeats, leaves its group, and goes on running its fires for
// two heartbeats (at most a quarter of ctx's time left), by which the other
// nodes have seen it gone and taken its tasks; so its fires due during a
// rolling deploy run on time, and each once (the claims decide). A node
// alone in its group, or a ctx already ended, only leaves.
//
// Stop logs at Info what it waits for, and at Error the runs it cut.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	prev := s.status
	s.status = stopped
	s.mu.Unlock()
	switch prev {
	case stopped:
		return nil
	case started:
		defer s.logLostRecords(ctx)
		if s.spread != nil {
			s.handOver(ctx)
		}
		close(s.stop)
		s.cancelAcquire() // fires waiting for a lock give up: no new runs
		<-s.loopDone
	}
	s.mu.Lock()
	landed := s.landed
	s.mu.Unlock()
	select {
	case <-landed: // nothing in flight, whatever ctx says
		s.cancelRuns(context.Canceled)
		if prev == started {
			s.log.Info("scheduler stopped", "node", s.node)
		}
		return nil
	default:
	}
	grace, cancel := stopGrace(ctx)
	defer cancel()
	waiting := s.inFlight()
	if deadline, ok := grace.Deadline(); ok {
		s.log.Info("stopping: waiting for runs in flight", "wait", time.Until(deadline).Round(time.Millisecond).String(),
			"runs", len(waiting), "tasks", waiting)
	} else {
		s.log.Info("stopping: waiting for runs in flight", "runs", len(waiting), "tasks", waiting)
	}
	select {
	case <-landed:
		s.cancelRuns(context.Canceled)
		s.log.Info("scheduler stopped", "node", s.node)
		return nil
	case <-grace.Done():
	}
	cut := s.inFlight()
	err := fmt.Errorf("%w (runs cut: %q): %w", ErrStopTimeout, cut, context.Cause(grace))
	s.cancelRuns(err)
	s.mu.Lock()
	held := make([]*holding, 0, len(s.held))
	for h := range s.held {
		held = append(held, h)
	}
	s.mu.Unlock()
	for _, h := range held {
		if rerr := h.release(ctx); rerr != nil {
			s.log.Warn("lease release failed", "task", h.e.name, "lock", h.e.spec.Lock, "token", h.lease.Token(), "err", rerr)
		}
	}
	// Give the cancelled runs half of what is left to return, so that Stop
	// itself returns before ctx ends.
	wait, cancelWait := stopGrace(ctx)
	defer cancelWait()
	select {
	case <-landed:
	case <-wait.Done():
	}
	s.log.Error("stop deadline: runs cancelled and their leases released", "tasks", cut, "err", err)
	return err
}

// stopGrace returns the part of ctx that Stop waits in: all of it without
// a deadline, else all but a quarter of the time left, at most 2s.
func stopGrace(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	keep := min(time.Until(deadline)/4, 2*time.Second)
	return context.WithDeadline(ctx, deadline.Add(-keep))
}

// inFlight names the tasks with a fire in flight, in registration order.
func (s *Scheduler) inFlight() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, e := range s.entries {
		if e.running() {
			names = append(names, e.name)
		}
	}
	return names
}

// stopping reports whether Stop was called.
func (s *Scheduler) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// loop waits on one timer for the earliest fire (or, with a state store,
// the next look for manual-run requests), and dispatches the due fires in
// (instant, registration) order.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	var timer clockwork.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var batch []firing
	for {
		// Due entries leave the heap, start, and only then get their next
		// fire: computing it (a cron search) is not on the path to the run.
		s.mu.Lock()
		s.parked = false
		now := s.clock.Now()
		batch = batch[:0]
		for len(s.due) > 0 && !s.due[0].at().After(now) {
			e := heap.Pop(&s.due).(*entry)
			if e.ended() {
				e.gone = true // a replaced spec's: the next fire is its successor's
				continue
			}
			batch = append(batch, firing{e: e, fire: e.next, at: e.at()})
		}
		poll := s.state != nil && !s.nextPoll.After(now)
		if poll {
			s.nextPoll = now.Add(s.poll)
		}
		beat := s.beatDue(now)
		if beat {
			s.spread.nextBeat = now.Add(s.spread.every)
			s.spread.beats.Add(1) // with the decision: a handover's leave waits for it
		}
		s.mu.Unlock()
		if len(batch) > 0 {
			s.dispatch(batch)
		}
		if poll {
			// A store call is not made on the loop, which fires are waiting for.
			s.takeoff(1)
			go s.pollRequests()
		}
		if beat {
			s.takeoff(1)
			go s.beat()
		}

		s.mu.Lock()
		for _, f := range batch {
			e := f.e
			if e.gone {
				continue // a stored schedule updated or deleted meanwhile
			}
			if e.setNext(e.sched.Next(f.fire)); !e.next.IsZero() && !e.at().After(now) {
				e.nextAfter(now) // missed fires are not caught up
			}
			if e.ended() {
				e.gone = true // a replaced spec's last fire: its successor has the next
				continue
			}
			if !e.next.IsZero() && !e.runsTaken.Load() {
				heap.Push(&s.due, e)
			}
		}
		var fired <-chan time.Time
		var wakeAt time.Time
		if len(s.due) > 0 {
			wakeAt = s.due[0].at()
		}
		if s.state != nil && (wakeAt.IsZero() || s.nextPoll.Before(wakeAt)) {
			wakeAt = s.nextPoll
		}
		if sp := s.spread; sp != nil && !sp.leaving && (wakeAt.IsZero() || sp.nextBeat.Before(wakeAt)) {
			wakeAt = sp.nextBeat
		}
		if !wakeAt.IsZero() {
			d := wakeAt.Sub(s.clock.Now())
			if timer == nil {
				timer = s.clock.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			fired = timer.Chan()
		}
		s.parked = true
		s.idle.Broadcast()
		s.mu.Unlock()
		select {
		case <-fired:
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}

// beatDue reports whether a spreading scheduler's heartbeat is due at now.
// s.mu is held.
func (s *Scheduler) beatDue(now time.Time) bool {
	sp := s.spread
	return sp != nil && !sp.leaving && !sp.nextBeat.After(now)
}

// takeoff counts n more fires in flight. Only the loop calls it, and
// goroutines counted in flight themselves (a heartbeat's takeovers), which
// keep the count above zero; a caller outside them (Backfill) calls
// takeoffLocked while it sees the scheduler started.
func (s *Scheduler) takeoff(n int) {
	s.mu.Lock()
	s.takeoffLocked(n)
	s.mu.Unlock()
}

// takeoffLocked is takeoff with s.mu held.
func (s *Scheduler) takeoffLocked(n int) {
	if s.flying.Load() == 0 {
		if !s.landedClosed { // the last land has not closed it yet
			close(s.landed)
		}
		s.landed, s.landedClosed = make(chan struct{}), false
	}
	s.flying.Add(int64(n))
}

// land counts one fire as ended. Only the last of a flight takes s.mu, so
// that a thousand fires ending together do not contend for it.
func (s *Scheduler) land() {
	if n := s.flying.Add(-1); n != 0 {
		if n == 1 {
			s.records.landed() // the last fire but one: a flush may be waiting for it
		}
		return
	}
	s.mu.Lock()
	if s.flying.Load() == 0 && !s.landedClosed {
		close(s.landed)
		s.landedClosed = true
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// entryHeap orders entries by the start of their next fire (its instant,
// or later with Jitter), then registration order.
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if a, b := h[i].at(), h[j].at(); !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = int32(len(*h))
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}

func init() {
	testhook.WaitIdle = func(ctx context.Context, s any) error { return s.(*Scheduler).waitIdle(ctx) }
	testhook.Quiet = func(s any) (bool, int) { return s.(*Scheduler).quietNow() }
	testhook.Next = func(s any) time.Time { return s.(*Scheduler).nextFire() }
}

// quiet reports whether the loop waits for a fire, a poll and a heartbeat
// none of which is due yet: until the clock moves, it starts nothing. s.mu
// is held.
func (s *Scheduler) quiet() bool {
	now := s.clock.Now()
	return s.parked && (len(s.due) == 0 || s.due[0].at().After(now)) &&
		(s.state == nil || s.nextPoll.After(now)) && !s.beatDue(now)
}

// quietNow returns quiet and the fires in flight, read together. For
// package schedulingtest.
func (s *Scheduler) quietNow() (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quiet(), int(s.flying.Load())
}

// waitIdle blocks until the loop is quiet and no fire is in flight, or ctx
// ends. For package schedulingtest.
func (s *Scheduler) waitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !(s.quiet() && s.flying.Load() == 0) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.idle.Wait()
	}
	return nil
}

// nextFire returns when the earliest next fire starts (its instant, later
// with Jitter), zero if none.
func (s *Scheduler) nextFire() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.due) == 0 {
		return time.Time{}
	}
	return s.due[0].at()
}
