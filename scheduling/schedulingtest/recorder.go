package schedulingtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ndigo/ndigo/scheduling"
)

// A Recorder is a scheduling.Listener that records every run and skip. Give
// each node's scheduler one (in scheduling.Config.Listeners, or with
// scheduling.Listen) and check them together with [AtMostOnce]. A Recorder
// is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex // protects the fields below
	started []scheduling.Event
	ended   []scheduling.Event
	skipped []scheduling.Event
}

var _ scheduling.Listener = (*Recorder)(nil)

// BeforeRun records a run's start.
func (r *Recorder) BeforeRun(ctx context.Context, e scheduling.Event) context.Context {
	r.mu.Lock()
	r.started = append(r.started, e)
	r.mu.Unlock()
	return ctx
}

// AfterRun records a run's end.
func (r *Recorder) AfterRun(_ context.Context, e scheduling.Event) {
	r.mu.Lock()
	r.ended = append(r.ended, e)
	r.mu.Unlock()
}

// Skipped records a skip.
func (r *Recorder) Skipped(e scheduling.Event) {
	r.mu.Lock()
	r.skipped = append(r.skipped, e)
	r.mu.Unlock()
}

// Started returns the runs that started, in order.
func (r *Recorder) Started() []scheduling.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.started)
}

// Ended returns the runs that ended, in order, with their outcome and
// duration.
func (r *Recorder) Ended() []scheduling.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended)
}

// Skips returns the fires that did not run, in order, with the reason.
func (r *Recorder) Skips() []scheduling.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.skipped)
}

// A FireKey names one fire of one task. Make it with [Key]: time.Time
// values of one instant compare equal as map keys only in one form.
type FireKey struct {
	Task string
	Fire time.Time // in UTC, without a monotonic reading
}

// Key returns the FireKey of task's fire at fire.
func Key(task string, fire time.Time) FireKey {
	return FireKey{task, time.Unix(0, fire.UnixNano()).UTC()}
}

// Runs counts the runs that started, by fire, across recorders.
func Runs(rs ...*Recorder) map[FireKey]int {
	n := map[FireKey]int{}
	for _, r := range rs {
		for _, e := range r.Started() {
			n[Key(e.Task, e.Fire)]++
		}
	}
	return n
}

// AtMostOnce returns an error naming every fire that started more than once
// across the recorders (one per node of a cluster), with the nodes that ran
// it, or nil.
func AtMostOnce(rs ...*Recorder) error {
	nodes := map[FireKey][]string{}
	for _, r := range rs {
		for _, e := range r.Started() {
			k := Key(e.Task, e.Fire)
			nodes[k] = append(nodes[k], e.Node)
		}
	}
	var bad []string
	for k, ns := range nodes {
		if len(ns) > 1 {
			bad = append(bad, fmt.Sprintf("%s at %s ran %d times (nodes %s)", k.Task,
				k.Fire.Format(time.RFC3339Nano), len(ns), strings.Join(ns, ", ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("schedulingtest: %d fires ran more than once:\n\t%s", len(bad), strings.Join(bad, "\n\t"))
}
