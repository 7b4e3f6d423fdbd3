package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// Errors of the calendars' calls.
var (
	// ErrUnknownCalendar reports a calendar that is not defined: named by a
	// task, included by a calendar, or updated or deleted.
	ErrUnknownCalendar = errors.New("scheduling: unknown calendar")
	// ErrCalendarExists reports a CreateCalendar of a name that a calendar
	// has.
	ErrCalendarExists = errors.New("scheduling: a calendar of that name exists")
	// ErrCalendarInUse reports a DeleteCalendar of a calendar that a task
	// or another calendar names.
	ErrCalendarInUse = errors.New("scheduling: the calendar is in use")
)

// A calendar is kept in the task state as a stored schedule of a kind of
// its own: the name calendarPrefix and the calendar's, the handler and the
// expression calendarKind, the rules and the note as its arguments. So
// calendars share the schedules' calls, generation and read, and every
// store's conformance suite covers them with the schedules'; an update's
// From and Replaced say which rules are in force at each instant, as they
// say a schedule's spec.
const (
	calendarKind   = "@calendar"
	calendarPrefix = "@calendar:"
)

// calendarBody is what a calendar's document keeps as its arguments.
type calendarBody struct {
	taskstate.CalendarRules
	Note string `json:"note,omitempty"`
}

// isCalendarDoc reports whether sc is a calendar's document.
func isCalendarDoc(sc taskstate.Schedule) bool {
	return sc.Handler == calendarKind && strings.HasPrefix(sc.Name, calendarPrefix)
}

// calendarDoc returns the document that keeps c.
func calendarDoc(c taskstate.Calendar) (taskstate.Schedule, error) {
	args, err := json.Marshal(calendarBody{c.CalendarRules, c.Note})
	if err != nil {
		return taskstate.Schedule{}, fmt.Errorf("%w: calendar %q: %v", taskstate.ErrInvalid, c.Name, err)
	}
	if len(args) > taskstate.MaxScheduleArgsLen {
		return taskstate.Schedule{}, fmt.Errorf("%w: calendar %q encodes to %d bytes of rules and note, over %d (taskstate.MaxScheduleArgsLen)",
			taskstate.ErrInvalid, c.Name, len(args), taskstate.MaxScheduleArgsLen)
	}
	return taskstate.Schedule{Name: calendarPrefix + c.Name, Handler: calendarKind, Cron: calendarKind, Args: args,
		Node: c.Node, Updated: c.Updated}, nil
}

// docCalendar returns the calendar that sc keeps.
func docCalendar(sc taskstate.Schedule) (taskstate.Calendar, error) {
	c := taskstate.Calendar{Name: strings.TrimPrefix(sc.Name, calendarPrefix), Node: sc.Node, Updated: sc.Updated}
	var b calendarBody
	if err := json.Unmarshal(sc.Args, &b); err != nil {
		return c, fmt.Errorf("calendar %q does not decode: %w", c.Name, err)
	}
	c.CalendarRules, c.Note = b.CalendarRules, b.Note
	return c, nil
}

// A CalendarInfo is a calendar as this node sees it.
type CalendarInfo struct {
	taskstate.Calendar
	// From is when these rules came, or come, in force: a fire before it
	// is judged by the rules they replaced.
	From time.Time `json:"from,omitzero"`
	// UsedBy names the tasks (this node's, and the stored schedules) and
	// the calendars that name it.
	UsedBy []string `json:"usedBy,omitempty"`
	// Problem is why this node cannot apply it (rules it does not read,
	// from a node of a later version); "" when it applies it.
	Problem string `json:"problem,omitempty"`
}

// A compiledCalendar is a calendar's rules, compiled, and the calendars it
// includes.
type compiledCalendar struct {
	rules   *calendarRules
	include []string
}

// calendarView is what a scheduler knows of the calendars: their documents
// as the last read returned them, and the rules it compiled. Guarded by
// Scheduler.mu.
type calendarView struct {
	docs     map[string]taskstate.Schedule // by calendar name
	compiled map[string]compiledCalendar   // by the body they were compiled from
	warned   map[string]bool               // calendar problems logged once, by text
}

