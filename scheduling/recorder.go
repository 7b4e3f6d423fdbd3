package scheduling

import (
	"context"
	"sync"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// recordShared adds a run to the history the nodes share, through the
// node's recorder; a failure is logged, the run having happened whatever its
// record says.
//
//go:noinline
func (s *Scheduler) recordShared(e *entry, last *LastRun) {
	r := taskstate.Run{Fire: last.Fire, Manual: last.Manual, Node: last.Node, Token: last.Token, Start: last.Start,
		Duration: last.Duration, Outcome: string(last.Outcome)}
	if last.Err != nil {
		r.Error = last.Err.Error()
	}
	s.records.mu.Lock()
	s.records.pending = append(s.records.pending, taskstate.TaskRun{Task: e.name, Run: r})
	start := !s.records.busy
	s.records.busy = true
	s.records.mu.Unlock()
	if start {
		s.takeoff(1) // Stop and the test kit wait for the records too
		go s.flushRecords()
	}
}

// A recorder batches a node's records in the shared history: one Record
// call at a time, each with every run that ended before it, and each
// waiting, up to recordLinger, for the other fires in flight on this node
// (whose records are to come, and whose lock calls it would otherwise
// queue behind). The runs of one tick thus cost about one call per node,
// whatever their number.
type recorder struct {
	mu      sync.Mutex
	pending []taskstate.TaskRun
	busy    bool // a flushRecords runs

	wake chan struct{} // a fire landed; capacity 1
}

// recordLinger bounds how long a Record call waits for the other fires in
// flight. It is real time, not the scheduler's clock: it only groups calls,
// and a test's fake clock must not hold records back.
const recordLinger = 2 * time.Millisecond

// landed tells a lingering flush that a fire ended.
func (r *recorder) landed() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// linger waits until the flush is the only thing in flight on the node, or
// recordLinger.
func (s *Scheduler) linger() {
	if s.flying.Load() <= 1 {
		return
	}
	t := time.NewTimer(recordLinger)
	defer t.Stop()
	for s.flying.Load() > 1 {
		select {
		case <-s.records.wake:
		case <-t.C:
			return
		}
	}
}

// flushRecords records the pending runs until none is left.
func (s *Scheduler) flushRecords() {
	defer s.land()
	for {
		s.linger()
		s.records.mu.Lock()
		batch := s.records.pending
		s.records.pending = nil
		if len(batch) == 0 {
			s.records.busy = false
			s.records.mu.Unlock()
			return
		}
		s.records.mu.Unlock()
		ctx, cancel := withTimeout(context.Background(), s.clock, storeTimeout)
		if err := s.state.Record(ctx, batch...); err != nil {
			s.log.Warn("runs not recorded in the shared history", "runs", len(batch), "task", batch[0].Task, "fire", batch[0].Fire, "err", err)
		}
		cancel()
	}
}
