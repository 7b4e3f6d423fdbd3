package scheduling

import "errors"

// ErrInvalidSpec reports a task spec that failed validation. The
// [*ValidationError] that wraps it lists every problem.
var ErrInvalidSpec = errors.New("scheduling: invalid task spec")

// ErrNoDriver reports a locked task on a scheduler without a lock driver. Such
// a task never runs unguarded.
var ErrNoDriver = errors.New("scheduling: no lock driver")

// ErrPanic reports that a task panicked. The run's error wraps it with the
// panic value.
var ErrPanic = errors.New("scheduling: task panicked")

// ErrStopTimeout reports that [Scheduler.Stop] cancelled runs that were still
// going when its context ended.
var ErrStopTimeout = errors.New("scheduling: runs still going at stop deadline")

// ErrRenewalFailed reports that a run's lease ran out because no renewal
// reached the driver in time, though the driver never said the lease was
// lost. The run's context cause wraps it and the last renewal's error.
var ErrRenewalFailed = errors.New("scheduling: lease renewal failed")
