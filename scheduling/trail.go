package scheduling

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// A ControlOption says why an operator made a control action (a pause or
// resume, a manual run, a backfill or its cancel, a change of a stored
// schedule or a calendar), who, and under which idempotency key the trail
// keeps it ([Scheduler.Events]).
type ControlOption func(*control)

// control is what ControlOptions say.
type control struct {
	note, by, key string
}

// WithNote keeps note with the action: why it was made. At most
// [taskstate.MaxNoteLen] bytes of printable text (line breaks allowed). A
// pause or resume keeps it with the flag too.
func WithNote(note string) ControlOption { return func(c *control) { c.note = note } }

// By keeps who made the action: the admin API passes the name of its
// token's holder, then what the client says (the CLI its user's).
func By(who string) ControlOption { return func(c *control) { c.by = who } }

// WithKey is the action's idempotency key in the trail: an action made
// again with the key it was first made with (a client's retry after an
// answer it did not get) is kept in the trail once. Without one, each call
// gets a key of its own.
func WithKey(key string) ControlOption { return func(c *control) { c.key = key } }

// controlOf applies opts.
func controlOf(opts []ControlOption) control {
	var c control
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// event is the trail entry of action on target that opts describe, a key
// of its own given if they name none, checked before the action is made:
// an error wraps taskstate.ErrInvalid and names the field, the value and
// the rule.
func (s *Scheduler) event(ctx context.Context, opts []ControlOption, action, target string) (taskstate.Event, error) {
	c := controlOf(opts)
	if c.key == "" {
		var k [12]byte
		_, _ = rand.Read(k[:]) // never fails
		c.key = hex.EncodeToString(k[:])
	}
	ev := taskstate.Event{Key: c.key, At: s.clock.Now().UTC(), Node: s.node, Actor: c.by, Action: action, Target: target, Note: c.note}
	if err := taskstate.CheckEvent(ctx, ev); err != nil {
		return ev, fmt.Errorf("scheduling: %s %s: %w", action, target, err)
	}
	return ev, nil
}

// act makes the action that ev describes, write-ahead: ev is kept in the
// trail first, with what the action replaces (before) and makes (after),
// and make makes the action only then, so that no action made is missing
// from the trail. make gets the entry kept, and again set when it is an
// earlier one of ev's key: the client sent the action again (its answer
// was lost, its node died), and make completes what that entry says,
// without making again what was made. A refusal after the entry was kept
// (a name taken or missing, a backfill running: see refusal) is kept too,
// as an entry "refused" that names the action's key. Without a task state
// store there is no trail: make makes the action.
func (s *Scheduler) act(ctx context.Context, ev taskstate.Event, before, after any, make func(kept taskstate.Event, again bool) error) error {
	if s.state == nil {
		return make(ev, false)
	}
	ev.At = s.attemptAt()
	var err error
	if ev.Before, err = jsonOf(before); err == nil {
		ev.After, err = jsonOf(after)
	}
	kept := ev
	if err == nil {
		kept, err = s.state.AppendEvent(ctx, ev)
	}
	if err != nil {
		return fmt.Errorf("scheduling: %s %s was not made: the trail did not answer whether it kept it (send it again with the same key): %w",
			ev.Action, ev.Target, err)
	}
	again := !kept.At.Equal(ev.At) || kept.Node != ev.Node
	if again {
		// Refused the first time: refused again, not made now.
		if note, refused, err := s.refusedBefore(ctx, kept); err != nil || refused {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrRefused, note)
			}
			return err
		}
	}
	err = make(kept, again)
	if err != nil && refusal(err) {
		if rerr := s.refuse(ctx, kept, err); rerr != nil {
			return fmt.Errorf("scheduling: %w; the trail did not keep the refusal (send it again with the same key): %w", err, rerr)
		}
	}
	return err
}

// attemptAt returns now, or a nanosecond after the last instant it
// returned if not later: each attempt of this node has an instant of its
// own, so that act tells its own entry from an earlier attempt's.
func (s *Scheduler) attemptAt() time.Time {
	s.trailMu.Lock()
	defer s.trailMu.Unlock()
	at := s.clock.Now().UTC().Round(0)
	if !at.After(s.trailAt) {
		at = s.trailAt.Add(time.Nanosecond)
	}
	s.trailAt = at
	return at
}

// ActionRefused is the trail's action of an action refused after it was
// kept: its Target is the action's, its Note why, its Before the action's
// key and name.
const ActionRefused = "refused"

// ErrRefused: an action sent again with its key was refused the first
// time; the error gives the refusal as the trail keeps it.
var ErrRefused = errors.New("scheduling: the action was refused when first sent")

// refusedKey is the trail's key of the refusal of the action kept under
// key.
func refusedKey(key string) string {
	if k := key + "/refused"; len(k) <= taskstate.MaxEventLabelLen {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	return "refused/" + hex.EncodeToString(sum[:16])
}

// refusedBefore looks in the trail, after the action kept as ev, for its
// refusal, and returns its note if there is one.
func (s *Scheduler) refusedBefore(ctx context.Context, ev taskstate.Event) (string, bool, error) {
	key := refusedKey(ev.Key)
	for after := ev.Seq; ; {
		evs, err := s.state.Events(ctx, after, MaxEvents)
		if err != nil {
			return "", false, err
		}
		for _, e := range evs {
			if e.Key == key {
				return e.Note, true, nil
			}
			after = e.Seq
		}
		if len(evs) < MaxEvents {
			return "", false, nil
		}
	}
}

// refuse keeps in the trail that the action kept as ev was refused with
// err.
func (s *Scheduler) refuse(ctx context.Context, ev taskstate.Event, err error) error {
	key := refusedKey(ev.Key)
	note := ev.Action + " refused: " + err.Error()
	if len(note) > taskstate.MaxNoteLen {
		note = strings.ToValidUTF8(note[:taskstate.MaxNoteLen], "")
	}
	r := taskstate.Event{Key: key, At: s.clock.Now().UTC(), Node: s.node, Actor: ev.Actor, Action: ActionRefused, Target: ev.Target, Note: note}
	r.Before, _ = jsonOf(map[string]string{"key": ev.Key, "action": ev.Action})
	_, aerr := s.state.AppendEvent(ctx, r)
	return aerr
}

// refusal reports whether err is a refusal of an action by the state it
// found, which no retry mends: not a failure of the store.
func refusal(err error) bool {
	for _, r := range []error{ErrRefused, ErrUnknownSchedule, ErrUnknownCalendar, ErrCalendarExists, ErrCalendarInUse, ErrNoBackfill,
		taskstate.ErrBackfillRunning, taskstate.ErrScheduleExists, taskstate.ErrNoSchedule} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// jsonOf is v as JSON, "" for nil.
func jsonOf(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// MaxEvents is how many trail entries [Scheduler.Events] returns at most
// in one call.
const MaxEvents = 1000

// Events returns the trail's entries after the one numbered after (0 for
// the oldest kept), oldest first, at most limit (1 to MaxEvents): every
// control action made through this scheduler or another of the cluster,
// with who made it, when, on which node, its note and what it changed,
// numbered in the order they were kept, so that a reader who asks again
// after the last number it read misses none. Without a task state store
// it fails with ErrNoState.
func (s *Scheduler) Events(ctx context.Context, after int64, limit int) ([]taskstate.Event, error) {
	if s.state == nil {
		return nil, fmt.Errorf("%w: the trail of control actions is kept in the task state", ErrNoState)
	}
	return s.state.Events(ctx, after, limit)
}
