package taskstate

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A Pause is a task's paused flag, with who set it and why: what
// [Store.SetPaused] stores and [Store.Paused] returns. A resume (Paused
// false) carries its own note, author and time, which replace those of the
// pause before it, so that a task's list can show "resumed by X: note". A
// task never paused or resumed has the zero Pause.
type Pause struct {
	Paused bool `json:"paused"`
	// Note says why: at most MaxNoteLen bytes of printable UTF-8, line
	// breaks ("\n", "\r\n") allowed; empty for none.
	Note string `json:"note,omitempty"`
	// By says who: an API token's name, "cli", "scheduler" (an automatic
	// pause); at most MaxScheduleNameLen bytes of printable UTF-8, no line
	// breaks; empty if not known.
	By string `json:"by,omitempty"`
	// At is when, on the caller's clock; zero if not known. Stores keep it
	// to the nanosecond, in UTC.
	At time.Time `json:"at,omitzero"`
}

// MaxNoteLen bounds a [Pause]'s Note, in bytes: a pause is a small value
// that the scheduler reads with each task's flag.
const MaxNoteLen = 1024

// Bounds of a [Pause]'s At: the instants that Unix nanoseconds hold (an
// int64), which some stores keep it as.
var (
	minPauseAt = time.Unix(0, -1<<63).UTC()
	maxPauseAt = time.Unix(0, 1<<63-1).UTC()
)

// CheckPause validates what a store keeps of task's pause, and returns an
// error wrapping ErrInvalid that names the field, the value and the rule: a
// Note of at most [MaxNoteLen] bytes of printable UTF-8, whose only control
// characters are line breaks ("\n", "\r\n"); a By of at most
// [MaxScheduleNameLen] bytes of printable UTF-8; an At zero or one that
// Unix nanoseconds hold (from 1677-09-21 to 2262-04-11). Stores call it,
// after [CheckTask], before they change anything.
func CheckPause(task string, p Pause) error {
	switch {
	case len(p.Note) > MaxNoteLen:
		return fmt.Errorf("%w: task %q: pause note %.32q… has %d bytes, over %d (taskstate.MaxNoteLen)", ErrInvalid, task, p.Note, len(p.Note), MaxNoteLen)
	case !utf8.ValidString(p.Note):
		return fmt.Errorf("%w: task %q: pause note %.64q must be valid UTF-8", ErrInvalid, task, p.Note)
	case !noteText(p.Note):
		return fmt.Errorf("%w: task %q: pause note %.64q must be printable: no control characters but line breaks (\\n, \\r\\n)", ErrInvalid, task, p.Note)
	case len(p.By) > MaxScheduleNameLen:
		return fmt.Errorf("%w: task %q: pause by %.32q… has %d bytes, over %d (taskstate.MaxScheduleNameLen)", ErrInvalid, task, p.By, len(p.By), MaxScheduleNameLen)
	case !utf8.ValidString(p.By):
		return fmt.Errorf("%w: task %q: pause by %q must be valid UTF-8", ErrInvalid, task, p.By)
	case strings.IndexFunc(p.By, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%w: task %q: pause by %q must be printable: no control characters or line breaks", ErrInvalid, task, p.By)
	case !p.At.IsZero() && (p.At.Before(minPauseAt) || p.At.After(maxPauseAt)):
		return fmt.Errorf("%w: task %q: pause at %v must be zero or within %v and %v (Unix nanoseconds)", ErrInvalid, task, p.At, minPauseAt, maxPauseAt)
	}
	return nil
}

// noteText reports whether s, valid UTF-8, is printable but for line
// breaks: "\n", and "\r" only before "\n".
func noteText(s string) bool {
	for i, r := range s {
		switch {
		case r == '\n':
		case r == '\r':
			if i+1 >= len(s) || s[i+1] != '\n' {
				return false
			}
		case !unicode.IsPrint(r):
			return false
		}
	}
	return true
}

// CheckSetPaused validates the arguments of a SetPaused call, as CheckTask
// does for the other calls: the task, the context, and [CheckPause].
func CheckSetPaused(ctx context.Context, task string, p Pause) error {
	if err := CheckTask(ctx, task); err != nil {
		return err
	}
	return CheckPause(task, p)
}
