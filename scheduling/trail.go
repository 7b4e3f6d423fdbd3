package scheduling

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

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

// toTrail keeps ev, an action that was made, in the trail, with what it
// replaced and what it made (as JSON; nil for nothing). Without a task
// state store there is no trail. An error says the action was made and
// not kept: made again with the same key, it is kept once.
func (s *Scheduler) toTrail(ctx context.Context, ev taskstate.Event, before, after any) error {
	if s.state == nil {
		return nil
	}
	ev.At = s.clock.Now().UTC()
	var err error
	if ev.Before, err = jsonOf(before); err == nil {
		ev.After, err = jsonOf(after)
	}
	if err == nil {
		_, err = s.state.AppendEvent(ctx, ev)
	}
	if err != nil {
		return fmt.Errorf("scheduling: %s %s was made, but the trail did not keep it (made again with the same key, it is kept once): %w",
			ev.Action, ev.Target, err)
	}
	return nil
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
