package taskstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrBackfillRunning reports a [Store.StartBackfill] for a task whose
// backfill is still running: a task has one backfill at a time, so that its
// instants run in order.
var ErrBackfillRunning = errors.New("taskstate: a backfill of the task is running")

// The states of a [Backfill].
const (
	BackfillRunning   = "running"   // instants are still to be taken
	BackfillDone      = "done"      // every instant was taken or refused
	BackfillCancelled = "cancelled" // an operator cancelled it; the rest is not run
)

// maxInstant is the latest instant in Unix nanoseconds.
var maxInstant = time.Unix(0, math.MaxInt64).UTC()

// MaxBackfillIDLen bounds a backfill's ID.
const MaxBackfillIDLen = 64

// A Backfill is a run of a task for each instant of its schedule in [From,
// To], one instant after another, in order, that any node of the cluster may
// drive: the store keeps how far it got (Cursor), so that another node goes
// on where a dead one stopped. Each instant is taken once ([Store.TakeBackfill]).
type Backfill struct {
	ID   string    `json:"id"`   // names this backfill among the task's
	Task string    `json:"task"` // the task's name
	From time.Time `json:"from"` // the range's first instant
	To   time.Time `json:"to"`   // its last
	// Force runs instants that already ran, which are refused otherwise.
	Force bool `json:"force,omitempty"`
	// Overlap is the overlap policy its runs take, as the scheduler names
	// it; "" for the task's own.
	Overlap string `json:"overlap,omitempty"`
	// Total is how many instants of the schedule the range holds.
	Total int `json:"total"`
	// Cursor is the last instant taken or refused; zero before the first.
	Cursor time.Time `json:"cursor,omitzero"`
	// Taken and Refused count the instants taken to run and those refused
	// as already run.
	Taken   int `json:"taken"`
	Refused int `json:"refused"`
	// State is BackfillRunning, BackfillDone or BackfillCancelled.
	State   string    `json:"state"`
	Node    string    `json:"node"`    // the node that started it
	Created time.Time `json:"created"` // when it was started
}

// A BackfillTake is what [Store.TakeBackfill] did.
type BackfillTake int

const (
	// BackfillStale: nothing changed. The backfill is not running, is
	// another one, or its cursor is at or past the instant: another node
	// took it, or a later one.
	BackfillStale BackfillTake = iota
	// BackfillTaken: the instant is the caller's to run; its placeholder
	// run is in the task's history, and the instant is known to have run.
	BackfillTaken
	// BackfillRefused: the instant already ran (and the backfill does not
	// force it); the cursor moved past it.
	BackfillRefused
)

// String names t as its constant does.
func (t BackfillTake) String() string {
	switch t {
	case BackfillStale:
		return "BackfillStale"
	case BackfillTaken:
		return "BackfillTaken"
	case BackfillRefused:
		return "BackfillRefused"
	}
	return fmt.Sprintf("BackfillTake(%d)", int(t))
}

// CheckStartBackfill validates the arguments of a StartBackfill call, as
// CheckTask does for the other calls.
func CheckStartBackfill(ctx context.Context, b Backfill) error {
	if err := CheckTask(ctx, b.Task); err != nil {
		return err
	}
	switch {
	case b.ID == "" || len(b.ID) > MaxBackfillIDLen:
		return fmt.Errorf("%w: task %q: backfill ID %q must have 1 to %d bytes", ErrInvalid, b.Task, b.ID, MaxBackfillIDLen)
	case b.From.IsZero() || b.To.Before(b.From):
		return fmt.Errorf("%w: task %q: backfill range [%v, %v] must start at a set instant and not end before it",
			ErrInvalid, b.Task, b.From, b.To)
	case !b.From.After(time.Unix(0, 0)) || b.To.After(maxInstant):
		return fmt.Errorf("%w: task %q: backfill range [%v, %v] must lie within (%v, %v]: the instants a store keeps in Unix nanoseconds",
			ErrInvalid, b.Task, b.From, b.To, time.Unix(0, 0).UTC(), maxInstant)
	case b.Total < 1:
		return fmt.Errorf("%w: task %q: backfill total %d must be 1 or more", ErrInvalid, b.Task, b.Total)
	}
	return CheckNode(b.Node)
}

// CheckTakeBackfill validates the arguments of a TakeBackfill call.
func CheckTakeBackfill(ctx context.Context, task, id, node string, fire time.Time) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	if err := CheckNode(node); err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: task %q: backfill ID %q must not be empty", ErrInvalid, task, id)
	case fire.IsZero():
		return fmt.Errorf("%w: task %q: backfill instant must be set", ErrInvalid, task)
	}
	return nil
}

// CheckEndBackfill validates the arguments of an EndBackfill call.
func CheckEndBackfill(ctx context.Context, task, id, state string) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: task %q: backfill ID %q must not be empty", ErrInvalid, task, id)
	case state != BackfillDone && state != BackfillCancelled:
		return fmt.Errorf("%w: task %q: backfill state %q must be %q or %q", ErrInvalid, task, state, BackfillDone, BackfillCancelled)
	}
	return nil
}

// BackfillPlaceholder is the placeholder run that [Store.TakeBackfill] adds
// for node's take of fire, which the record of the run replaces.
func BackfillPlaceholder(fire time.Time, node string) Run {
	return Run{Fire: fire.UTC(), Backfill: true, Node: node, Outcome: OutcomeTaken}
}

// RanAt reports whether r is a run of its task's instant fire, as a
// backfill counts one: not a manual run, and one that started, or a
// placeholder of a take ([OutcomeTaken]) whose run may still be going.
func RanAt(r Run, fire time.Time) bool {
	return !r.Manual && r.Fire.Equal(fire) && (!r.Start.IsZero() || r.Outcome == OutcomeTaken)
}

// RunJSONPrefix is how the JSON encoding of a Run of instant fire that is
// not manual begins, its Fire in UTC: a store that keeps runs as their JSON
// (with Fire in UTC) finds a run that [RanAt] counts by it, without
// decoding the others. Within the encoding, every quote of a string value
// is escaped, so the text of a field, as "start":"...", is found only where
// the field is.
func RunJSONPrefix(fire time.Time) string {
	f, _ := json.Marshal(fire.UTC()) // a time of years 0 to 9999 encodes; CheckTakeBackfill keeps fires after 1970
	return `{"fire":` + string(f) + `,"node":`
}
