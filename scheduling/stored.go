package scheduling

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// Errors of the stored schedules' calls.
var (
	// ErrUnknownHandler reports a stored schedule naming a handler that
	// this node has not registered ([Scheduler.Handle]).
	ErrUnknownHandler = errors.New("scheduling: unknown handler")
	// ErrDeclaredInCode reports a stored schedule's call on the name of a
	// task declared in code, which only a deploy changes.
	ErrDeclaredInCode = errors.New("scheduling: the task is declared in code")
	// ErrUnknownSchedule reports a stored schedule's call on a name that no
	// stored schedule has.
	ErrUnknownSchedule = errors.New("scheduling: unknown schedule")
)

// A HandlerFunc runs the fires of the stored schedules that name it: args
// is the schedule's Args (nil for none), ctx the run's, as a task's.
type HandlerFunc func(ctx context.Context, args json.RawMessage) error

// A ScheduleInfo is a stored schedule as this node sees it.
type ScheduleInfo struct {
	taskstate.Schedule
	// Problem is why this node does not run the schedule: its handler is
	// not registered here (a node of an older build, in a rolling deploy),
	// its name is a task's declared in code here, or it breaks a rule of
	// this node's (its validation error); "" when this node runs it.
	Problem string
}

// storedView is what a scheduler knows of one stored schedule: the schedule
// as it read it, its encoding, and why it does not run it.
type storedView struct {
	sc      taskstate.Schedule
	enc     []byte
	problem string
}

// schedules is a scheduler's view of the stored schedules.
type schedules struct {
	// read serializes the reads and their application: a one-slot
	// semaphore rather than a sync.Mutex, held across a store call, so
	// that in a testing/synctest bubble (the cluster simulation) a poll
	// waiting for another's read counts as durably blocked and fake time
	// goes on; behind a mutex it would not, and the bubble would hang.
	read chan struct{}
	// Guarded by Scheduler.mu.
	handlers map[string]HandlerFunc
	views    map[string]*storedView // by name
	list     []taskstate.Schedule   // as the last read returned them
	gen      int64                  // the generation that list was read at
	fresh    bool                   // list was read at gen
	polled   bool                   // a poll read them since Start: the catch-ups are done
	// gone are the names of the stored schedules this node saw deleted:
	// a running backfill of one, which no node drove to the delete, is
	// cancelled at a poll (polledBackfills).
	gone map[string]bool
}

