package scheduling

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/notify"
	"github.com/ndigo/ndigo/taskstate"
)

// DefaultAlertEvery is how often an [Alerter] judges each task's health
// when [AlertConfig].Every is zero.
const DefaultAlertEvery = 15 * time.Second

// The trail actions of an [Alerter]'s messages ([Scheduler.Events]): one
// delivered, and one given up (its Note says why).
const (
	ActionNotify       = "notify"
	ActionNotifyFailed = "notify-failed"
)

// AlertConfig configures an [Alerter].
type AlertConfig struct {
	// Notifiers send each message, one after the other; at least one.
	Notifiers []notify.Notifier
	// Every is how often each task's health is judged; zero means
	// DefaultAlertEvery. A change is sent within about Every of when the
	// health shows it.
	Every time.Duration
	// Retry is how each notifier's failed attempts are repeated.
	Retry notify.Retry
}

// An Alerter sends a message each time a task's health ([Scheduler.Health])
// changes: "late", "down", "failing" or "overrun" when it enters that
// state, and "recovered" when it is ok again after one of them. A paused
// or completed task, or one whose health cannot be read, sends nothing.
//
// Every node runs an Alerter; each task's messages are sent by one of them:
// the node that owns the task's fires ([Config.Spread]: the owner of its
// lock, or of its name for an unlocked task, in the node's last view of the
// group), or without spreading the holder of the lease [AlertLease]. A
// message is recorded in the trail ([Scheduler.Events], action
// [ActionNotify], or [ActionNotifyFailed] once the notifiers' retries gave
// up) under its ID, and every node tails the trail to know what was sent:
// so when the sender dies, or ownership moves, the next one sends only what
// the trail lacks.
//
// A message's ID (its idempotency key) is derived from the task, the state
// and when the state began, the same on every node: a sender that dies
// after delivering a message and before recording it makes the next sender
// deliver it again under the same ID, which a receiver keeping each ID once
// keeps once. Nothing is lost: a message is recorded only once delivered or
// given up.
//
// When the task state store cannot be read (the database is down), the
// health is judged from the history last read and this node's own records
// not yet stored, and the sender is the one of the last view: so a database
// outage is reported while it lasts, and the records of its messages reach
// the trail once it is back. The judgement cannot see runs on other nodes
// then; a node that was not the sender before does not start sending
// without a view.
type Alerter struct {
	s     *Scheduler
	cfg   AlertConfig
	every time.Duration

	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	keeping sync.Mutex // held by keep
	mu      sync.Mutex
	started bool
	stopped bool
	seq     int64                 // the newest trail entry read
	last    map[string]alertState // each task's newest message, as the trail and this node know it
	busy    map[string]bool       // the tasks with a message in flight from this node
	read    map[string]alertRead  // each task's history and pause as last read
	unkept  []taskstate.Event     // messages sent that the trail does not keep yet
	lease   locks.Lease           // AlertLease, without spreading; nil if not held
}

// AlertLease is the lease that the Alerter holding it sends every task's
// messages under, without spreading.
const AlertLease = "@ndigo/alerts"

// An alertState is a message sent, as the trail keeps it in After.
type alertState struct {
	ID    string    `json:"id"`
	Event string    `json:"event"` // late, down, failing, overrun or recovered
	Since time.Time `json:"since"` // when the state began
}

// alertRead is a task's history and pause as a judgement read them.
type alertRead struct {
	runs  []taskstate.Run
	pause taskstate.Pause
}

// NewAlerter returns an Alerter of s's tasks, or an error naming the
// setting that is out of range. It needs a task state store: the trail
// keeps what was sent. It sends nothing until Start.
func NewAlerter(s *Scheduler, cfg AlertConfig) (*Alerter, error) {
	switch {
	case s == nil:
		return nil, errors.New("scheduling: NewAlerter: the Scheduler is nil")
	case s.state == nil:
		return nil, fmt.Errorf("%w: an Alerter keeps what it sent in the trail of the task state", ErrNoState)
	case len(cfg.Notifiers) == 0 || slices.Contains(cfg.Notifiers, nil):
		return nil, errors.New("scheduling: AlertConfig.Notifiers must hold at least one notifier, none nil")
	case cfg.Every < 0:
		return nil, fmt.Errorf("scheduling: AlertConfig.Every %s must not be negative (zero means %s)", cfg.Every, DefaultAlertEvery)
	}
	every := cfg.Every
	if every == 0 {
		every = DefaultAlertEvery
	}
	return &Alerter{s: s, cfg: cfg, every: every, done: make(chan struct{}),
		last: map[string]alertState{}, busy: map[string]bool{}, read: map[string]alertRead{}}, nil
}

// Start judges every task's health now and then every period, until Stop.
// Start the Scheduler first. It returns an error if called twice.
func (a *Alerter) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("scheduling: Alerter.Start called twice")
	}
	a.started = true
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go a.loop(ctx)
	return nil
}

