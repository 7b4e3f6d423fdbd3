package scheduling

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// DefaultHeartbeat is how often a spreading scheduler ([Config.Spread])
// renews its membership when [Config.Heartbeat] is zero, unless a locked
// task's lock TTL is shorter than four of them: the heartbeat is then a
// quarter of the shortest lock TTL, at least [MinAutoHeartbeat], so that a
// dead owner's tasks move within their lock TTL (its membership lapses
// within three heartbeats, and the others see it at their next). The
// tasks are those the scheduler has at the time: an Add after Start and
// the stored schedules change the heartbeat when they change the tasks.
const DefaultHeartbeat = time.Second

// MinAutoHeartbeat is the shortest heartbeat that a short lock TTL makes
// ([DefaultHeartbeat]); set [Config.Heartbeat] for a shorter one.
const MinAutoHeartbeat = 100 * time.Millisecond

// MinHeartbeat and MaxHeartbeat bound [Config.Heartbeat].
const (
	MinHeartbeat = 10 * time.Millisecond
	MaxHeartbeat = time.Hour
)

// memberLife is how many heartbeat intervals a member stays in its group
// after its last heartbeat, and so how long a node's view of the group is
// trusted.
const memberLife = 3

// spread is what a scheduler keeps to spread its locked tasks over the
// live nodes of its group.
type spread struct {
	m   locks.Membership
	set time.Duration // Config.Heartbeat; 0 for the default

	view    atomic.Pointer[view] // the last heartbeat's answer; nil before the first
	failing atomic.Bool          // the last heartbeat failed
	beating atomic.Bool          // a heartbeat is out

	beats sync.WaitGroup // heartbeats in flight

	// Protected by Scheduler.mu:
	leaving  bool          // Stop is handing over: no more heartbeats
	group    string        // the group of the nodes that have the same locked tasks
	every    time.Duration // the heartbeat interval for those tasks (see regroup)
	nextBeat time.Time     // when the loop heartbeats next
	// lates are the tasks (by their flight) with late fires pending: each
	// heartbeat resumes their chains (resumeLates).
	lates map[*flight]string
}

// A view is the group's live members as one heartbeat answered.
type view struct {
	group string
	// owners are the members that may own tasks in this node's eyes: those
	// of this answer that the previous one listed too, and this node; in
	// its first view of the group, every member listed. A member that
	// joined is an owner for the others only from their next heartbeat on,
	// while it tries its share from its first view (every fire before it):
	// so the node that owned a task before keeps trying it for a heartbeat
	// after the newcomer took it, and no fire falls between the two (unless
	// their clocks and a heartbeat's latency differ by more than a
	// heartbeat interval). A newcomer does not try every fire once it has a
	// view: a fleet that starts at once would make every node try every
	// fire for a heartbeat, N times the calls, at the worst moment.
	owners  []string
	members []string  // every member listed
	at      time.Time // when the heartbeat was sent, on the scheduler's clock
	// owner caches ownerOf(owners, key) by key, shared by the consecutive
	// views with the same owners: a fire costs one lookup, not a hash per
	// member.
	owner *sync.Map
}

// ownerOf returns the owner of key among v's owners.
func (v *view) ownerOf(key string) string {
	if o, ok := v.owner.Load(key); ok {
		return o.(string)
	}
	o := ownerOf(v.owners, key)
	v.owner.Store(key, o)
	return o
}

// groupOf names the group of the nodes whose locked tasks (names, locks and
// lock TTLs) are these: nodes that run another set (a rolling deploy adding
// a task) form another group, so that no task is owned by a node that lacks
// it, and the nodes of a group have one heartbeat interval. s.mu is held.
func (s *Scheduler) groupOf() string {
	var names []string
	for _, e := range s.entries {
		if e.spec.Lock != "" {
			names = append(names, e.name+"\x00"+e.spec.Lock+"\x00"+e.spec.LockTTL.String())
		}
	}
	slices.Sort(names)
	h := fnv.New64a()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return "tasks:" + strconv.FormatUint(h.Sum64(), 16)
}