// Handle registers fn as the handler named name: the stored schedules that
// name it run on this node, each fire calling fn with the schedule's
// arguments. Register the same handlers on every node that should run
// them; a node without a schedule's handler leaves it to the others and
// lists it with its problem ([Scheduler.Schedules]). A name is 1 to
// [taskstate.MaxScheduleNameLen] printable bytes, registered once.
// Handlers may be registered before or after Start (before, for the node's
// first poll to catch up the missed fires of the schedules that name them,
// as Start does for tasks declared in code: [CatchUp]); the package's
// [Handler] registers one through fx, before Start.
func (s *Scheduler) Handle(name string, fn HandlerFunc) error {
	if err := taskstate.CheckSchedule(taskstate.Schedule{Name: "x", Handler: name, Cron: "x"}); err != nil {
		return fmt.Errorf("scheduling: Handle: %w", err)
	}
	if fn == nil {
		return fmt.Errorf("scheduling: Handle %q: fn must not be nil", name)
	}
	if name == calendarKind {
		return fmt.Errorf("scheduling: Handle %q: the name is reserved for the calendars kept with the stored schedules", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored.handlers == nil {
		s.stored.handlers = map[string]HandlerFunc{}
	}
	if _, ok := s.stored.handlers[name]; ok {
		return fmt.Errorf("scheduling: Handle %q: a handler of that name is registered", name)
	}
	s.stored.handlers[name] = fn
	s.applySchedules(s.stored.list) // the schedules that waited for it
	return nil
}

// CreateSchedule stores sc: a task that every node with its handler runs
// from its next fire, as if declared in code with sc's cron expression,
// lock and options (keys as the Scheduled tag's: "lockTtl", "overlap", ...;
// [OptionKeys]), each run calling the handler with sc.Args. This node
// applies it at once, the others at their next poll ([Config.RequestPoll]).
// It is validated here as [Scheduler.Add] validates a task, and refused
// with the same *ValidationError; a handler this node lacks is an error
// wrapping ErrUnknownHandler, the name of a task declared in code one
// wrapping ErrDeclaredInCode, a name already stored one wrapping
// taskstate.ErrScheduleExists. Node and Updated are set here.
func (s *Scheduler) CreateSchedule(ctx context.Context, sc taskstate.Schedule, opts ...ControlOption) error {
	return s.putSchedule(ctx, sc, true, opts)
}

// UpdateSchedule replaces the stored schedule of sc's name, as
// CreateSchedule stores one: every node runs the new spec from its next
// fire, and a run of the old one in flight goes on (the new spec's fires
// wait for it as for any run of the task: its overlap policy and lock
// decide). A name that no stored schedule has is an error wrapping
// ErrUnknownSchedule.
func (s *Scheduler) UpdateSchedule(ctx context.Context, sc taskstate.Schedule, opts ...ControlOption) error {
	return s.putSchedule(ctx, sc, false, opts)
}

func (s *Scheduler) putSchedule(ctx context.Context, sc taskstate.Schedule, create bool, opts []ControlOption) error {
	if s.state == nil {
		return fmt.Errorf("%w: schedule %q cannot be stored: give the scheduler a taskstate.Store (Config.State)", ErrNoState, sc.Name)
	}
	action := "update-schedule"
	if create {
		action = "create-schedule"
	}
	ev, err := s.event(ctx, opts, action, sc.Name)
	if err != nil {
		return err
	}
	sc.Node, sc.Updated = s.node, s.clock.Now().UTC()
	if err := taskstate.CheckSchedule(sc); err != nil {
		return err
	}
	if strings.HasPrefix(sc.Name, calendarPrefix) {
		return fmt.Errorf("%w: schedule name %q must not start with %q, which names the calendars kept with the schedules", taskstate.ErrInvalid, sc.Name, calendarPrefix)
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("scheduling: reading the stored schedules: %w", err)
	}
	s.mu.Lock()
	_, _, err = s.scheduleTask(sc)
	if err == nil {
		// Checked against the calendars just read: those of the last
		// poll may miss one created since.
		var v calendarView
		v.apply(scs)
		if _, cerr := v.at(calendarNames(sc.Options["calendar"]), sc.Updated); cerr != nil {
			err = fmt.Errorf("%w: schedule %q: option calendar %q: %v", ErrUnknownCalendar, sc.Name, sc.Options["calendar"], cerr)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.act(ctx, ev, scheduleValue(scs, sc.Name), specOf(sc), func(kept taskstate.Event, again bool) error {
		if again {
			if done, err := s.docDone(ctx, sc.Name, sc.Name, kept, scheduleValue); done || err != nil {
				return err
			}
		}
		err := s.storeDoc(ctx, sc, scs, create)
		if errors.Is(err, ErrUnknownSchedule) {
			err = fmt.Errorf("%w: %q: create it first", ErrUnknownSchedule, sc.Name)
		}
		return err
	})
}

// docDone reports whether the change of the stored document doc (a
// schedule's or a calendar's, named name) that the trail kept as kept is
// done, for a client that sends it again: the document is what the change
// made (as value gives it, nil if none), or it changed after the change
// was kept (another change since).
func (s *Scheduler) docDone(ctx context.Context, doc, name string, kept taskstate.Event, value func([]taskstate.Schedule, string) any) (bool, error) {
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return false, fmt.Errorf("scheduling: reading the stored schedules: %w", err)
	}
	cur, err := jsonOf(value(scs, name))
	if err != nil || cur == kept.After {
		return err == nil, err
	}
	i := slices.IndexFunc(scs, func(sc taskstate.Schedule) bool { return sc.Name == doc })
	return i >= 0 && scs[i].Updated.After(kept.At), nil
}

// specOf is what the trail keeps of a stored schedule: its spec and args.
func specOf(sc taskstate.Schedule) any {
	return struct {
		Handler string            `json:"handler"`
		Cron    string            `json:"cron"`
		Lock    string            `json:"lock,omitempty"`
		Options map[string]string `json:"options,omitempty"`
		Args    json.RawMessage   `json:"args,omitempty"`
	}{sc.Handler, sc.Cron, sc.Lock, sc.Options, sc.Args}
}

// scheduleValue is what the trail keeps of the stored schedule named name
// among scs, nil if none.
func scheduleValue(scs []taskstate.Schedule, name string) any {
	if i := slices.IndexFunc(scs, func(sc taskstate.Schedule) bool { return sc.Name == name }); i >= 0 {
		return specOf(scs[i])
	}
	return nil
}

// storeDoc creates or updates sc, a stored schedule's or a calendar's
// document, in the task state, scs being the stored documents as read
// before, and applies the change on this node. An update comes in force at
// an instant stored with it, late enough for every node to have read it:
// until then every node runs the old one, from then on the new one, so
// that no fire is one spec's on a node and the other's on another. sc's
// Node and Updated are set; From and Replaced are set here. A create of a
// name stored is an error wrapping taskstate.ErrScheduleExists, an update
// of a name not stored one wrapping ErrUnknownSchedule.
func (s *Scheduler) storeDoc(ctx context.Context, sc taskstate.Schedule, scs []taskstate.Schedule, create bool) error {
	sc.From, sc.Replaced = sc.Updated, nil
	if !create {
		if i := slices.IndexFunc(scs, func(o taskstate.Schedule) bool { return o.Name == sc.Name }); i >= 0 {
			sc.From = sc.Updated.Add(s.changeLead())
			sc.Replaced = replaced(scs[i], sc.From)
			// The replaced specs keep their arguments: the oldest go first
			// when they would take the schedule past taskstate.MaxScheduleLen.
			for len(sc.Replaced) > 1 {
				if _, err := taskstate.EncodeSchedule(sc); err == nil {
					break
				}
				sc.Replaced = sc.Replaced[:len(sc.Replaced)-1]
			}
		}
	}
	var err error
	if create {
		err = s.state.CreateSchedule(ctx, sc)
	} else if err = s.state.UpdateSchedule(ctx, sc); errors.Is(err, taskstate.ErrNoSchedule) {
		err = fmt.Errorf("%w: %q", ErrUnknownSchedule, sc.Name)
	}
	if err != nil {
		return err
	}
	return s.readSchedules(ctx, -1)
}

// changeLead is how long after an update its spec comes in force: two of
// this node's polls, by which every node polling as often has read it.
func (s *Scheduler) changeLead() time.Duration { return 2 * s.poll }

// replaced returns the specs that an update of old, in force from from,
// replaces, newest first: old's own, then those old replaced, less those
// that left force more than AuditWindow before from, at most
// taskstate.MaxReplaced.
func replaced(old taskstate.Schedule, from time.Time) []taskstate.PastSpec {
	out := []taskstate.PastSpec{{Cron: old.Cron, Lock: old.Lock, Options: old.Options, From: old.From, Handler: old.Handler, Args: old.Args}}
	end := old.From // when the next spec in the list left force
	for _, p := range old.Replaced {
		if len(out) == taskstate.MaxReplaced || (!end.IsZero() && end.Before(from.Add(-AuditWindow))) {
			break
		}
		out = append(out, p)
		end = p.From
	}
	return out
}

// DeleteSchedule deletes the stored schedule named name: no node fires it
// from its next poll (this node at once), and a run of it in flight
// finishes. Its history and paused flag stay with its name. A name that no
// stored schedule has is an error wrapping ErrUnknownSchedule; a task
// declared in code, one wrapping ErrDeclaredInCode.
func (s *Scheduler) DeleteSchedule(ctx context.Context, name string, opts ...ControlOption) error {
	if s.state == nil {
		return fmt.Errorf("%w: schedule %q cannot be deleted: give the scheduler a taskstate.Store (Config.State)", ErrNoState, name)
	}
	ev, err := s.event(ctx, opts, "delete-schedule", name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	e := s.byName[name]
	s.mu.Unlock()
	if e != nil && e.stored == nil {
		return fmt.Errorf("%w: task %q cannot be deleted at runtime: remove it from the code and deploy", ErrDeclaredInCode, name)
	}
	if strings.HasPrefix(name, calendarPrefix) {
		return fmt.Errorf("%w: %q names a calendar's document, not a schedule: delete the calendar (DeleteCalendar)", ErrUnknownSchedule, name)
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("scheduling: reading the stored schedules: %w", err)
	}
	return s.act(ctx, ev, scheduleValue(scs, name), nil, func(kept taskstate.Event, again bool) error {
		ok, err := s.state.DeleteSchedule(ctx, name)
		switch {
		case err != nil:
			return err
		case !ok && !again: // sent again, it was deleted the first time, or since
			return fmt.Errorf("%w: %q", ErrUnknownSchedule, name)
		}
		return s.readSchedules(ctx, -1)
	})
}

// Schedules returns the stored schedules, read from the task state, ordered
// by name, each with the reason this node does not run it, if any.
func (s *Scheduler) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	if s.state == nil {
		return nil, fmt.Errorf("%w: no schedules are stored", ErrNoState)
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ScheduleInfo, 0, len(scs))
	for _, sc := range scs {
		if !isCalendarDoc(sc) {
			out = append(out, ScheduleInfo{Schedule: sc, Problem: s.problemOf(sc)})
		}
	}
	return out, nil
}

// problemOf returns why this node does not run sc, "" if it does. s.mu is
// held.
func (s *Scheduler) problemOf(sc taskstate.Schedule) string {
	if _, _, err := s.scheduleTask(sc); err != nil {
		return err.Error()
	}
	if _, err := s.cals.at(calendarNames(sc.Options["calendar"]), s.clock.Now()); err != nil {
		return fmt.Errorf("%w: option calendar %q: %v", ErrUnknownCalendar, sc.Options["calendar"], err).Error()
	}
	return ""
}

// scheduleTask returns the task that sc declares, run by its handler, and
// its schedule, validated as Add validates tasks against the others (the
// entry of sc's name that it would replace aside). s.mu is held.
func (s *Scheduler) scheduleTask(sc taskstate.Schedule) (Task, schedule, error) {
	old := s.byName[sc.Name]
	switch h := s.stored.handlers[sc.Handler]; {
	case old != nil && old.stored == nil:
		return Task{}, nil, fmt.Errorf("%w on this node: schedule %q has the name of a task declared in code; choose another name", ErrDeclaredInCode, sc.Name)
	case h == nil:
		return Task{}, nil, fmt.Errorf("%w: schedule %q names handler %q, which this node has not registered (Scheduler.Handle)", ErrUnknownHandler, sc.Name, sc.Handler)
	}
	h, args := s.stored.handlers[sc.Handler], sc.Args
	t := NewTask(func(ctx context.Context) error { return h(ctx, args) }, scheduleOptions(sc.Name, sc.Cron, sc.Lock, sc.Options)...)
	t.typ, t.method = "", ""
	taken, rules := s.taken(""), s.lockRules()
	if old != nil {
		taken = s.taken(old.name)
		if u, ok := rules.locked[old.spec.Lock]; ok && u.task == old.name {
			delete(rules.locked, old.spec.Lock)
		}
	}
	cache := newParseCache(s.loc, 1)
	if err := validateTasks([]Task{t}, taken, rules, cache); err != nil {
		return Task{}, nil, err
	}
	sched, _ := cache.taskSchedule(t) // validated above
	return t, sched, nil
}

// scheduleOptions are the options of a stored schedule's spec.
func scheduleOptions(name, cron, lock string, options map[string]string) []Option {
	opts := []Option{Cron(cron), Name(name)}
	if lock != "" {
		opts = append(opts, Lock(lock))
	}
	for _, k := range slices.Sorted(maps.Keys(options)) {
		switch v := options[k]; k {
		case "cron", "lock", "name":
			opts = append(opts, invalid(k, v, "is a field of the schedule, not one of its options"))
		default:
			opts = append(opts, KeyOption(k, v))
		}
	}
	return opts
}

// insertReplaced inserts, for a node that first reads sc after an update
// (it started, or its handler was registered, meanwhile), an entry of each
// spec sc replaced, oldest first, each the prior of the next, and returns
// the newest, nil if none: the newest runs its fires before sc's From if
// that is to come, as every other node does, and each runs the fires of
// its instants that run later (inForce), with its own handler and
// arguments. A spec this node cannot run is left out.
// s.mu is held.
func (s *Scheduler) insertReplaced(sc taskstate.Schedule, now time.Time) *entry {
	var prev *entry
	for i := len(sc.Replaced) - 1; i >= 0; i-- {
		p := sc.Replaced[i]
		old := taskstate.Schedule{Name: sc.Name, Handler: cmp.Or(p.Handler, sc.Handler), Cron: p.Cron, Lock: p.Lock, Options: p.Options,
			Args: p.Args, Node: sc.Node, Updated: sc.Updated, From: p.From}
		if p.Handler == "" && len(p.Args) == 0 { // stored by an earlier version
			old.Args = sc.Args
		}
		t, sched, err := s.scheduleTask(old)
		if err != nil {
			continue
		}
		e := s.insert(t, sched, nil, now, prev, p.From)
		e.stored = &old
		var pg *gate
		if prev != nil {
			pg = prev.gate
		}
		// Its fires hold the lock of the spec before it, as on the nodes
		// that read it in force.
		e.gate = newGate(&taskstate.Schedule{From: p.From, Replaced: sc.Replaced[i+1:]}, e, s.changeLead(), pg)
		prev = e
	}
	return prev
}

// readSchedules reads the stored schedules and applies them; gen is the
// generation that a poll read before (the caller is counted in flight, as a
// poll is), -1 after a change of this node's (the next poll reads them
// again).
func (s *Scheduler) readSchedules(ctx context.Context, gen int64) error {
	s.stored.read <- struct{}{}
	defer func() { <-s.stored.read }()
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("scheduling: reading the stored schedules: %w", err)
	}
	s.mu.Lock()
	s.cals.apply(scs) // before the schedules, which name them
	scs = slices.DeleteFunc(scs, isCalendarDoc)
	s.stored.list, s.stored.gen, s.stored.fresh = scs, gen, gen >= 0
	added := s.applySchedules(scs)
	// A node's first poll after Start catches up the stored schedules'
	// missed fires, as Start does the tasks declared in code.
	var missed []firing
	if gen >= 0 && !s.stored.polled && s.status == started {
		s.stored.polled = true
		missed = s.catchUps(s.clock.Now(), added)
	}
	s.mu.Unlock()
	if len(missed) > 0 && !s.stopping() {
		s.dispatch(missed)
	}
	return nil
}

// stale reports whether a poll that read generation gen must read the
// stored schedules again.
func (s *Scheduler) staleSchedules(gen int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.stored.fresh || s.stored.gen != gen
}

// applySchedules makes this node's registry run scs: a new schedule is
// added, a changed one replaces its entry (a run of the old in flight goes
// on), a deleted one leaves, and one this node cannot run leaves too and is
// logged once with its problem. It returns the entries it added (not those
// that replaced one). s.mu is held.
func (s *Scheduler) applySchedules(scs []taskstate.Schedule) (added []*entry) {
	if s.stored.views == nil {
		s.stored.views = map[string]*storedView{}
	}
	now := s.clock.Now()
	dirty := false
	seen := make(map[string]bool, len(scs))
	for _, sc := range scs {
		seen[sc.Name] = true
		enc, _ := taskstate.EncodeSchedule(sc)
		v := s.stored.views[sc.Name]
		e := s.byName[sc.Name]
		if v != nil && v.problem == "" && bytes.Equal(v.enc, enc) && e != nil && e.stored != nil {
			continue // running as it is
		}
		problem := ""
		dirty = true
		t, sched, err := s.scheduleTask(sc)
		if err == nil {
			if _, cerr := s.cals.at(calendarNames(sc.Options["calendar"]), now); cerr != nil {
				err = fmt.Errorf("%w: option calendar %q: %v", ErrUnknownCalendar, sc.Options["calendar"], cerr)
			}
		}
		if err != nil {
			problem = err.Error()
			if e != nil && e.stored != nil {
				s.remove(e)
			}
		} else {
			var old *entry
			if e != nil && e.stored != nil {
				old = e
			}
			if old == nil {
				old = s.insertReplaced(sc, now)
			}
			ne := s.insert(t, sched, nil, now, old, sc.From)
			ne.stored = &sc
			var prev *gate
			if old != nil {
				prev = old.gate
			}
			ne.gate = newGate(&sc, ne, s.changeLead(), prev)
			if e == nil || e.stored == nil {
				added = append(added, ne)
				delete(s.stored.gone, sc.Name) // created again: the map keeps only the deleted names
			}
			if v == nil || !bytes.Equal(v.enc, enc) {
				s.log.Info("stored schedule applied", "task", sc.Name, "handler", sc.Handler, "cron", sc.Cron, "next", ne.next)
				s.warnShortHistories([]*entry{ne}, now)
			}
		}
		if problem != "" && (v == nil || v.problem != problem) {
			s.log.Warn("stored schedule not run on this node", "task", sc.Name, "handler", sc.Handler, "problem", problem)
		}
		s.stored.views[sc.Name] = &storedView{sc: sc, enc: enc, problem: problem}
	}
	for name := range s.stored.views {
		if seen[name] {
			continue
		}
		if e := s.byName[name]; e != nil && e.stored != nil {
			s.remove(e)
			dirty = true
			s.log.Info("stored schedule deleted", "task", name)
			if s.stored.gone == nil {
				s.stored.gone = map[string]bool{}
			}
			s.stored.gone[name] = true
		}
		delete(s.stored.views, name)
	}
	if dirty {
		s.changed(now)
	}
	return added
}