// CreateCalendar stores c, a calendar that tasks name to skip the fires it
// excludes ([Calendar]); every node applies it at its next poll, this one at
// once. Its rules are validated, with errors naming the field, the value and
// the rule; an Include of a calendar that is not defined is an error
// wrapping ErrUnknownCalendar, a name already defined one wrapping
// ErrCalendarExists. Node and Updated are set here. Calendars may be created
// before Start, so that the tasks that name them start.
func (s *Scheduler) CreateCalendar(ctx context.Context, c taskstate.Calendar, opts ...ControlOption) error {
	return s.putCalendar(ctx, c, true, opts)
}

// UpdateCalendar replaces the rules and note of the calendar of c's name,
// as CreateCalendar stores them. The new rules judge the fires from an
// instant every node agrees on, a little after the call (as an update of a
// stored schedule applies, so that every node has read it by then); the
// fires before it keep the rules they had. A name that no calendar has is
// an error wrapping ErrUnknownCalendar.
func (s *Scheduler) UpdateCalendar(ctx context.Context, c taskstate.Calendar, opts ...ControlOption) error {
	return s.putCalendar(ctx, c, false, opts)
}

func (s *Scheduler) putCalendar(ctx context.Context, c taskstate.Calendar, create bool, opts []ControlOption) error {
	if s.state == nil {
		return fmt.Errorf("%w: calendar %q cannot be stored: give the scheduler a taskstate.Store (Config.State)", ErrNoState, c.Name)
	}
	action := "update-calendar"
	if create {
		action = "create-calendar"
	}
	ev, err := s.event(ctx, opts, action, c.Name)
	if err != nil {
		return err
	}
	c.Node, c.Updated = s.node, s.clock.Now().UTC()
	if err := taskstate.CheckCalendar(c); err != nil {
		return err
	}
	if _, err := compileCalendar(c); err != nil {
		return fmt.Errorf("%w: %v", taskstate.ErrInvalid, err)
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("scheduling: reading the calendars: %w", err)
	}
	defined := map[string]bool{c.Name: true}
	for _, sc := range scs {
		if isCalendarDoc(sc) {
			defined[strings.TrimPrefix(sc.Name, calendarPrefix)] = true
		}
	}
	for i, inc := range c.Include {
		if !defined[inc] {
			return fmt.Errorf("%w: calendar %q: include[%d] %q is not defined; create it first", ErrUnknownCalendar, c.Name, i, inc)
		}
	}
	doc, err := calendarDoc(c)
	if err != nil {
		return err
	}
	return s.act(ctx, ev, calendarValue(scs, c.Name), rulesOf(c), func(kept taskstate.Event, again bool) error {
		if again {
			if done, err := s.docDone(ctx, calendarPrefix+c.Name, c.Name, kept, calendarValue); done || err != nil {
				return err
			}
		}
		err := s.storeDoc(ctx, doc, scs, create)
		switch {
		case errors.Is(err, taskstate.ErrScheduleExists):
			return fmt.Errorf("%w: %q: update it instead", ErrCalendarExists, c.Name)
		case errors.Is(err, ErrUnknownSchedule):
			return fmt.Errorf("%w: %q: create it first", ErrUnknownCalendar, c.Name)
		}
		return err
	})
}

// rulesOf is what the trail keeps of a calendar: its rules and note.
func rulesOf(c taskstate.Calendar) any {
	return struct {
		taskstate.CalendarRules
		Note string `json:"note,omitempty"`
	}{c.CalendarRules, c.Note}
}

// calendarValue is what the trail keeps of the calendar named name among
// the stored documents scs, nil if none (or one this version cannot read).
func calendarValue(scs []taskstate.Schedule, name string) any {
	i := slices.IndexFunc(scs, func(sc taskstate.Schedule) bool { return sc.Name == calendarPrefix+name })
	if i < 0 {
		return nil
	}
	c, err := docCalendar(scs[i])
	if err != nil {
		return nil
	}
	return rulesOf(c)
}

