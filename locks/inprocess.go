package locks

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/internal/leasestate"
)

// processTable is the lease table that every InProcessDriver on the real
// clock shares, so that two schedulers in one process never both hold a key.
var processTable = newTable(clockwork.NewRealClock(), true)

// An InProcessDriver is a Driver whose leases live in this process's memory.
// It is correct on one node and meaningless across nodes. Every driver made
// by NewInProcessDriver without options shares one process-wide lease table.
// Expired leases simply expire: there is no sweeper goroutine.
type InProcessDriver struct {
	t *table
}

// An InProcessOption configures an InProcessDriver.
type InProcessOption func(*InProcessDriver)

// WithClock makes the driver read time from c. A driver with its own clock
// gets its own lease table, since times from different clocks cannot be
// compared; drivers share a table only on the real clock. It is meant for
// tests with a fake clock.
func WithClock(c clockwork.Clock) InProcessOption {
	return func(d *InProcessDriver) {
		if c != nil {
			d.t = newTable(c, false)
		}
	}
}

// NewInProcessDriver returns a driver on the process-wide lease table.
func NewInProcessDriver(opts ...InProcessOption) *InProcessDriver {
	d := &InProcessDriver{t: processTable}
	for _, o := range opts {
		o(d)
	}
	return d
}

// table is a lease table: the current lease of each key, and the waiters
// watching keys.
type table struct {
	clock clockwork.Clock
	// real reports that clock is the real one, read with time.Since: it
	// reads the monotonic clock only, where clockwork's Since reads the
	// wall clock too, at twice the cost.
	real bool
	// base is the table's epoch: times in the table are durations since
	// base. A time plus a TTL of at most MaxTTL cannot overflow until the
	// table is 291 years old.
	base time.Time

	mu      sync.Mutex                          // protects the fields below, every slot and every lease's mutable fields
	keys    map[string]*slot                    // each key's latest lease and waiters; a free slot stays until a sweep
	claims  map[string]claimRecord              // the latest claim of each key; it may have expired
	groups  map[string]map[string]time.Duration // Membership: each group's members, until when (since base)
	last    uint64                              // the last fencing token issued
	sweepAt int                                 // len(keys)+len(claims) at which expired entries are dropped
}

// A slot is a key's entry in the table. It outlives the leases on the key,
// so that a key taken again finds its slot in one map lookup and a release
// needs none.
type slot struct {
	t      *table
	key    string
	holder *inProcessLease // the latest lease; nil once released; it may have expired
	w      *watch          // the waiters to wake when the key is released; nil if none
}

// claimRecord is the latest claim of a key.
type claimRecord struct {
	seq     int64
	expires time.Duration // since table.base
}

// minSweep is the smallest table that Acquire sweeps. Sweeping whenever the
// table doubles keeps the cost per Acquire constant and bounds the leases of
// keys that expired and were never taken again.
const minSweep = 64

type watch struct {
	ch chan struct{}
	n  int // watchers that have not stopped
}

func newTable(c clockwork.Clock, real bool) *table {
	return &table{clock: c, real: real, base: c.Now(), keys: map[string]*slot{},
		claims: map[string]claimRecord{}, groups: map[string]map[string]time.Duration{}, sweepAt: minSweep}
}

// now returns the time since t.base on t's clock.
func (t *table) now() time.Duration {
	if t.real {
		return time.Since(t.base)
	}
	return t.clock.Since(t.base)
}

// Acquire implements Driver.
func (d *InProcessDriver) Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	if err := Check(ctx, key, ttl); err != nil {
		return nil, err
	}
	return d.acquireClaim(key, ttl, nil)
}

// Claim implements Claimer.
func (d *InProcessDriver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	if err := CheckClaim(ctx, key, seq, ttl); err != nil {
		return false, err
	}
	t := d.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claim(now, key, seq, ttl), nil
}

// AcquireClaims implements ClaimAcquirer, each fire under one hold of the
// table's mutex.
func (d *InProcessDriver) AcquireClaims(ctx context.Context, fires []FireLock) []FireLease {
	out := make([]FireLease, len(fires))
	for i, f := range fires {
		if out[i].Err = CheckFireLock(ctx, f); out[i].Err == nil {
			out[i].Lease, out[i].Err = d.acquireClaim(f.Key, f.TTL, &f.Claim)
		}
	}
	return out
}

// acquireClaim acquires key and, with c, claims it as AcquireClaims does.
func (d *InProcessDriver) acquireClaim(key string, ttl time.Duration, c *FireClaim) (Lease, error) {
	t := d.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c != nil {
		if cur, ok := t.claims[c.Key]; ok && now < cur.expires && cur.seq >= c.Seq {
			return nil, fmt.Errorf("%w: claim %q of %d", ErrClaimed, c.Key, c.Seq)
		}
	}
	s := t.keys[key]
	if s == nil {
		s = &slot{t: t, key: key}
		t.keys[key] = s
	} else if s.holder != nil && now < s.holder.expires {
		if c != nil && c.EvenIfHeld {
			t.claim(now, c.Key, c.Seq, c.TTL)
		}
		return nil, fmt.Errorf("%w: key %q is held", ErrNotAcquired, key)
	}
	t.last++
	l := &inProcessLease{s: s, token: t.last, expires: now + ttl}
	s.holder = l
	if c != nil {
		t.claim(now, c.Key, c.Seq, c.TTL)
	}
	if len(t.keys)+len(t.claims) >= t.sweepAt {
		t.sweep(now)
	}
	return l, nil
}

