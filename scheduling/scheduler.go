package scheduling

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
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
}

// A Scheduler runs tasks at their fire instants. It is safe for concurrent
// use. Build one with [New], or let [Module] build it from the fx graph.
type Scheduler struct {
	driver locks.Driver
	clock  clockwork.Clock
	log    *slog.Logger
	node   string
	loc    *time.Location
	notify *notifier // nil without listeners, so that runs pay nothing for them
	// observed is set by New when listeners or the logger's debug level
	// want each run's start and end; a logger's level raised to debug later
	// does not get them.
	observed bool

	wake     chan struct{} // nudges the loop when the earliest fire changes
	stop     chan struct{} // closed by Stop
	loopDone chan struct{} // closed when the loop returns

	runCtx        context.Context // parent of every run; cancelled at the stop deadline
	cancelRuns    context.CancelCauseFunc
	acquireCtx    context.Context // lock acquisitions and waits; cancelled when Stop begins
	cancelAcquire context.CancelFunc
	runWG         sync.WaitGroup // dispatches and runs in flight, for Stop

	onRenew func() // called after each lease extension; for tests

	mu      sync.Mutex // protects the fields below
	state   state
	entries []*entry        // in registration order
	names   map[string]bool // task names taken
	due     entryHeap       // entries with a next fire, earliest first
	locked  map[*activeRun]struct{}
	parked  bool       // the loop waits for the earliest fire
	idle    *sync.Cond // signalled when parked turns true or active drops to 0; for tests

	active atomic.Int64 // dispatches and runs in flight
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
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		names:    map[string]bool{},
		locked:   map[*activeRun]struct{}{},
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.node == "" {
		host, _ := os.Hostname()
		s.node = host + "-" + strconv.Itoa(os.Getpid())
	}
	if ls := slices.DeleteFunc(slices.Clone(cfg.Listeners), func(l Listener) bool { return l == nil }); len(ls) > 0 {
		s.notify = &notifier{listeners: ls, log: s.log}
	}
	s.observed = s.notify != nil || s.debugOn()
	s.idle = sync.NewCond(&s.mu)
	s.runCtx, s.cancelRuns = context.WithCancelCause(context.Background())
	s.acquireCtx, s.cancelAcquire = context.WithCancel(s.runCtx)
	return s
}

// entry is one task in a scheduler.
type entry struct {
	fn     func(context.Context) error
	name   string
	typ    string
	method string
	spec   Spec
	sched  schedule
	seq    int // registration order

	running atomic.Bool // single flight on this node

	// claim is this node's latest fire claim. Only the fire in flight, which
	// single flight makes one at a time, touches it.
	claim locks.Lease

	// Guarded by Scheduler.mu.
	next  time.Time // zero when the schedule has no further fire
	index int       // in Scheduler.due; -1 when absent

	mu    sync.Mutex // protects last and stats, apart from Scheduler.mu so runs do not contend
	last  *LastRun   // nil until the first fire; reused after
	stats counts
}

// record stores the outcome of a fire.
func (e *entry) record(r LastRun, c counts) {
	e.mu.Lock()
	if e.last == nil {
		e.last = new(LastRun)
	}
	*e.last = r
	e.stats.runs += c.runs
	e.stats.skips += c.skips
	e.stats.failures += c.failures
	e.mu.Unlock()
}

type counts struct{ runs, skips, failures uint64 }

// Add validates tasks and schedules them. If any spec is invalid, it adds
// none and returns a *ValidationError listing every problem: the controller
// type, the method, the option, the value and the rule. Tasks may be added
// before or after Start.
func (s *Scheduler) Add(tasks ...Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stopped {
		return errors.New("scheduling: Add after Stop")
	}
	cache := newParseCache(s.loc)
	if err := validateTasks(tasks, s.names, s.driver != nil, cache); err != nil {
		return err
	}
	now := s.clock.Now()
	for _, t := range tasks {
		sched, _ := cache.parse(t.spec.Cron) // validated above
		e := &entry{fn: t.fn, name: t.Name(), typ: t.typ, method: t.method, spec: t.Spec(),
			sched: sched, seq: len(s.entries), index: -1, next: sched.Next(now)}
		s.entries = append(s.entries, e)
		s.names[e.name] = true
		if !e.next.IsZero() {
			heap.Push(&s.due, e)
		}
	}
	s.nudge()
	return nil
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
func (s *Scheduler) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case started:
		return errors.New("scheduling: already started")
	case stopped:
		return errors.New("scheduling: Start after Stop")
	}
	s.state = started
	// Fires that fell due between Add and Start are not run late: the
	// schedule starts now.
	now := s.clock.Now()
	for _, e := range s.due {
		if !e.next.After(now) {
			e.next = e.sched.Next(now)
		}
	}
	heap.Init(&s.due)
	go s.loop()
	return nil
}