// owns reports whether this node is to try the fires of a task locked on
// key: the node that rendezvous hashing picks for the key among the owners
// of its last view; before its first view, every node, as if the scheduler
// did not spread. A node whose heartbeats fail keeps its last view: the
// others drop it from theirs within a member's life and take its tasks, so
// its own keep their owner either way, and trying every fire instead would
// multiply the work of a node that is failing because it is overloaded
// (30 nodes on 2 cores fell into that and stayed there). Tasks sharing a key
// have one owner, so they keep their registration order.
func (s *Scheduler) owns(key string) bool {
	v := s.spread.view.Load()
	if v == nil {
		return true
	}
	return v.ownerOf(key) == s.node
}

// ownerNow returns the owner of key in this node's view, "" before its
// first.
func (s *Scheduler) ownerNow(key string) string {
	v := s.spread.view.Load()
	if v == nil {
		return ""
	}
	return v.ownerOf(key)
}

// ownerOf returns the member with the highest rendezvous score for key.
func ownerOf(members []string, key string) string {
	var best string
	var top uint64
	for i, m := range members {
		if sc := score(m, key); i == 0 || sc > top || (sc == top && m < best) {
			best, top = m, sc
		}
	}
	return best
}

// score is the rendezvous score of member for key: a 64-bit hash of both,
// finalized so that the scores of one key over the members are independent.
func score(member, key string) uint64 {
	h := fnv.New64a()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(member)))
	h.Write(n[:])
	h.Write([]byte(member))
	h.Write([]byte(key))
	x := h.Sum64()
	// splitmix64's finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// beat renews this node's membership and keeps the view it answers,
// counted as a fire in flight so that Stop and the test kit wait for it. A
// node whose group changed (tasks added after Start) leaves the old one.
func (s *Scheduler) beat() {
	defer s.land()
	sp := s.spread
	defer sp.beats.Done()
	if !sp.beating.CompareAndSwap(false, true) {
		return // the last one is still out: an overloaded node or store gets no second
	}
	defer sp.beating.Store(false)
	s.mu.Lock()
	group, life := sp.group, memberLife*sp.every // read together: a change of the tasks changes both
	s.mu.Unlock()
	sent := s.clock.Now()
	// Up to a member's life: a slow answer still renews the membership and
	// tells who is there.
	ctx, cancel := withTimeout(s.acquireCtx, s.clock, life)
	defer cancel()
	if old := sp.view.Load(); old != nil && old.group != group {
		_ = sp.m.Leave(ctx, old.group, s.node) // its members drop this node within a member's life anyway
	}
	members, err := sp.m.Heartbeat(ctx, group, s.node, life)
	if err != nil {
		if !s.stopping() && !sp.failing.Swap(true) {
			s.log.Warn("membership heartbeat failed; this node keeps its last view of the group (the others take its tasks if it stays failing) until one succeeds", "group", group, "err", err)
		}
		if !s.stopping() {
			s.resumeLates() // the late fires' claims keep them once whoever owns the tasks now
		}
		return
	}
	if sp.failing.Swap(false) {
		s.log.Info("membership heartbeat works again", "group", group, "members", len(members))
	}
	v := &view{group: group, at: sent}
	prev := sp.view.Load()
	first := prev == nil || prev.group != group
	for _, m := range members {
		if m == s.node || first || slices.Contains(prev.members, m) {
			v.owners = append(v.owners, m)
		}
	}
	v.members = members
	if prev != nil && slices.Equal(prev.owners, v.owners) {
		v.owner = prev.owner
	} else {
		v.owner = new(sync.Map)
	}
	sp.view.Store(v)
	if prev == nil || prev.group != group || !slices.Equal(prev.members, members) {
		var joined, left []string
		for _, m := range members {
			if prev == nil || !slices.Contains(prev.members, m) {
				joined = append(joined, m)
			}
		}
		if prev != nil {
			for _, m := range prev.members {
				if !slices.Contains(members, m) {
					left = append(left, m)
				}
			}
		}
		s.log.Info("membership changed", "group", group, "members", len(members), "joined", joined, "left", left)
	}
	s.mu.Lock()
	taken := s.takeovers(prev, v, s.clock.Now())
	s.mu.Unlock()
	if s.stopping() {
		return
	}
	if len(taken) > 0 {
		s.log.Info("taking over the tasks of a node that left", "fires", len(taken), "members", len(members))
		s.runLates(taken)
	}
	s.resumeLates()
}

