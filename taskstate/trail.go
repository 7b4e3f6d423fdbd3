package taskstate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// An Event is one control action in the trail ([Store.AppendEvent],
// [Store.Events]): a pause, a resume, a run now, a backfill or its
// cancel, a stored schedule's or calendar's change, a notification.
type Event struct {
	// Seq is given by the store: increasing in the order the appends
	// committed, never reused (there may be gaps), so that a reader that
	// tails the trail with Events(after) never misses an entry.
	Seq int64 `json:"seq"`
	// Key is the action's idempotency key, required: an append of a Key
	// the trail holds stores nothing and answers the entry stored. At most
	// MaxEventLabelLen bytes of printable UTF-8.
	Key string `json:"key"`
	// At is when the node made it, which stores keep to the nanosecond, in
	// UTC. Required, within the instants Unix nanoseconds hold.
	At time.Time `json:"at"`
	// Node is the node that made it; Actor who: a token holder's name,
	// "scheduler". At most MaxEventLabelLen bytes of printable UTF-8 each;
	// empty if not known.
	Node  string `json:"node,omitempty"`
	Actor string `json:"actor,omitempty"`
	// Action is what was done, required: pause, resume, run, backfill,
	// cancel-backfill, create-schedule, update-schedule, delete-schedule,
	// create-calendar, update-calendar, delete-calendar, notify, ... At
	// most MaxEventLabelLen bytes of printable UTF-8.
	Action string `json:"action"`
	// Target is the task, schedule or calendar it acted on ("" if none),
	// at most MaxEventLabelLen bytes of printable UTF-8.
	Target string `json:"target,omitempty"`
	// Note says why, as a Pause's: at most MaxNoteLen bytes of printable
	// UTF-8, line breaks allowed.
	Note string `json:"note,omitempty"`
	// Before is what the action replaced, After what it made, each JSON of
	// at most MaxEventValueLen bytes; "" if nothing.
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// Limits of the trail of control actions.
const (
	// DefaultTrail is how many events a store keeps when its trail length
	// is not set: the newest, the older ones dropped as new ones come (and
	// their Keys with them: an append of a dropped entry's Key stores it
	// again).
	DefaultTrail = 10_000
	// MaxTrail bounds a store's trail length.
	MaxTrail = 100_000
	// MaxEventLabelLen bounds an Event's Key, Node, Actor, Action and
	// Target, in bytes.
	MaxEventLabelLen = MaxScheduleNameLen
	// MaxEventValueLen bounds an Event's Before and After, in bytes: room
	// for a stored schedule's Args and options, or a calendar.
	MaxEventValueLen = 64 << 10
	// MaxEventsLimit bounds the limit of an [Store.Events] call.
	MaxEventsLimit = 1000
)

// CheckTrail validates a store's trail length (0 meaning [DefaultTrail])
// and returns the length to use. field names the option in the error.
func CheckTrail(field string, n int) (int, error) {
	switch {
	case n == 0:
		return DefaultTrail, nil
	case n < 0 || n > MaxTrail:
		return 0, fmt.Errorf("%w: %s %d must be in [1, %d] (0 means %d)", ErrInvalid, field, n, MaxTrail, DefaultTrail)
	}
	return n, nil
}

// CheckEvent validates an [Store.AppendEvent] call's context and event,
// and returns an error wrapping ErrInvalid that names the field, the value
// (or its length) and the rule, or the context's error: a Key and an
// Action of 1 to [MaxEventLabelLen] bytes of printable UTF-8; a Node,
// Actor and Target of at most that, empty allowed; a Note as a [Pause]'s;
// a Before and After empty or valid JSON of at most [MaxEventValueLen]
// bytes; an At set, within the instants Unix nanoseconds hold. The Seq is
// the store's, and ignored. Stores call it before they change anything.
func CheckEvent(ctx context.Context, e Event) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	label := func(field, v string, required bool) error {
		switch {
		case v == "" && required:
			return fmt.Errorf("event %s %q must not be empty", field, v)
		case len(v) > MaxEventLabelLen:
			return fmt.Errorf("event %s %.32q… has %d bytes, over %d (taskstate.MaxEventLabelLen)", field, v, len(v), MaxEventLabelLen)
		case !utf8.ValidString(v):
			return fmt.Errorf("event %s %q must be valid UTF-8", field, v)
		case strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
			return fmt.Errorf("event %s %q must be printable: no control characters or line breaks", field, v)
		}
		return nil
	}
	value := func(field, v string) error {
		switch {
		case v == "":
			return nil
		case len(v) > MaxEventValueLen:
			return fmt.Errorf("event %s %.32q… has %d bytes, over %d (taskstate.MaxEventValueLen)", field, v, len(v), MaxEventValueLen)
		case !json.Valid([]byte(v)):
			return fmt.Errorf("event %s %.64q must be JSON (or empty for nothing)", field, v)
		}
		return nil
	}
	var err error
	for _, l := range []struct {
		field, v string
		required bool
	}{{"key", e.Key, true}, {"action", e.Action, true}, {"node", e.Node, false}, {"actor", e.Actor, false}, {"target", e.Target, false}} {
		if err = label(l.field, l.v, l.required); err != nil {
			break
		}
	}
	if err == nil {
		switch {
		case len(e.Note) > MaxNoteLen:
			err = fmt.Errorf("event note %.32q… has %d bytes, over %d (taskstate.MaxNoteLen)", e.Note, len(e.Note), MaxNoteLen)
		case !utf8.ValidString(e.Note):
			err = fmt.Errorf("event note %.64q must be valid UTF-8", e.Note)
		case !noteText(e.Note):
			err = fmt.Errorf("event note %.64q must be printable: no control characters but line breaks (\\n, \\r\\n)", e.Note)
		case value("before", e.Before) != nil:
			err = value("before", e.Before)
		case value("after", e.After) != nil:
			err = value("after", e.After)
		case e.At.IsZero() || e.At.Before(minPauseAt) || e.At.After(maxPauseAt):
			err = fmt.Errorf("event at %v must be set, within %v and %v (Unix nanoseconds)", e.At, minPauseAt, maxPauseAt)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// CheckEvents validates an [Store.Events] call's arguments, as
// [CheckEvent] does: after must not be negative, limit in [1,
// MaxEventsLimit].
func CheckEvents(ctx context.Context, after int64, limit int) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	switch {
	case after < 0:
		return fmt.Errorf("%w: events after %d must not be negative (0 reads from the oldest kept)", ErrInvalid, after)
	case limit < 1 || limit > MaxEventsLimit:
		return fmt.Errorf("%w: events limit %d must be in [1, %d]", ErrInvalid, limit, MaxEventsLimit)
	}
	return nil
}

// StoredEvent returns e as a store keeps and answers it: At in UTC, seq
// its Seq.
func StoredEvent(e Event, seq int64) Event {
	e.Seq, e.At = seq, e.At.UTC()
	return e
}
