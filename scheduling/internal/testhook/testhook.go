// Package testhook lets package schedulingtest reach into a scheduler
// without widening package scheduling's API.
package testhook

import (
	"context"
	"time"
)

// WaitIdle blocks until the scheduler s (a *scheduling.Scheduler) has
// dispatched every fire due at its clock's now and no fire is in flight,
// or ctx ends. Package scheduling sets it.
var WaitIdle func(ctx context.Context, s any) error

// Quiet reports, of the scheduler s (a *scheduling.Scheduler), whether its
// loop waits for a fire, a request poll and a heartbeat none of which is
// due at its clock's now, and how many fires are in flight, both read at
// one instant. Package scheduling sets it.
var Quiet func(s any) (quiet bool, inFlight int)

// Next returns the earliest next fire of s (a *scheduling.Scheduler), zero
// if none. Package scheduling sets it.
var Next func(s any) time.Time