// DeleteCalendar deletes the calendar named name, unless a task (of this
// node, or a stored schedule) or another calendar names it: then it returns
// an error wrapping ErrCalendarInUse that names them. A name that no
// calendar has is an error wrapping ErrUnknownCalendar.
func (s *Scheduler) DeleteCalendar(ctx context.Context, name string, opts ...ControlOption) error {
	if s.state == nil {
		return fmt.Errorf("%w: calendar %q cannot be deleted: give the scheduler a taskstate.Store (Config.State)", ErrNoState, name)
	}
	ev, err := s.event(ctx, opts, "delete-calendar", name)
	if err != nil {
		return err
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("scheduling: reading the calendars: %w", err)
	}
	if users := s.calendarUsers(scs)[name]; len(users) > 0 {
		return fmt.Errorf("%w: calendar %q is named by %s; remove it from them first", ErrCalendarInUse, name, strings.Join(users, ", "))
	}
	return s.act(ctx, ev, calendarValue(scs, name), nil, func(kept taskstate.Event, again bool) error {
		ok, err := s.state.DeleteSchedule(ctx, calendarPrefix+name)
		switch {
		case err != nil:
			return err
		case !ok && !again: // sent again, it was deleted the first time, or since
			return fmt.Errorf("%w: %q", ErrUnknownCalendar, name)
		}
		return s.readSchedules(ctx, -1)
	})
}

// Calendars returns the calendars, read from the task state, ordered by
// name, each with what names it.
func (s *Scheduler) Calendars(ctx context.Context) ([]CalendarInfo, error) {
	if s.state == nil {
		return nil, fmt.Errorf("%w: no calendars are stored", ErrNoState)
	}
	scs, err := s.state.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	users := s.calendarUsers(scs)
	var out []CalendarInfo
	for _, sc := range scs {
		if !isCalendarDoc(sc) {
			continue
		}
		c, err := docCalendar(sc)
		info := CalendarInfo{Calendar: c, From: sc.From, UsedBy: users[c.Name]}
		if err == nil {
			_, err = compileCalendar(c)
		}
		if err != nil {
			info.Problem = err.Error()
		}
		out = append(out, info)
	}
	return out, nil
}

// calendarUsers returns, by calendar name, the tasks and calendars that
// name it: this node's tasks, the stored schedules of scs (whether this
// node runs them or not) and the calendars of scs.
func (s *Scheduler) calendarUsers(scs []taskstate.Schedule) map[string][]string {
	users := map[string][]string{}
	add := func(user string, names []string) {
		for _, n := range names {
			if !slices.Contains(users[n], user) {
				users[n] = append(users[n], user)
			}
		}
	}
	s.mu.Lock()
	for _, e := range s.entries {
		add("task "+e.name, calendarNames(e.spec.Calendars))
	}
	s.mu.Unlock()
	for _, sc := range scs {
		if c, err := docCalendar(sc); isCalendarDoc(sc) && err == nil {
			add("calendar "+c.Name, c.Include)
		} else if !isCalendarDoc(sc) {
			add("task "+sc.Name, calendarNames(sc.Options["calendar"]))
		}
	}
	for _, u := range users {
		slices.Sort(u)
	}
	return users
}

