package scheduling

import (
	"context"
	"fmt"
	"time"
)

// pauseIfFailing pauses e's task in the cluster if its newest
// PauseAfterFailures fires that ran all failed, once the record of the run
// that just failed (seq) went to the store: the failures in a row are read
// from the history every node shares, whatever node ran each. A fire's
// retries are attempts of one fire; manual runs do not count.
func (s *Scheduler) pauseIfFailing(e *entry, seq uint64, last error) {
	defer s.land()
	n := e.spec.PauseAfterFailures
	s.awaitRecord(seq, nil)
	ctx, cancel := withTimeout(context.Background(), s.clock, storeTimeout)
	defer cancel()
	runs, err := s.state.Runs(ctx, e.name, 0)
	if err != nil {
		s.log.Warn("reading the history to count failures in a row failed", "task", e.name, "err", err)
		return
	}
	failed := 0
	seen := map[time.Time]bool{}
	for _, r := range runs { // newest first
		if r.Manual || r.Start.IsZero() || seen[r.Fire] {
			continue // not a run of a fire, or an earlier attempt of one counted
		}
		seen[r.Fire] = true
		if o := Outcome(r.Outcome); o != OutcomeError && o != OutcomePanic {
			break
		}
		if failed++; failed == n {
			break
		}
	}
	if failed < n {
		return
	}
	if p, err := s.state.Paused(ctx, e.name); err != nil || p {
		return // paused already, or the flag cannot be read: the next failure tries again
	}
	note := fmt.Sprintf("paused after %d failed fires in a row (pauseAfterFailures); the last: %v", n, last)
	if err := s.state.SetPaused(ctx, e.name, true); err != nil {
		s.log.Warn("pausing a task after failures in a row failed", "task", e.name, "failures", n, "err", err)
		return
	}
	s.pauses.forget(true)
	s.log.Warn("task paused after failures in a row", "task", e.name, "failures", n, "note", note)
}