// claim records seq under key unless a live claim of seq or higher is
// there, and reports whether it did. t.mu must be held.
func (t *table) claim(now time.Duration, key string, seq int64, ttl time.Duration) bool {
	if cur, ok := t.claims[key]; ok && now < cur.expires && cur.seq >= seq {
		return false
	}
	t.claims[key] = claimRecord{seq: seq, expires: now + ttl}
	if len(t.keys)+len(t.claims) >= t.sweepAt {
		t.sweep(now)
	}
	return true
}

// String describes the driver for logs.
func (d *InProcessDriver) String() string { return "locks.InProcessDriver (this process only)" }

// Watch implements Watcher: the channel closes when key is released.
func (d *InProcessDriver) Watch(key string) (<-chan struct{}, func()) {
	t := d.t
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.keys[key]
	if s == nil {
		s = &slot{t: t, key: key}
		t.keys[key] = s
	}
	w := s.w
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		s.w = w
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if w.n--; w.n == 0 && s.w == w {
				s.w = nil
			}
		})
	}
}

// sweep forgets every expired lease and claim, and the slots that then
// hold neither a lease nor waiters, and sets the next sweep's size. Expired
// entries count for nothing whether they are in the table or not. t.mu
// must be held.
func (t *table) sweep(now time.Duration) {
	for key, s := range t.keys {
		if (s.holder == nil || now >= s.holder.expires) && s.w == nil {
			delete(t.keys, key)
		}
	}
	for key, c := range t.claims {
		if now >= c.expires {
			delete(t.claims, key)
		}
	}
	t.sweepAt = max(minSweep, 2*(len(t.keys)+len(t.claims)))
}

// free forgets the slot's lease and wakes its watchers. t.mu must be held.
func (s *slot) free() {
	s.holder = nil
	if s.w != nil {
		close(s.w.ch)
		s.w = nil
	}
}

type inProcessLease struct {
	s     *slot
	token uint64

	// Guarded by t.mu.
	state   leasestate.State
	expires time.Duration // since t.base
	// done is made by the first call to Done. Few callers use Done, so it
	// is kept out of the lease itself.
	done *leasestate.Done
}

// Key implements Lease.
func (l *inProcessLease) Key() string { return l.s.key }

// Token implements Lease.
func (l *inProcessLease) Token() uint64 { return l.token }

// live reports whether l is the key's current, unexpired lease. t.mu must be held.
func (l *inProcessLease) live(now time.Duration) bool {
	return l.state == leasestate.Held && l.s.holder == l && now < l.expires
}

// Extend implements Lease.
func (l *inProcessLease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := Check(ctx, l.s.key, ttl); err != nil {
		return err
	}
	t := l.s.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !l.live(now) {
		return l.lose()
	}
	l.expires = now + ttl
	if l.done != nil {
		l.done.Reset(ttl)
	}
	return nil
}

// Release implements Lease.
func (l *inProcessLease) Release(context.Context) error {
	t := l.s.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.state == leasestate.Released {
		return nil
	}
	if !l.live(now) {
		return l.lose()
	}
	l.state = leasestate.Released
	l.finish()
	return nil
}

// lose marks a held l as lost and returns ErrLeaseLost. A released lease
// stays released, so that its holder's next Release still returns nil.
// t.mu must be held.
func (l *inProcessLease) lose() error {
	if l.state == leasestate.Held {
		l.state = leasestate.Lost
	}
	l.finish()
	return fmt.Errorf("%w: key %q token %d", ErrLeaseLost, l.s.key, l.token)
}

// finish closes l's Done channel and, if l still holds its key's table
// entry, frees the key and wakes its watchers. t.mu must be held.
func (l *inProcessLease) finish() {
	if l.done != nil {
		l.done.Close()
	}
	if l.s.holder == l {
		l.s.free()
	}
}

// Done implements Lease.
func (l *inProcessLease) Done() <-chan struct{} {
	t := l.s.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.done == nil {
		l.done = new(leasestate.Done)
	}
	return l.done.Chan(t.clock, l.live(now), l.expires-now, l.expire)
}

// expire runs at l's local expiry, or later if l was extended meanwhile.
func (l *inProcessLease) expire() {
	t := l.s.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !l.done.Armed() {
		return
	}
	if l.live(now) {
		l.done.Reset(l.expires - now)
		return
	}
	l.finish()
}