// calendarNames splits a calendar option's value.
func calendarNames(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	names := strings.Split(v, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	return names
}

// apply takes the calendars' documents among docs, a read's.
func (v *calendarView) apply(docs []taskstate.Schedule) {
	if v.docs == nil {
		v.docs, v.compiled, v.warned = map[string]taskstate.Schedule{}, map[string]compiledCalendar{}, map[string]bool{}
	}
	clear(v.docs)
	for _, d := range docs {
		if isCalendarDoc(d) {
			v.docs[strings.TrimPrefix(d.Name, calendarPrefix)] = d
		}
	}
}

// at returns the set of the calendars named, with the rules of each in
// force at instant t (those of an update from its From on, those it
// replaced before), and their includes resolved; an error names a calendar
// that is not defined, or not readable.
func (v *calendarView) at(names []string, t time.Time) (calendarSet, error) {
	known := map[string]*calendarRules{}
	includes := map[string][]string{}
	queue := slices.Clone(names)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, ok := known[name]; ok {
			continue
		}
		d, ok := v.docs[name]
		if !ok {
			continue // resolveCalendars names it
		}
		body := inForceArgs(d, t)
		cc, ok := v.compiled[string(body)]
		if !ok {
			c, err := docCalendar(taskstate.Schedule{Name: d.Name, Args: body})
			if err == nil {
				cc.rules, err = compileCalendar(c)
			}
			if err != nil {
				return nil, fmt.Errorf("calendar %q cannot be read on this node: %v", name, err)
			}
			if len(v.compiled) > 4*len(v.docs)+64 {
				clear(v.compiled) // bodies of calendars updated since
			}
			cc.include = c.Include
			v.compiled[string(body)] = cc
		}
		known[name], includes[name] = cc.rules, cc.include
		queue = append(queue, cc.include...)
	}
	return resolveCalendars(names, known, includes)
}

// inForceArgs returns the arguments of d's spec in force at t: d's own from
// its From on, else those of the newest spec it replaced that was in force
// by t (the oldest it keeps, for an instant before all of them).
func inForceArgs(d taskstate.Schedule, t time.Time) json.RawMessage {
	if d.From.IsZero() || !t.Before(d.From) || len(d.Replaced) == 0 {
		return d.Args
	}
	for _, p := range d.Replaced {
		if p.From.IsZero() || !t.Before(p.From) {
			return p.Args
		}
	}
	return d.Replaced[len(d.Replaced)-1].Args
}

// excludedBy returns the calendar that excludes e's fire at instant t, ""
// if none does. A calendar this node cannot find or read excludes nothing:
// the fire runs, and the problem is logged once.
func (s *Scheduler) excludedBy(e *entry, t time.Time) string {
	names := calendarNames(e.spec.Calendars)
	if len(names) == 0 {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, err := s.cals.at(names, t)
	if err != nil {
		if msg := e.name + ": " + err.Error(); !s.cals.warned[msg] {
			s.cals.warned[msg] = true
			s.log.Warn("a calendar of the task is not defined or not readable here; its fires run", "task", e.name, "err", err)
		}
		return ""
	}
	name, _ := cs.excludedBy(t, e.zone)
	return name
}

// checkCalendars reads the calendars, if a task of this node names one,
// and returns a *ValidationError naming each task declared in code that
// names one not defined: Start fails rather than run fires that a missing
// calendar would have excluded. A stored schedule that names one is not
// run, and listed with its problem ([Scheduler.Schedules]).
func (s *Scheduler) checkCalendars() error {
	s.mu.Lock()
	named := s.state != nil && slices.ContainsFunc(s.entries, func(e *entry) bool { return e.spec.Calendars != "" })
	s.mu.Unlock()
	if !named {
		return nil // without a store, validation refused every calendar option
	}
	ctx, cancel := withTimeout(context.Background(), s.clock, storeTimeout)
	defer cancel()
	if err := s.readSchedules(ctx, -1); err != nil {
		return fmt.Errorf("scheduling: the tasks name calendars, which could not be read: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var problems []Problem
	for _, e := range s.entries {
		if e.stored != nil || e.spec.Calendars == "" {
			continue
		}
		if _, err := s.cals.at(calendarNames(e.spec.Calendars), s.clock.Now()); err != nil {
			problems = append(problems, Problem{Task: e.name, Type: e.typ, Method: e.method, Option: "calendar", Value: e.spec.Calendars,
				Rule: "must name defined calendars: " + err.Error() + "; create it before Start (Scheduler.CreateCalendar, " +
					"ndigo calendar create)"})
		}
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}
