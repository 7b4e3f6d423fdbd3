package scheduling

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/ndigo/ndigo/taskstate"
)

// recordShared adds a fire to the history the nodes share, through the
// node's recorder, with the retry that it leaves pending (nil for none);
// taken tells a run taken from the store's pending runs (a retry, a fire
// that waited), whose attempt is recorded even when it is 1. A record that the store refuses (it is down) is kept for
// the next flush (see recorder).
//
// It returns the record's sequence number, which awaitRecord takes.
//
//go:noinline
func (s *Scheduler) recordShared(e *entry, last *LastRun, retry *taskstate.Retry, taken bool) uint64 {
	r := taskstate.Run{Fire: last.Fire, Manual: last.Manual, Backfill: last.Backfill, Node: last.Node, Token: last.Token,
		Start: last.Start, Duration: last.Duration, Outcome: string(last.Outcome)}
	if (last.Attempt > 1 || taken) && !last.Backfill { // a run taken from the store replaces its placeholder
		r.Attempt = last.Attempt
	}
	if last.Err != nil {
		r.Error = last.Err.Error()
	}
	s.records.mu.Lock()
	s.records.seq++
	id := s.records.prefix + strconv.FormatUint(s.records.seq, 36)
	s.records.pending = append(s.records.pending, taskstate.TaskRun{Task: e.name, ID: id, Run: r, Retry: retry, Keep: e.historyKeep(last.Fire)})
	seq := s.records.seq
	s.records.mu.Unlock()
	s.flush()
	return seq
}

// awaitRecord waits until a Record call carried record seq (whatever it
// answered), or done closes. A locked run's lease is released only then,
// so that the node that next holds the lock finds the run in the shared
// history: a backfill takes its instant under the lock, and refuses one
// that ran (see [Scheduler.Backfill]). A record kept in the backlog (a
// call failed, and none is out) is not waited for: the store is failing,
// and the lock is not held for it.
func (s *Scheduler) awaitRecord(seq uint64, done <-chan struct{}) {
	for {
		s.records.mu.Lock()
		sent, busy, ch := s.records.sent, s.records.busy, s.records.sentCh
		if ch == nil {
			ch = make(chan struct{})
			s.records.sentCh = ch
		}
		s.records.mu.Unlock()
		if sent >= seq || !busy {
			return
		}
		select {
		case <-ch:
		case <-done:
			return
		}
	}
}

// sentUpTo notes that a Record call carried every record up to seq, and
// wakes those waiting for one of them.
func (s *Scheduler) sentUpTo(seq uint64) {
	s.records.mu.Lock()
	s.records.sent = max(s.records.sent, seq)
	ch := s.records.sentCh
	s.records.sentCh = nil
	s.records.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// flush starts a flushRecords unless one runs or nothing is pending.
func (s *Scheduler) flush() {
	s.records.mu.Lock()
	start := !s.records.busy && len(s.records.pending) > 0
	if start {
		s.records.busy = true
	}
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
//
// A Record call that fails (the store is down) keeps its records, up to
// maxBacklog of them: they go with the next flush, which the next record
// or the next poll that reaches the store starts. The fires that failed
// while the store was down thus appear in the history once it is back, on
// every node that saw them fail. Stop tries once more, for up to two
// seconds, and logs how many it could not record; a node that dies first
// loses its own.
type recorder struct {
	mu      sync.Mutex
	pending []taskstate.TaskRun
	busy    bool   // a flushRecords runs
	dropped uint64 // records dropped from a full backlog
	// prefix and seq make each record's ID (taskstate.TaskRun.ID), so that
	// a batch sent again after a failed call is recorded once.
	prefix string
	seq    uint64
	// sent is the newest seq that a Record call carried, answered or
	// failed; sentCh is closed when it moves on (nil until awaited).
	sent   uint64
	sentCh chan struct{}

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

// maxBacklog bounds the records a node keeps while the store refuses them:
// at a thousand fires a second, a few seconds of an outage; at one a
// minute, a week. The oldest go first.
const maxBacklog = 10_000

// flushRecords records the pending runs until none is left, or until a call
// fails: the batch then waits for the next flush.
func (s *Scheduler) flushRecords() {
	defer s.land()
	for {
		s.linger()
		s.records.mu.Lock()
		batch, upTo := s.records.pending, s.records.seq // every record pending is in the batch
		s.records.pending = nil
		if len(batch) == 0 {
			s.records.busy = false
			s.records.mu.Unlock()
			return
		}
		s.records.mu.Unlock()
		ctx, cancel := withTimeout(context.Background(), s.clock, storeTimeout)
		err := s.state.Record(ctx, batch...)
		cancel()
		if err != nil {
			s.requeue(batch, err) // no flush is out from here: awaitRecord waits no more
			s.sentUpTo(upTo)
			return
		}
		s.sentUpTo(upTo)
		if s.recordFailing.Swap(false) {
			s.log.Info("fires recorded in the shared history again", "records", len(batch))
		}
	}
}

// requeue puts back a batch that a failed Record call did not record, ahead of
// the records that came since, dropping the oldest beyond maxBacklog.
func (s *Scheduler) requeue(batch []taskstate.TaskRun, err error) {
	s.records.mu.Lock()
	all := append(batch, s.records.pending...)
	var dropped int
	if len(all) > maxBacklog {
		dropped = len(all) - maxBacklog
		all = all[dropped:]
		s.records.dropped += uint64(dropped)
	}
	s.records.pending = all
	s.records.busy = false
	kept := len(all)
	s.records.mu.Unlock()
	switch {
	case dropped > 0:
		s.log.Error("fire records dropped: the shared history is unreachable and the backlog is full",
			"dropped", dropped, "kept", kept, "err", err)
	case !s.recordFailing.Swap(true):
		// Once per outage: every fire retries.
		s.log.Warn("fires not recorded in the shared history; kept for the next try", "records", kept,
			"task", batch[0].Task, "fire", batch[0].Fire.UTC(), "err", err)
	}
}

// backlog returns how many records wait for the store.
func (s *Scheduler) backlog() int {
	s.records.mu.Lock()
	defer s.records.mu.Unlock()
	return len(s.records.pending)
}

// stopFlush is how long Stop's last try to record the backlog may take.
const stopFlush = 2 * time.Second

// logLostRecords tries, when Stop returns, once more to record what the
// store refused (it may be back, with no poll since to say so), within
// Stop's context, and logs the records it still did not take: they are
// lost with the process.
func (s *Scheduler) logLostRecords(stop context.Context) {
	s.records.mu.Lock()
	batch := s.records.pending
	s.records.pending = nil
	s.records.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// Real time: a test's fake clock must not hold Stop.
	ctx, cancel := context.WithTimeout(stop, stopFlush)
	defer cancel()
	if err := s.state.Record(ctx, batch...); err != nil {
		s.log.Error("fire records lost at stop: the shared history did not take them", "records", len(batch), "err", err)
		return
	}
	s.log.Info("fires recorded in the shared history at stop", "records", len(batch))
}
