package taskstate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultHistory is how many runs per task a store keeps when its history
// length is not set.
const DefaultHistory = 20

// MaxHistory bounds a store's history length, so that the runs of one task
// stay a small read.
const MaxHistory = 1000

// ErrInvalid reports bad input to a store: an empty task name, a history
// length out of range. The wrapping error names the argument, the value and
// the rule.
var ErrInvalid = errors.New("taskstate: invalid argument")

// A Store is the state that every node of a cluster shares about its
// scheduled tasks, keyed by task name. Implementations must be safe for
// concurrent use by any number of nodes and must pass the conformance suite
// in package taskstatetest.
type Store interface {
	// SetPaused pauses (true) or resumes (false) task. The flag holds until
	// it is changed, whatever node restarts.
	SetPaused(ctx context.Context, task string, paused bool) error
	// Paused reports whether task is paused; a task never paused is not.
	Paused(ctx context.Context, task string) (bool, error)
	// RequestRun records a pending manual run of task, requested at at. A
	// request made while another is pending is merged into it: the earlier
	// instant stays, and one run serves both.
	RequestRun(ctx context.Context, task string, at time.Time) error
	// Requests returns the pending requests: the instant each was made, by
	// task name.
	Requests(ctx context.Context) (map[string]time.Time, error)
	// TakeRequest removes task's pending request and returns the instant it
	// was made. Of the callers that race for one request, exactly one gets
	// ok; the others, and every caller when none is pending, get false.
	TakeRequest(ctx context.Context, task string) (at time.Time, ok bool, err error)
	// Record adds r to task's runs; the store keeps the newest ones up to
	// its history length and drops the older.
	Record(ctx context.Context, task string, r Run) error
	// Runs returns task's kept runs, newest first.
	Runs(ctx context.Context, task string) ([]Run, error)
}

// A Run is one run of a task on some node of the cluster, as the node that
// ran it recorded it when the task returned.
type Run struct {
	// Fire is the scheduled instant; for a manual run, the instant the run
	// was requested.
	Fire time.Time `json:"fire"`
	// Manual reports a run requested by an operator rather than scheduled.
	Manual bool `json:"manual,omitempty"`
	// Node names the node that ran it.
	Node string `json:"node"`
	// Token is the fencing token of the run's lease; 0 for an unlocked task.
	Token uint64 `json:"token,omitempty"`
	// Start is when the task was called, on the node's clock.
	Start time.Time `json:"start"`
	// Duration is how long the task ran.
	Duration time.Duration `json:"duration"`
	// Outcome is how the run ended, as the scheduler names it: "ok",
	// "error", "panic", "cancelled".
	Outcome string `json:"outcome"`
	// Error is the task's error or panic; "" if it returned nil.
	Error string `json:"error,omitempty"`
}

// CheckTask validates the task name and context of a store call and returns
// an error wrapping ErrInvalid, or the context's error, or nil. Stores call
// it first so that every store rejects bad input alike.
func CheckTask(ctx context.Context, task string) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	if task == "" {
		return fmt.Errorf("%w: task name %q must not be empty", ErrInvalid, task)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("taskstate: task %q: %w", task, err)
	}
	return nil
}

// CheckContext validates the context of a store call that names no task,
// as [CheckTask] does.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: ctx must not be nil", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("taskstate: %w", err)
	}
	return nil
}

// CheckHistory validates a store's history length (0 meaning
// [DefaultHistory]) and returns the length to use. field names the option
// in the error.
func CheckHistory(field string, n int) (int, error) {
	switch {
	case n == 0:
		return DefaultHistory, nil
	case n < 0 || n > MaxHistory:
		return 0, fmt.Errorf("%w: %s %d must be in [1, %d] (0 means %d)", ErrInvalid, field, n, MaxHistory, DefaultHistory)
	}
	return n, nil
}