// tried notes that this node made f's lock step, or found the task busy,
// so that a takeover does not try f again.
func (s *Scheduler) tried(f *firing) {
	if f.kind == kindManual {
		return
	}
	n := f.fire.UnixNano()
	for {
		old := f.e.tried.Load()
		if n <= old || f.e.tried.CompareAndSwap(old, n) {
			return
		}
	}
}

// handOver is the start of a spreading node's Stop: the node stops its
// heartbeats, leaves its group, and goes on running its fires for two
// heartbeats, by which the others have heartbeaten, seen it gone and taken
// its tasks; so its fires due meanwhile run on time, here or there (their
// claims keep them once). A node alone in its last view, or a ctx that
// ended (a node killed), hands over nothing: it only leaves. A ctx with a
// deadline bounds the handover to a quarter of the time left, so that the
// runs keep most of it.
func (s *Scheduler) handOver(ctx context.Context) {
	sp := s.spread
	s.mu.Lock()
	sp.leaving = true
	every := sp.every
	s.mu.Unlock()
	s.leave(ctx)
	v := sp.view.Load()
	if ctx.Err() != nil || v == nil || !slices.ContainsFunc(v.members, func(m string) bool { return m != s.node }) {
		return
	}
	wait := 2 * every
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)/4)
	}
	s.log.Info("stopping: handing this node's tasks over", "wait", wait, "members", len(v.members)-1)
	select {
	case <-s.clock.After(wait):
	case <-ctx.Done():
	}
}

// leave ends this node's membership once its heartbeats have stopped, so
// that the others take its tasks at their next heartbeat (and run late the
// fires it left meanwhile) instead of when its membership lapses. ctx
// bounds it, as one heartbeat does.
func (s *Scheduler) leave(ctx context.Context) {
	sp := s.spread
	sp.beats.Wait() // a heartbeat landing after the leave would bring the node back
	s.mu.Lock()
	group, every := sp.group, sp.every
	s.mu.Unlock()
	lctx, cancel := withTimeout(context.WithoutCancel(ctx), s.clock, every)
	defer cancel()
	if err := sp.m.Leave(lctx, group, s.node); err != nil {
		s.log.Warn("leaving the membership group failed; the other nodes take this node's tasks when its membership lapses",
			"group", group, "within", memberLife*every, "err", err)
	}
}

// takeovers returns the late fires of the tasks that v gives this node
// from a member that left or died since prev, oldest first per task: the
// instants of each since the member's last heartbeat (see lateReach), at
// most maxLateFires, that this node has not tried, which the member may
// have left while this node did not own the task yet (a fire the member
// claimed, ran or was running is refused by its claim, and skipped). So a
// member that stops or dies leaves no fire unrun but those its lease or
// the claims keep. s.mu is held.
func (s *Scheduler) takeovers(prev, v *view, now time.Time) []firing {
	if prev == nil || prev.group != v.group {
		return nil
	}
	left := false // an owner of prev is gone: most heartbeats take nothing over
	for _, m := range prev.owners {
		left = left || !slices.Contains(v.members, m)
	}
	if !left {
		return nil
	}
	from := lateReach(prev, s.spread.every, now)
	var out []firing
	for _, cur := range s.entries {
		if cur.spec.Lock == "" && cur.prior == nil {
			continue
		}
		for _, f := range instantsInForce(cur, from, now, maxLateFires) {
			e, p := f.e, f.fire
			if e.spec.Lock == "" || v.ownerOf(e.spec.Lock) != s.node {
				continue
			}
			was := prev.ownerOf(e.spec.Lock)
			if was == s.node || slices.Contains(v.members, was) {
				continue
			}
			// A fire at or after e.next, while e waits in the heap, is
			// still this node's own to start (its jittered start has not
			// come): the loop dispatches it. Out of the heap, e.next is
			// the fire being dispatched, under the old view.
			if p.UnixNano() > e.tried.Load() && (e.index < 0 || e.next.IsZero() || p.Before(e.next)) {
				out = append(out, f)
			}
		}
	}
	return out
}