// Stop stops the scheduler gracefully: no new fires start, and runs in
// flight get until ctx ends to return. Then their contexts are cancelled,
// their leases released, and Stop returns an error wrapping ErrStopTimeout
// and ctx's error that names them. A run that ignores its cancelled context
// goes on without its lease.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	prev := s.state
	s.state = stopped
	s.mu.Unlock()
	switch prev {
	case stopped:
		return nil
	case started:
		close(s.stop)
		s.cancelAcquire() // fires waiting for a lock give up: no new runs
		<-s.loopDone
	}
	if s.active.Load() == 0 { // nothing in flight, whatever ctx says
		s.cancelRuns(context.Canceled)
		return nil
	}
	done := make(chan struct{})
	go func() {
		s.runWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancelRuns(context.Canceled)
		return nil
	case <-ctx.Done():
	}
	s.cancelRuns(fmt.Errorf("%w: %w", ErrStopTimeout, context.Cause(ctx)))
	s.mu.Lock()
	var names []string
	var cut []*activeRun
	for r := range s.locked {
		cut = append(cut, r)
		names = append(names, r.e.name)
	}
	s.mu.Unlock()
	for _, r := range cut {
		r.release(s)
	}
	return fmt.Errorf("%w (locked runs cut: %q): %w", ErrStopTimeout, names, ctx.Err())
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

// firing is one due fire of one entry.
type firing struct {
	e    *entry
	fire time.Time
}

// loop waits on one timer for the earliest fire, and dispatches the due
// fires in (instant, registration) order.
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
		for len(s.due) > 0 && !s.due[0].next.After(now) {
			e := heap.Pop(&s.due).(*entry)
			batch = append(batch, firing{e: e, fire: e.next})
		}
		s.mu.Unlock()
		if len(batch) > 0 {
			s.begin()
			s.dispatch(batch)
		}

		s.mu.Lock()
		for _, f := range batch {
			e := f.e
			next := e.sched.Next(f.fire)
			if !next.IsZero() && !next.After(now) {
				next = e.sched.Next(now) // missed fires are not caught up
			}
			if e.next = next; !next.IsZero() {
				heap.Push(&s.due, e)
			}
		}
		var fired <-chan time.Time
		if len(s.due) > 0 {
			d := s.due[0].next.Sub(s.clock.Now())
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

// begin counts one more dispatch or run in flight.
func (s *Scheduler) begin() {
	s.active.Add(1)
	s.runWG.Add(1)
}

// end counts one dispatch or run as finished.
func (s *Scheduler) end() {
	if s.active.Add(-1) == 0 {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	}
	s.runWG.Done()
}

// Tasks returns the registry: every task in registration order, with its
// spec, next fire and last fire on this node.
func (s *Scheduler) Tasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskInfo, len(s.entries))
	for i, e := range s.entries {
		out[i] = TaskInfo{Name: e.name, Type: e.typ, Method: e.method, Spec: e.spec, Next: e.next,
			Running: e.running.Load()}
		e.mu.Lock()
		out[i].Runs, out[i].Skips, out[i].Failures = e.stats.runs, e.stats.skips, e.stats.failures
		if e.last != nil {
			out[i].Last = *e.last
		}
		e.mu.Unlock()
	}
	return out
}

// A LeaseInfo describes a lease this node holds for a locked run in flight.
type LeaseInfo struct {
	Task  string    // the task running under it
	Key   string    // the lock key
	Token uint64    // the fencing token
	Fire  time.Time // the fire being run
	Since time.Time // when the run started holding it, on the scheduler's clock
}

// Leases returns the leases this node holds for locked runs in flight,
// ordered by key, then task. Fire claims are not included.
func (s *Scheduler) Leases() []LeaseInfo {
	s.mu.Lock()
	out := make([]LeaseInfo, 0, len(s.locked))
	for r := range s.locked {
		out = append(out, LeaseInfo{Task: r.e.name, Key: r.lease.Key(), Token: r.lease.Token(), Fire: r.fire, Since: r.since})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b LeaseInfo) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Task, b.Task))
	})
	return out
}

// entryHeap orders entries by next fire, then registration order.
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if !h[i].next.Equal(h[j].next) {
		return h[i].next.Before(h[j].next)
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
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
