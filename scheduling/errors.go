package scheduling

import (
	"errors"
	"fmt"
)

// ErrInvalidSpec reports a task spec that failed validation. The
// [*ValidationError] that wraps it lists every problem.
var ErrInvalidSpec = errors.New("scheduling: invalid task spec")

// ErrNoDriver reports a locked task on a scheduler without a lock driver. Such
// a task never runs unguarded.
var ErrNoDriver = errors.New("scheduling: no lock driver")

// ErrInvalidConfig reports a [Config] that Start refuses: a Heartbeat out of
// range, Spread on a driver that keeps no memberships. The wrapping error
// names the field, the value and the rule.
var ErrInvalidConfig = errors.New("scheduling: invalid config")

// ErrPanic reports that a task panicked. The run's error is a *PanicError,
// which wraps it.
var ErrPanic = errors.New("scheduling: task panicked")

// A PanicError is the error of a run whose task panicked: the panic's value
// and the goroutine's stack. Its message is one line; the scheduler logs the
// stack as an attribute of its own.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "scheduling: task panicked: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, e.Value) }

// Unwrap returns ErrPanic.
func (e *PanicError) Unwrap() error { return ErrPanic }

// ErrStopTimeout reports that [Scheduler.Stop] cancelled runs that were still
// going when its context ended.
var ErrStopTimeout = errors.New("scheduling: runs still going at stop deadline")

// ErrRenewalFailed reports that a run's lease ran out because no renewal
// reached the driver in time, though the driver never said the lease was
// lost. The run's context cause wraps it and the last renewal's error.
var ErrRenewalFailed = errors.New("scheduling: lease renewal failed")