// lastFireInForce returns the latest instant of cur's task in [now-window,
// now] by the spec in force at it, and that spec's entry (cur, or a spec
// it replaced); a zero instant if none.
func lastFireInForce(cur *entry, now time.Time, window time.Duration) (*entry, time.Time) {
	from := now.Add(-window)
	for e := cur; e != nil; e = e.prior {
		end := now
		if !e.until.IsZero() && !e.until.After(end) {
			end = e.until.Add(-time.Nanosecond) // its fires are those before until
		}
		if end.Before(from) {
			return nil, time.Time{}
		}
		start := from
		switch {
		case e.prior != nil && e.prior.until.After(start):
			start = e.prior.until // the spec before it has the instants before
		case e.prior == nil && e.stored != nil && e.stored.From.After(start):
			start = e.stored.From // a stored schedule's instants start at its creation
		}
		if p := lastFireWithin(e.sched, end, end.Sub(start)); !p.IsZero() {
			return e, p
		}
	}
	return nil, time.Time{}
}

// checkSpread returns the error of a scheduler asked to spread on a driver
// that keeps no memberships.
func checkSpread(cfg Config) (*spread, error) {
	if !cfg.Spread {
		return nil, nil
	}
	if h := cfg.Heartbeat; h != 0 && (h < MinHeartbeat || h > MaxHeartbeat) {
		return nil, fmt.Errorf("%w: Config.Heartbeat %v must be in [%v, %v] (0 means %v, or less for short lock TTLs)",
			ErrInvalidConfig, h, MinHeartbeat, MaxHeartbeat, DefaultHeartbeat)
	}
	if cfg.Driver == nil {
		return nil, fmt.Errorf("%w: Config.Spread needs a driver that keeps memberships (locks.Membership)", ErrNoDriver)
	}
	m, ok := locks.As[locks.Membership](cfg.Driver)
	if !ok {
		return nil, fmt.Errorf("%w: Config.Spread needs a driver that keeps memberships (locks.Membership); %s does not", ErrInvalidConfig, DriverName(cfg.Driver))
	}
	return &spread{m: m, set: cfg.Heartbeat}, nil
}

// regroup derives from the tasks as they are at now (Start, an Add, a
// stored schedule created, updated or deleted) the group and the heartbeat
// interval, and has the loop heartbeat at once. Both follow the task set,
// not the tasks known at Start: a task added later with a short lock TTL
// shortens the heartbeat, and so its owner's membership life and the
// takeover's reach, so that its failover bound (four heartbeats within its
// lock TTL) holds as for a task declared in code; a deleted one lengthens
// it back. The group's name covers the lock TTLs, so the nodes that share a
// group share its interval. s.mu is held.
func (s *Scheduler) regroup(now time.Time) {
	sp := s.spread
	sp.group, sp.every, sp.nextBeat = s.groupOf(), s.heartbeat(), now
}

// heartbeat returns the heartbeat interval for the tasks added so far:
// Config.Heartbeat, else DefaultHeartbeat or a quarter of the shortest lock
// TTL, at least MinAutoHeartbeat. s.mu is held.
func (s *Scheduler) heartbeat() time.Duration {
	if s.spread.set != 0 {
		return s.spread.set
	}
	every := DefaultHeartbeat
	for _, e := range s.entries {
		if e.spec.Lock != "" {
			every = min(every, max(e.spec.LockTTL/4, MinAutoHeartbeat))
		}
	}
	return every
}
