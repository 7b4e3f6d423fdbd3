package schedulingtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/locks"
)

// ErrInjected is the error of a call that a [Driver] failed on purpose.
var ErrInjected = errors.New("schedulingtest: injected fault")

// ErrReplyLost is the error of a call that took effect but whose reply a
// [Driver] dropped, as a network can: the caller cannot tell it took effect.
var ErrReplyLost = errors.New("schedulingtest: reply lost")

// An Op names a driver operation.
type Op string

// The operations a [Driver] sees.
const (
	OpAcquire Op = "acquire"
	OpClaim   Op = "claim"
	// OpAcquireClaim is locks.ClaimAcquirer's one step: Key is the lock's,
	// Claim the claim's.
	OpAcquireClaim Op = "acquire+claim"
	OpExtend       Op = "extend"
	OpRelease      Op = "release"
	OpBeat         Op = "heartbeat" // Key is the group
	OpLeave        Op = "leave"     // Key is the group
)

// A Call is one operation that a [Driver] is about to forward.
type Call struct {
	Node  string        // the node the call comes from ([Driver.Node]); "" for the root driver
	Op    Op            // the operation
	Key   string        // the lock or claim key
	TTL   time.Duration // the TTL asked for (acquire, extend, claim)
	Seq   int64         // the claim's sequence number (claim, acquire+claim)
	Token uint64        // the lease's token (extend, release)
	Claim string        // the claim's key (acquire+claim)
}

// A Fault is what a [Driver] does to one call. The zero Fault forwards the
// call untouched.
type Fault struct {
	// Delay holds the call for this long on the node's clock before it is
	// forwarded; if the call's context ends first, the call fails with the
	// context's error and has no effect.
	Delay time.Duration
	// Err fails the call with an error wrapping ErrInjected and Err, without
	// forwarding it.
	Err error
	// LoseReply forwards the call, then fails it with an error wrapping
	// ErrReplyLost: it took effect, and the caller cannot know.
	LoseReply bool
}

// A Result is what a forwarded call returned.
type Result struct {
	Call
	Fault Fault
	Token uint64 // the new lease's token (acquire, acquire+claim)
	OK    bool   // the claim was recorded (claim; acquire+claim: with the lease)
	Err   error  // the error returned to the caller
	// Members is the group's live members (heartbeat).
	Members []string
}

// A Driver wraps a locks.Driver and its leases. Before each call it asks
// its fault function what to do; after each call it tells its observer what
// happened. It forwards locks.Watcher, locks.Claimer (and locks.ClaimAcquirer), locks.Membership and
// locks.MinTTLer of the driver it wraps, and unwraps to it. Views made by [Driver.Node] share
// the fault function and observer, and name their calls. A Driver is safe
// for concurrent use.
type Driver struct {
	inner locks.Driver
	node  string
	clock clockwork.Clock
	hooks *hooks
}

type hooks struct {
	mu      sync.Mutex // protects the fields below
	fault   func(Call) Fault
	observe func(Result)
}

// NewDriver returns a Driver around inner that injects no faults until
// [Driver.SetFaults]. Delays are measured on the real clock until a view
// names its own with [Driver.Node].
func NewDriver(inner locks.Driver) *Driver {
	return &Driver{inner: inner, clock: clockwork.NewRealClock(), hooks: &hooks{}}
}

// Node returns a view of d for the node name, whose delays are measured on
// clock (nil: d's clock).
func (d *Driver) Node(name string, clock clockwork.Clock) *Driver {
	if clock == nil {
		clock = d.clock
	}
	return &Driver{inner: d.inner, node: name, clock: clock, hooks: d.hooks}
}

// SetFaults sets the function that decides each call's fault; nil injects
// none. It is called on the caller's goroutine and must be safe for
// concurrent use.
func (d *Driver) SetFaults(f func(Call) Fault) {
	d.hooks.mu.Lock()
	d.hooks.fault = f
	d.hooks.mu.Unlock()
}

// Observe sets the function told about each call once it returned; nil
// tells none. It is called on the caller's goroutine and must be safe for
// concurrent use.
func (d *Driver) Observe(f func(Result)) {
	d.hooks.mu.Lock()
	d.hooks.observe = f
	d.hooks.mu.Unlock()
}

// Unwrap returns the wrapped driver (locks.Wrapper).
func (d *Driver) Unwrap() locks.Driver { return d.inner }

// do runs one call through the fault function, forward and the observer.
func (d *Driver) do(ctx context.Context, c Call, forward func() Result) Result {
	c.Node = d.node
	d.hooks.mu.Lock()
	fault, observe := d.hooks.fault, d.hooks.observe
	d.hooks.mu.Unlock()
	var f Fault
	if fault != nil {
		f = fault(c)
	}
	r := d.apply(ctx, c, f, forward)
	r.Call, r.Fault = c, f
	if observe != nil {
		observe(r)
	}
	return r
}