// Stop ends the judgements and cancels the messages in flight, which the
// next sender sends again under the same ID; it releases AlertLease if
// held. It waits for them, or for ctx's end, whose error it returns.
func (a *Alerter) Stop(ctx context.Context) error {
	a.mu.Lock()
	was := a.started && !a.stopped
	a.stopped = true
	a.mu.Unlock()
	if !was {
		return nil
	}
	a.cancel()
	select {
	case <-a.done:
	case <-ctx.Done():
		return fmt.Errorf("scheduling: Alerter.Stop: %w", ctx.Err())
	}
	if a.lease != nil {
		_ = a.lease.Release(ctx)
	}
	return nil
}

func (a *Alerter) loop(ctx context.Context) {
	defer close(a.done)
	defer a.wg.Wait()
	tick := a.s.clock.NewTicker(a.every)
	defer tick.Stop()
	for {
		a.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}

// tick reads the trail, keeps what it lacks, and judges each task this
// node sends for. The reads of the store are bounded by half the period:
// once one fails, the tick judges from what was last read.
func (a *Alerter) tick(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, a.every/2)
	defer cancel()
	storeUp := a.tail(rctx) == nil
	if storeUp {
		a.keep(rctx)
	}
	leader := a.s.spread != nil || a.holdsLease(rctx)
	for _, e := range a.s.entriesNow() {
		if ctx.Err() != nil {
			return
		}
		if !leader || !a.sends(e) {
			continue
		}
		a.mu.Lock()
		busy, prev := a.busy[e.name], a.last[e.name]
		a.mu.Unlock()
		if busy {
			continue
		}
		var h TaskHealth
		var runs []taskstate.Run
		h, runs, storeUp = a.judge(rctx, e, storeUp)
		if m, st, ok := a.change(e.name, prev, h, runs); ok {
			a.mu.Lock()
			a.busy[e.name] = true
			a.mu.Unlock()
			a.wg.Add(1)
			go a.send(ctx, e.name, prev, m, st)
		}
	}
}

// entriesNow returns the scheduler's tasks.
func (s *Scheduler) entriesNow() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// sends reports whether this node sends e's messages: with spreading, the
// owner of its lock (or name) in this node's view, none before the first;
// without, every task's, once holdsLease said so.
func (a *Alerter) sends(e *entry) bool {
	if a.s.spread == nil {
		return true
	}
	key := e.spec.Lock
	if key == "" {
		key = "@alerts/" + e.name
	}
	return a.s.ownerNow(key) == a.s.node
}

// holdsLease takes or extends AlertLease, and reports whether this node
// holds it. Without a driver, this node is the only one.
func (a *Alerter) holdsLease(ctx context.Context) bool {
	if a.s.driver == nil {
		return true
	}
	ttl := 3 * a.every
	if a.lease != nil {
		select {
		case <-a.lease.Done():
			a.lease = nil
		default:
			if err := a.lease.Extend(ctx, ttl); err == nil {
				return true
			} else if errors.Is(err, locks.ErrLeaseLost) {
				a.lease = nil
			} else {
				return true // not known lost: its local expiry says
			}
		}
	}
	l, err := a.s.driver.Acquire(ctx, AlertLease, ttl)
	if err != nil {
		return false
	}
	a.lease = l
	return true
}

// tail reads the trail's entries after the newest read, and keeps the
// messages among them.
func (a *Alerter) tail(ctx context.Context) error {
	for {
		a.mu.Lock()
		after := a.seq
		a.mu.Unlock()
		evs, err := a.s.state.Events(ctx, after, MaxEvents)
		if err != nil {
			return err
		}
		a.mu.Lock()
		for _, ev := range evs {
			a.seq = max(a.seq, ev.Seq)
			if ev.Action != ActionNotify && ev.Action != ActionNotifyFailed {
				continue
			}
			var st alertState
			if json.Unmarshal([]byte(ev.After), &st) == nil && st.ID != "" && !a.unkeptOf(ev.Target) {
				a.last[ev.Target] = st // this node's newer message, not kept yet, stays
			}
		}
		a.mu.Unlock()
		if len(evs) < MaxEvents {
			return nil
		}
	}
}

// unkeptOf reports whether a message about task waits to be kept. a.mu is
// held.
func (a *Alerter) unkeptOf(task string) bool {
	return slices.ContainsFunc(a.unkept, func(ev taskstate.Event) bool { return ev.Target == task })
}

// keep appends the messages sent that the trail does not keep yet, oldest
// first, until one fails.
func (a *Alerter) keep(ctx context.Context) {
	a.keeping.Lock()
	defer a.keeping.Unlock()
	for {
		a.mu.Lock()
		if len(a.unkept) == 0 {
			a.mu.Unlock()
			return
		}
		ev := a.unkept[0] // only keep removes, under keeping
		a.mu.Unlock()
		if _, err := a.s.state.AppendEvent(ctx, ev); err != nil {
			return
		}
		a.mu.Lock()
		a.unkept = a.unkept[1:]
		a.mu.Unlock()
	}
}

