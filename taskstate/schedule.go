package taskstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of the stored schedules' calls.
var (
	// ErrScheduleExists reports a [Store.CreateSchedule] of a name that
	// a stored schedule has.
	ErrScheduleExists = errors.New("taskstate: a schedule of that name exists")
	// ErrNoSchedule reports a [Store.UpdateSchedule] of a name that no
	// stored schedule has.
	ErrNoSchedule = errors.New("taskstate: no schedule of that name")
)

// Limits of a stored schedule, which [CheckSchedule] applies: a schedule is
// a small value that every node reads at each change.
const (
	MaxScheduleNameLen = 200       // bytes of Name and of Handler
	MaxScheduleArgsLen = 16 << 10  // bytes of Args
	MaxScheduleOptions = 32        // entries of Options
	MaxScheduleLen     = 128 << 10 // bytes of the whole encoded schedule
)

// A Schedule is a task declared at runtime rather than in code: every node
// that has its handler (a func registered in code by that name) runs it as
// a task of its own, as if declared with the same cron expression, lock
// and options. The store keeps it as [EncodeSchedule] encodes it.
type Schedule struct {
	Name    string `json:"name"`           // the task's name
	Handler string `json:"handler"`        // the name of the func that runs it
	Cron    string `json:"cron"`           // the cron expression, as the cron option takes it
	Lock    string `json:"lock,omitempty"` // the lock key; "" for an unlocked task
	// Options are the task's other options, by the keys of the Scheduled
	// tag ("lockTtl": "5m", "overlap": "buffer-one", ...).
	Options map[string]string `json:"options,omitempty"`
	// Args is a JSON value handed to each run; empty for none.
	Args    json.RawMessage `json:"args,omitempty"`
	Node    string          `json:"node,omitempty"`   // the node that created or last updated it
	Updated time.Time       `json:"updated,omitzero"` // when
	// From is when this spec came, or comes, in force, the same for every
	// node: a fire before it is one of the spec it replaced (Replaced[0]),
	// a fire at or after it one of this spec. The scheduler that stores a
	// schedule sets it: at a create, to the time of the call; at an update,
	// a little later, so that every node has read the change by then. Zero
	// for a schedule stored without it: in force as soon as a node reads it.
	From time.Time `json:"from,omitzero"`
	// Replaced are the specs this one replaced, newest first, each in force
	// from its own From until the From of the spec before it in the list
	// (the first, until this spec's From): what an audit judges their
	// instants by, and the lock that a run of the newest may still hold.
	// At most MaxReplaced of them.
	Replaced []PastSpec `json:"replaced,omitempty"`
}

// A PastSpec is a spec that a stored schedule had before an update.
type PastSpec struct {
	Cron    string            `json:"cron"`
	Lock    string            `json:"lock,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	From    time.Time         `json:"from,omitzero"` // when it came in force; zero if not known
	// Handler and Args are the spec's, what a node that reads the update
	// late runs its fires with; empty in a spec stored by an earlier
	// version, whose runs then get the schedule's.
	Handler string          `json:"handler,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
}

// MaxReplaced bounds a stored schedule's Replaced specs.
const MaxReplaced = 8

// EncodeSchedule returns the encoding of sc that stores keep, with its Args
// compacted: a store compares schedules by these bytes. It fails as
// [CheckSchedule] does.
func EncodeSchedule(sc Schedule) ([]byte, error) {
	if err := CheckSchedule(sc); err != nil {
		return nil, err
	}
	if len(sc.Args) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, sc.Args); err != nil {
			return nil, fmt.Errorf("%w: schedule %q: args: %v", ErrInvalid, sc.Name, err)
		}
		sc.Args = b.Bytes()
	}
	sc.Updated, sc.From = sc.Updated.UTC(), sc.From.UTC()
	if len(sc.Replaced) > 0 {
		sc.Replaced = slices.Clone(sc.Replaced)
		for i := range sc.Replaced {
			sc.Replaced[i].From = sc.Replaced[i].From.UTC()
			if args := sc.Replaced[i].Args; len(args) > 0 {
				var b bytes.Buffer
				if err := json.Compact(&b, args); err != nil {
					return nil, fmt.Errorf("%w: schedule %q: replaced[%d]: args: %v", ErrInvalid, sc.Name, i, err)
				}
				sc.Replaced[i].Args = b.Bytes()
			}
		}
	}
	out, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %v", ErrInvalid, sc.Name, err)
	}
	if len(out) > MaxScheduleLen {
		return nil, fmt.Errorf("%w: schedule %q encodes to %d bytes, over %d (taskstate.MaxScheduleLen)", ErrInvalid, sc.Name, len(out), MaxScheduleLen)
	}
	return out, nil
}

