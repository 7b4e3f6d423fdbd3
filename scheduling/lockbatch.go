package scheduling

import (
	"sync"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// A lockBatch makes the lock steps of the locked fires dispatched together
// (one instant's, on keys no other fire of the instant shares) one driver
// call, [locks.AcquireClaims]: one round trip for them all on Redis and
// PostgreSQL, where a call per fire would queue them at the server one
// after another. Each fire joins it at its lock step, or leaves it on the
// way to a skip (not owned, paused, busy, stopping, too late); the fire
// that makes the last of them join or leave sends the call for those that
// joined, and the others wait for its answer. Fires that share a key take
// turns instead (see [turn]) and are not in a batch.
//
// The fires of a batch share their lock TTL, which bounds the call (a call
// slower than the leases it is for is of no use): an instant's fires with
// other TTLs make batches of their own (see batchByTTL), so that a task
// with a 1m TTL whose lock step takes 200ms does not lose its fires to the
// bound of a 100ms task due with it.
//
// The fires that joined release their leases only once every one of them
// has started its run or given up: a hundred releases made while the last
// runs of the instant are starting delay them by what the releases cost
// the node (at 1 node × 100 tasks on Redis, the p99 lateness went from
// 14.8 ms to 8.8 ms when they waited).
type lockBatch struct {
	ttl       time.Duration // every member's lock TTL: the call's bound
	mu        sync.Mutex
	pending   int // members that have neither joined nor left
	fires     []locks.FireLock
	out       []locks.FireLease // the call's answer, set before done closes
	done      chan struct{}
	unstarted int           // joined members that have neither started their runs nor given up
	starts    chan struct{} // closed when unstarted reaches 0 after the call
}

// A batchMember is one fire's place in a lockBatch. A nil member is a fire
// outside any batch: leave does nothing, and join is not called.
type batchMember struct {
	b     *lockBatch
	state uint8 // memberPending, memberJoined or memberLeft, under b.mu
	index int   // in b.fires, once joined
	begun bool  // a joined member's run started, or it gave up; under b.mu
}

const (
	memberPending uint8 = iota
	memberJoined
	memberLeft
)

// batchByTTL gives the fires of batch at the indexes in batched (locked
// fires on keys of their own, see dispatch) their places in lock batches:
// one batch per lock TTL among them, in batch order. A fire alone with its
// TTL makes its lock step on its own, as outside a batch. So the common
// instant, whose fires share one TTL, costs one call, and one with fires of
// j TTLs costs j calls, made at once.
func batchByTTL(batch []firing, batched []int) {
	byTTL := map[time.Duration][]int{}
	var ttls []time.Duration // in the order of their first fire
	for _, i := range batched {
		ttl := batch[i].e.spec.LockTTL
		if byTTL[ttl] == nil {
			ttls = append(ttls, ttl)
		}
		byTTL[ttl] = append(byTTL[ttl], i)
	}
	for _, ttl := range ttls {
		if in := byTTL[ttl]; len(in) > 1 {
			for j, m := range newLockBatch(len(in), ttl) {
				batch[in[j]].member = m
			}
		}
	}
}

// newLockBatch returns a batch of n members with lock TTL ttl.
func newLockBatch(n int, ttl time.Duration) []*batchMember {
	b := &lockBatch{ttl: ttl, pending: n, done: make(chan struct{}), starts: make(chan struct{})}
	members := make([]*batchMember, n)
	for i := range members {
		members[i] = &batchMember{b: b}
	}
	return members
}

// leave takes m out of its batch: its fire makes no lock step. It sends the
// batch's call if m was the last member it waited for. Calling it again,
// or after join, does nothing.
func (m *batchMember) leave(s *Scheduler) {
	if m == nil {
		return
	}
	b := m.b
	b.mu.Lock()
	if m.state != memberPending {
		b.mu.Unlock()
		return
	}
	m.state = memberLeft
	b.pending--
	last := b.pending == 0
	b.mu.Unlock()
	if last {
		b.send(s)
	}
}

// join makes fire m's lock step and answers it as locks.AcquireClaim
// would: it sends the batch's call if m was the last member it waited for,
// and waits for the call's answer otherwise.
func (m *batchMember) join(s *Scheduler, fire locks.FireLock) (locks.Lease, error) {
	b := m.b
	b.mu.Lock()
	m.state, m.index = memberJoined, len(b.fires)
	b.fires = append(b.fires, fire)
	b.pending--
	last := b.pending == 0
	b.mu.Unlock()
	if last {
		b.send(s)
	} else {
		<-b.done
	}
	r := b.out[m.index]
	if r.Err != nil {
		// No lease from the batch's step: what the fire does next (a lock
		// wait, a skip) is its own, and holds up no release of the others.
		m.started()
	}
	return r.Lease, r.Err
}

// send makes the batch's call for the fires that joined, bounded by their
// lock TTL, and wakes the members waiting for it. Every member has joined
// or left, so b.fires no longer changes.
func (b *lockBatch) send(s *Scheduler) {
	defer close(b.done)
	b.unstarted = len(b.fires) // no member marks a start before done closes
	if len(b.fires) == 0 {
		close(b.starts)
		return
	}
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, b.ttl)
	defer cancel()
	b.out = locks.AcquireClaims(ctx, s.driver, b.fires)
}

// started marks a joined member's run as started, or the member as giving
// up (it did not get the lease, or did not run). Calling it again, or on a
// member that did not join, does nothing.
func (m *batchMember) started() {
	if m == nil {
		return
	}
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.state != memberJoined || m.begun {
		return
	}
	m.begun = true
	if b.unstarted--; b.unstarted == 0 {
		close(b.starts)
	}
}

// awaitStarts waits until every joined member of m's batch has started its
// run or given up. It returns at once for a member that did not join.
func (m *batchMember) awaitStarts() {
	if m == nil || m.state != memberJoined { // state no longer changes once joined
		return
	}
	<-m.b.starts
}
