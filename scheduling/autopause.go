package scheduling

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ndigo/ndigo/taskstate"
)

// takeRun takes one of the task's MaxRuns runs for f, under f's lease and
// claim (step 3 of admit, for a task with MaxRuns): outcomeRun if it took
// one (or took it before: a retry of the fire), OutcomeCompleted once every
// run is taken, a lock failure if the store failed. Taking the last run, or
// finding none left, completes the task on this node: its schedule goes no
// further.
func (s *Scheduler) takeRun(f *firing) (Outcome, error) {
	e := f.e
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, s.callBound(e))
	defer cancel()
	n, err := s.state.TakeRun(ctx, e.name, f.fire, e.spec.MaxRuns)
	switch {
	case err != nil:
		return OutcomeLockFailed, fmt.Errorf("taking one of the task's %d runs (maxRuns): %w", e.spec.MaxRuns, err)
	case n == 0:
		s.complete(e)
		return OutcomeCompleted, nil
	case n >= e.spec.MaxRuns:
		s.complete(e)
	}
	return outcomeRun, nil
}

// complete marks e's runs all taken (MaxRuns): it fires no more, and is
// listed completed.
func (s *Scheduler) complete(e *entry) {
	if e.runsTaken.Swap(true) {
		return
	}
	s.mu.Lock()
	if e.index >= 0 {
		heap.Remove(&s.due, int(e.index))
	}
	s.mu.Unlock()
	s.log.Info("task completed: its runs are all taken", "task", e.name, "maxRuns", e.spec.MaxRuns)
}

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
	if len(failedInARow(runs, n)) < n {
		return
	}
	if p, err := s.state.Paused(ctx, e.name); err != nil || p.Paused {
		return // paused already, or the flag cannot be read: the next failure tries again
	}
	note := noteText(fmt.Sprintf("paused after %d failed fires in a row (pauseAfterFailures); the last: %v", n, last))
	if err := s.state.SetPaused(ctx, e.name, taskstate.Pause{Paused: true, Note: note, By: "scheduler", At: s.clock.Now()}); err != nil {
		s.log.Warn("pausing a task after failures in a row failed", "task", e.name, "failures", n, "err", err)
		return
	}
	s.pauses.forget(true)
	s.log.Warn("task paused after failures in a row", "task", e.name, "failures", n, "note", note)
}

// noteText makes s a note that taskstate.CheckPause takes: its control
// characters (a stack's tabs, a "\r") made spaces but line breaks, cut on
// a rune boundary to taskstate.MaxNoteLen bytes.
func noteText(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\r\n", "\n"), "?")
	s = strings.Map(func(r rune) rune {
		if r != '\n' && !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	for len(s) > taskstate.MaxNoteLen {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