// DecodeSchedule decodes what [EncodeSchedule] encoded.
func DecodeSchedule(b []byte) (Schedule, error) {
	var sc Schedule
	if err := json.Unmarshal(b, &sc); err != nil {
		return Schedule{}, fmt.Errorf("taskstate: a stored schedule does not decode: %w", err)
	}
	return sc, nil
}

// CheckSchedule validates what a store keeps of a schedule, and returns an
// error wrapping ErrInvalid that names the field, the value and the rule: a
// Name and Handler of 1 to [MaxScheduleNameLen] bytes of printable UTF-8 (a
// Name other than "." and ".."); a
// Cron that is not empty; Options keys that are not empty, at most
// [MaxScheduleOptions] of them; Args empty or one JSON value of at most
// [MaxScheduleArgsLen] bytes. Whether the cron expression and options make
// a valid task is the scheduler's to check.
func CheckSchedule(sc Schedule) error {
	for _, f := range []struct{ field, v string }{{"name", sc.Name}, {"handler", sc.Handler}} {
		if err := checkLabel(f.field, f.v); err != nil {
			return fmt.Errorf("%w: schedule %q: %v", ErrInvalid, sc.Name, err)
		}
	}
	switch {
	case sc.Name == "." || sc.Name == "..":
		return fmt.Errorf("%w: schedule name %q must not be . or ..: no URL path can name it (clients remove dot segments)", ErrInvalid, sc.Name)
	case strings.TrimSpace(sc.Cron) == "":
		return fmt.Errorf("%w: schedule %q: cron %q must not be empty", ErrInvalid, sc.Name, sc.Cron)
	case len(sc.Args) > MaxScheduleArgsLen:
		return fmt.Errorf("%w: schedule %q: args has %d bytes, over %d (taskstate.MaxScheduleArgsLen)", ErrInvalid, sc.Name, len(sc.Args), MaxScheduleArgsLen)
	case len(sc.Args) > 0 && !json.Valid(sc.Args):
		return fmt.Errorf("%w: schedule %q: args %.64q must be one JSON value", ErrInvalid, sc.Name, sc.Args)
	}
	if err := checkOptions(sc.Options); err != nil {
		return fmt.Errorf("%w: schedule %q: %v", ErrInvalid, sc.Name, err)
	}
	if len(sc.Replaced) > MaxReplaced {
		return fmt.Errorf("%w: schedule %q: replaced has %d specs, over %d (taskstate.MaxReplaced)", ErrInvalid, sc.Name, len(sc.Replaced), MaxReplaced)
	}
	for i, p := range sc.Replaced {
		if strings.TrimSpace(p.Cron) == "" {
			return fmt.Errorf("%w: schedule %q: replaced[%d]: cron %q must not be empty", ErrInvalid, sc.Name, i, p.Cron)
		}
		if err := checkOptions(p.Options); err != nil {
			return fmt.Errorf("%w: schedule %q: replaced[%d]: %v", ErrInvalid, sc.Name, i, err)
		}
		if p.Handler != "" {
			if err := checkLabel("handler", p.Handler); err != nil {
				return fmt.Errorf("%w: schedule %q: replaced[%d]: %v", ErrInvalid, sc.Name, i, err)
			}
		}
		switch {
		case len(p.Args) > MaxScheduleArgsLen:
			return fmt.Errorf("%w: schedule %q: replaced[%d]: args has %d bytes, over %d (taskstate.MaxScheduleArgsLen)", ErrInvalid, sc.Name, i, len(p.Args), MaxScheduleArgsLen)
		case len(p.Args) > 0 && !json.Valid(p.Args):
			return fmt.Errorf("%w: schedule %q: replaced[%d]: args %.64q must be one JSON value", ErrInvalid, sc.Name, i, p.Args)
		}
	}
	return nil
}

// checkOptions checks a schedule's options: at most MaxScheduleOptions,
// no empty key.
func checkOptions(opts map[string]string) error {
	if len(opts) > MaxScheduleOptions {
		return fmt.Errorf("options has %d entries, over %d (taskstate.MaxScheduleOptions)", len(opts), MaxScheduleOptions)
	}
	for k := range opts {
		if k == "" {
			return errors.New("an options key must not be empty")
		}
	}
	return nil
}

// checkLabel checks a schedule's name or handler.
func checkLabel(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s %q must not be empty", field, v)
	case len(v) > MaxScheduleNameLen:
		return fmt.Errorf("%s %.32q… has %d bytes, over %d (taskstate.MaxScheduleNameLen)", field, v, len(v), MaxScheduleNameLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s %q must be valid UTF-8", field, v)
	case strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%s %q must be printable: no control characters or line breaks", field, v)
	}
	return nil
}

// CheckScheduleName validates the name of a [Store.DeleteSchedule] call, as
// [CheckSchedule] validates a schedule's.
func CheckScheduleName(ctx context.Context, name string) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	if err := checkLabel("name", name); err != nil {
		return fmt.Errorf("%w: schedule: %v", ErrInvalid, err)
	}
	return nil
}
