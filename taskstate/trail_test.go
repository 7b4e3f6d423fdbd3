package taskstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// CheckEvent's and CheckEvents' errors name the field, the value or its
// length, and the rule.
func TestCheckEventNamesFieldValueAndRule(t *testing.T) {
	ctx := context.Background()
	ok := taskstate.Event{Key: "k1", At: time.Unix(1, 0), Action: "pause"}
	if err := taskstate.CheckEvent(ctx, ok); err != nil {
		t.Fatalf("CheckEvent(%+v) = %v, want nil", ok, err)
	}
	with := func(f func(e *taskstate.Event)) taskstate.Event {
		e := ok
		f(&e)
		return e
	}
	for _, c := range []struct {
		e    taskstate.Event
		want []string
	}{
		{with(func(e *taskstate.Event) { e.Key = "" }), []string{"event key", "must not be empty"}},
		{with(func(e *taskstate.Event) { e.Action = strings.Repeat("a", 201) }), []string{"event action", "201 bytes", "over 200"}},
		{with(func(e *taskstate.Event) { e.Actor = "al\nice" }), []string{"event actor", `"al\nice"`, "printable"}},
		{with(func(e *taskstate.Event) { e.Note = strings.Repeat("x", 1025) }), []string{"event note", "1025 bytes", "MaxNoteLen"}},
		{with(func(e *taskstate.Event) { e.After = "{paused" }), []string{"event after", `"{paused"`, "must be JSON"}},
		{with(func(e *taskstate.Event) { e.Before = strings.Repeat(" ", taskstate.MaxEventValueLen+1) }), []string{"event before", "65537 bytes", "MaxEventValueLen"}},
		{with(func(e *taskstate.Event) { e.At = time.Time{} }), []string{"event at", "must be set"}},
	} {
		err := taskstate.CheckEvent(ctx, c.e)
		if !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("CheckEvent(%.80v) = %v, want taskstate.ErrInvalid", c.e, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckEvent: %v; want it to name %q", err, w)
			}
		}
	}
	for _, c := range []struct {
		after int64
		limit int
		want  string
	}{{-1, 10, "after -1 must not be negative"}, {0, 0, "limit 0 must be in [1, 1000]"}, {0, 1001, "limit 1001"}} {
		if err := taskstate.CheckEvents(ctx, c.after, c.limit); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckEvents(%d, %d) = %v, want taskstate.ErrInvalid naming %q", c.after, c.limit, err, c.want)
		}
	}
}