// judge returns e's health, the history it judged from, and whether the
// store answered: read from the store while it answers; else from the
// history last read and this node's records that the store does not hold
// yet.
func (a *Alerter) judge(ctx context.Context, e *entry, storeUp bool) (TaskHealth, []taskstate.Run, bool) {
	if storeUp {
		pause, err := a.s.state.Paused(ctx, e.name)
		var runs []taskstate.Run
		if err == nil {
			runs, err = a.s.state.Runs(ctx, e.name, 0)
		}
		if err == nil {
			a.mu.Lock()
			a.read[e.name] = alertRead{runs: runs, pause: pause}
			a.mu.Unlock()
			return a.s.health(e, runs, pause), runs, true
		}
	}
	a.mu.Lock()
	r := a.read[e.name]
	a.mu.Unlock()
	runs := append(a.s.unstored(e.name), r.runs...)
	return a.s.health(e, runs, r.pause), runs, false
}

// unstored returns this node's records of task that the store does not
// hold yet, newest first.
func (s *Scheduler) unstored(task string) []taskstate.Run {
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	var out []taskstate.Run
	for i := len(s.records.pending) - 1; i >= 0; i-- {
		if r := s.records.pending[i]; r.Task == task {
			out = append(out, r.Run)
		}
	}
	return out
}

// change returns the message that h, judged from runs, makes after prev,
// the task's newest message (zero if none), if it makes one. A recovery is
// dated by the first run that started after the state began, as every
// node reads it: the first that succeeded.
func (a *Alerter) change(task string, prev alertState, h TaskHealth, runs []taskstate.Run) (notify.Message, alertState, bool) {
	var st alertState
	switch h.State {
	case HealthLate, HealthDown, HealthFailing, HealthOverrun:
		if prev.Event == string(h.State) {
			return notify.Message{}, st, false
		}
		st = alertState{ID: alertID(task, string(h.State), h.Since), Event: string(h.State), Since: h.Since}
	case HealthOK:
		if prev.Event == "" || prev.Event == "recovered" {
			return notify.Message{}, st, false
		}
		st = alertState{ID: alertID(task, "recovered", prev.Since, prev.Event), Event: "recovered", Since: a.s.clock.Now().UTC()}
		for _, r := range runs {
			if !r.Manual && r.Outcome == string(OutcomeOK) && r.Start.After(prev.Since) && r.Start.Before(st.Since) {
				st.Since = r.Start.UTC()
			}
		}
		h.Reason = "ok again after " + prev.Event
	default: // paused, completed, unknown: nothing to say
		return notify.Message{}, st, false
	}
	return notify.Message{ID: st.ID, Task: task, Event: st.Event, At: st.Since, Detail: h.Reason, Node: a.s.node}, st, true
}

// alertID is the idempotency key of a message of task about state since:
// the same on every node that judges it from the same history.
func alertID(task, state string, since time.Time, more ...string) string {
	h := sha256.New()
	for _, p := range append([]string{task, state, since.UTC().Format(time.RFC3339Nano)}, more...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "ndigo-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// send delivers m through every notifier and records it: in this node's
// memory at once, in the trail now or at a later tick. A message that ctx's
// end cut short is not recorded: the next sender sends it again.
func (a *Alerter) send(ctx context.Context, task string, prev alertState, m notify.Message, st alertState) {
	defer a.wg.Done()
	var failed []string
	for _, n := range a.cfg.Notifiers {
		if err := notify.Deliver(ctx, n, m, a.cfg.Retry); err != nil {
			if ctx.Err() != nil {
				break
			}
			failed = append(failed, err.Error())
			a.s.log.Error("ndigo: notification not delivered", "task", task, "event", m.Event, "id", m.ID, "err", err)
		}
	}
	if ctx.Err() != nil {
		a.mu.Lock()
		a.busy[task] = false
		a.mu.Unlock()
		return
	}
	ev := taskstate.Event{Key: m.ID, At: a.s.clock.Now().UTC(), Node: a.s.node, Actor: "ndigo", Action: ActionNotify, Target: task,
		Note: m.Event + ": " + m.Detail}
	if len(failed) > 0 {
		ev.Action, ev.Note = ActionNotifyFailed, m.Event+": not delivered: "+strings.Join(failed, "; ")
	}
	if len(ev.Note) > taskstate.MaxNoteLen {
		ev.Note = strings.ToValidUTF8(ev.Note[:taskstate.MaxNoteLen], "")
	}
	ev.After, _ = jsonOf(st)
	if prev.ID != "" {
		ev.Before, _ = jsonOf(prev)
	}
	a.mu.Lock()
	a.last[task] = st
	a.unkept = append(a.unkept, ev)
	a.busy[task] = false
	a.mu.Unlock()
	a.s.log.Info("ndigo: notification sent", "task", task, "event", m.Event, "id", m.ID, "failed", len(failed))
	rctx, cancel := context.WithTimeout(ctx, a.every/2)
	defer cancel()
	a.keep(rctx)
}