func (d *Driver) apply(ctx context.Context, c Call, f Fault, forward func() Result) Result {
	if f.Delay > 0 {
		t := d.clock.NewTimer(f.Delay)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return Result{Err: fmt.Errorf("schedulingtest: %s %q delayed: %w", c.Op, c.Key, context.Cause(ctx))}
		}
	}
	if f.Err != nil {
		return Result{Err: fmt.Errorf("%w: %s %q: %w", ErrInjected, c.Op, c.Key, f.Err)}
	}
	r := forward()
	if f.LoseReply {
		r.Err = fmt.Errorf("%w: %s %q", ErrReplyLost, c.Op, c.Key)
	}
	return r
}

// Acquire implements locks.Driver.
func (d *Driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	var l locks.Lease
	r := d.do(ctx, Call{Op: OpAcquire, Key: key, TTL: ttl}, func() Result {
		var err error
		l, err = d.inner.Acquire(ctx, key, ttl)
		if err != nil {
			return Result{Err: err}
		}
		return Result{Token: l.Token()}
	})
	if r.Err != nil {
		return nil, r.Err
	}
	return &lease{Lease: l, d: d}, nil
}

// Claim implements locks.Claimer when the wrapped driver does; otherwise it
// returns an error wrapping locks.ErrInvalid.
func (d *Driver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	c, ok := locks.As[locks.Claimer](d.inner)
	if !ok {
		return false, fmt.Errorf("%w: schedulingtest: %T keeps no claims", locks.ErrInvalid, d.inner)
	}
	r := d.do(ctx, Call{Op: OpClaim, Key: key, TTL: ttl, Seq: seq}, func() Result {
		ok, err := c.Claim(ctx, key, seq, ttl)
		return Result{OK: ok, Err: err}
	})
	return r.OK && r.Err == nil, r.Err
}

// AcquireClaims implements locks.ClaimAcquirer: one call, OpAcquireClaim,
// per fire, each with its own fault, made at once; the wrapped driver
// takes each fire in one step if it is a ClaimAcquirer and in two
// otherwise (locks.AcquireClaim).
func (d *Driver) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	out := make([]locks.FireLease, len(fires))
	var wg sync.WaitGroup
	for i, f := range fires {
		wg.Go(func() {
			var l locks.Lease
			r := d.do(ctx, Call{Op: OpAcquireClaim, Key: f.Key, TTL: f.TTL, Seq: f.Claim.Seq, Claim: f.Claim.Key}, func() Result {
				var err error
				l, err = locks.AcquireClaim(ctx, d.inner, f.Key, f.TTL, f.Claim)
				if err != nil {
					return Result{Err: err}
				}
				return Result{Token: l.Token(), OK: true}
			})
			if out[i].Err = r.Err; r.Err == nil {
				out[i].Lease = &lease{Lease: l, d: d}
			}
		})
	}
	wg.Wait()
	return out
}

// Heartbeat implements locks.Membership when the wrapped driver does;
// otherwise it returns an error wrapping locks.ErrInvalid. The node making
// the call is the view's ([Driver.Node]), member the one it names.
func (d *Driver) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	m, ok := locks.As[locks.Membership](d.inner)
	if !ok {
		return nil, fmt.Errorf("%w: schedulingtest: %T keeps no memberships", locks.ErrInvalid, d.inner)
	}
	r := d.do(ctx, Call{Op: OpBeat, Key: group, TTL: ttl}, func() Result {
		members, err := m.Heartbeat(ctx, group, member, ttl)
		return Result{Members: members, Err: err}
	})
	if r.Err != nil {
		return nil, r.Err
	}
	return r.Members, nil
}

// Leave implements locks.Membership when the wrapped driver does; otherwise
// it returns an error wrapping locks.ErrInvalid.
func (d *Driver) Leave(ctx context.Context, group, member string) error {
	m, ok := locks.As[locks.Membership](d.inner)
	if !ok {
		return fmt.Errorf("%w: schedulingtest: %T keeps no memberships", locks.ErrInvalid, d.inner)
	}
	return d.do(ctx, Call{Op: OpLeave, Key: group}, func() Result {
		return Result{Err: m.Leave(ctx, group, member)}
	}).Err
}

// Watch implements locks.Watcher when the wrapped driver does; otherwise
// its channel never closes, and waiters poll.
func (d *Driver) Watch(key string) (<-chan struct{}, func()) {
	if w, ok := locks.As[locks.Watcher](d.inner); ok {
		return w.Watch(key)
	}
	return nil, func() {}
}

// MinTTL implements locks.MinTTLer: the wrapped driver's minimum, or 0.
func (d *Driver) MinTTL() time.Duration {
	if m, ok := locks.As[locks.MinTTLer](d.inner); ok {
		return m.MinTTL()
	}
	return 0
}

// lease is a lease of a Driver: its Extend and Release go through the
// driver's faults.
type lease struct {
	locks.Lease
	d *Driver
}

func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	return l.d.do(ctx, Call{Op: OpExtend, Key: l.Key(), TTL: ttl, Token: l.Token()}, func() Result {
		return Result{Err: l.Lease.Extend(ctx, ttl)}
	}).Err
}

func (l *lease) Release(ctx context.Context) error {
	return l.d.do(ctx, Call{Op: OpRelease, Key: l.Key(), Token: l.Token()}, func() Result {
		return Result{Err: l.Lease.Release(ctx)}
	}).Err
}
