package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
)

// errLost is what a caller whose reply an interceptor took gets: clientv3
// does not resend a mutating call that failed with it.
var errLost = status.Error(codes.Unavailable, "etcdlocks test: reply lost")

// A hijacker takes the next call that its armed matcher accepts: instead
// of the call, it runs the armed fault, which may send the request (now,
// later, or not at all) and says what the caller gets back.
type hijacker struct {
	mu    sync.Mutex
	match func(req any) bool
	fault func(ctx context.Context, send func(context.Context) error) error
}

func (h *hijacker) arm(match func(req any) bool, fault func(ctx context.Context, send func(context.Context) error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.match, h.fault = match, fault
}

func (h *hijacker) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	h.mu.Lock()
	fault := h.fault
	if fault == nil || !h.match(req) {
		fault = nil
	} else {
		h.match, h.fault = nil, nil
	}
	h.mu.Unlock()
	if fault == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return fault(ctx, func(ctx context.Context) error { return invoker(ctx, method, req, reply, cc, opts...) })
}

// A fault that runs the call and then loses its reply.
func replyLost(ctx context.Context, send func(context.Context) error) error {
	if err := send(ctx); err != nil {
		panic(fmt.Sprintf("the call whose reply the test loses failed: %v", err))
	}
	return errLost
}

// ctxEnded returns a fault that runs the call and then ends the caller's
// context with cancel, as a deadline that passes just after the commit.
func ctxEnded(cancel context.CancelFunc) func(context.Context, func(context.Context) error) error {
	return func(ctx context.Context, send func(context.Context) error) error {
		if err := send(ctx); err != nil {
			panic(fmt.Sprintf("the call whose context the test ends failed: %v", err))
		}
		cancel()
		return status.FromContextError(ctx.Err()).Err()
	}
}

// lockMove matches the transaction that moves a lock key to another etcd
// lease: it compares the key's create revision and value (and no lease)
// and puts the key on a lease.
func lockMove(req any) bool {
	r, ok := req.(*pb.TxnRequest)
	if !ok || len(r.Success) != 1 || r.Success[0].GetRequestPut().GetLease() == 0 ||
		!strings.Contains(string(r.Success[0].GetRequestPut().GetKey()), "/lock/") {
		return false
	}
	var targets []pb.Compare_CompareTarget
	for _, c := range r.Compare {
		targets = append(targets, c.Target)
	}
	return slices.Contains(targets, pb.Compare_CREATE) && slices.Contains(targets, pb.Compare_VALUE) &&
		!slices.Contains(targets, pb.Compare_LEASE)
}

// writes reports whether the transaction req puts a key containing part,
// in any branch, nested or not.
func writes(part string) func(req any) bool {
	var in func(r *pb.TxnRequest) bool
	in = func(r *pb.TxnRequest) bool {
		for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
			for _, op := range ops {
				if strings.Contains(string(op.GetRequestPut().GetKey()), part) ||
					op.GetRequestTxn() != nil && in(op.GetRequestTxn()) {
					return true
				}
			}
		}
		return false
	}
	return func(req any) bool {
		r, ok := req.(*pb.TxnRequest)
		return ok && in(r)
	}
}

// lossyDriver returns a driver in a namespace of its own whose calls go
// through a hijacker, and another driver of the namespace.
func lossyDriver(t *testing.T) (*hijacker, *etcdlocks.Driver, *etcdlocks.Driver, string) {
	h := &hijacker{}
	ns := storeNamespace()
	return h, newDriver(t, storeClientWith(t, h.intercept), ns), newDriver(t, etcdtest.Start(t).Client(), ns), ns
}

// keyLeaseTTL returns the remaining TTL, in seconds, of the etcd lease that
// lock key of namespace ns is on.
func keyLeaseTTL(t *testing.T, ns, key string) int64 {
	t.Helper()
	c := etcdtest.Start(t).Client()
	ctx := context.Background()
	resp, err := c.Get(ctx, "ndigo/"+ns+"/lock/k/"+key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get of the lock key = %v, %v; want the key", resp, err)
	}
	ttl, err := c.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	return ttl.TTL
}

// mustBeHeld fails t unless Acquire of key through d finds it held.
func mustBeHeld(t *testing.T, d locks.Driver, key, when string) {
	t.Helper()
	if l, err := d.Acquire(context.Background(), key, time.Minute); !errors.Is(err, locks.ErrNotAcquired) {
		if err == nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("Acquire %s = %v, want ErrNotAcquired: the holder's key is free", when, err)
	}
}

// mustBeFree fails t unless Acquire of key through d gets it (and gives it back).
func mustBeFree(t *testing.T, d locks.Driver, key, when string) {
	t.Helper()
	l, err := d.Acquire(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatalf("Acquire %s = %v, want the lease", when, err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// An Extend to a longer TTL moves the key to a new etcd lease. Whatever
// becomes of that move's transaction (committed with its reply lost,
// committed as the call's context ends, never sent, or sent after the
// Extend gave up on it), the key stays held by its holder and by no one
// else, the lease's etcd lease is the one the key is on (a later Extend
// keeps it, a Release frees it), and a committed move counts as the
// Extend it was. Revoking the new etcd lease after a lost reply deleted
// the key under its live holder: another node acquired it.
func TestExtendWhoseMoveIsLostKeepsTheKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed bool
		fault     func(late *func(context.Context) error, cancel context.CancelFunc) func(context.Context, func(context.Context) error) error
	}{
		{"reply lost", true, func(*func(context.Context) error, context.CancelFunc) func(context.Context, func(context.Context) error) error {
			return replyLost
		}},
		{"context ended", true, func(_ *func(context.Context) error, cancel context.CancelFunc) func(context.Context, func(context.Context) error) error {
			return ctxEnded(cancel)
		}},
		{"not sent", false, func(*func(context.Context) error, context.CancelFunc) func(context.Context, func(context.Context) error) error {
			return func(context.Context, func(context.Context) error) error { return errLost }
		}},
		{"sent late", false, func(late *func(context.Context) error, _ context.CancelFunc) func(context.Context, func(context.Context) error) error {
			return func(_ context.Context, send func(context.Context) error) error { *late = send; return errLost }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, d, other, ns := lossyDriver(t)
			ctx := context.Background()
			l, err := d.Acquire(ctx, "payroll", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var late func(context.Context) error
			ectx, cancel := context.WithCancel(ctx)
			defer cancel()
			h.arm(lockMove, tc.fault(&late, cancel))
			err = l.Extend(ectx, 2*time.Minute)
			switch {
			case tc.committed && err != nil && !errors.Is(err, etcdlocks.ErrEtcd):
				t.Fatalf("Extend whose move committed unseen = %v, want nil or ErrEtcd", err)
			case !tc.committed && !errors.Is(err, etcdlocks.ErrEtcd):
				t.Fatalf("Extend whose move was not applied = %v, want ErrEtcd", err)
			}
			if late != nil {
				_ = late(ctx) // refused, or failing: its lease is revoked
			}
			mustBeHeld(t, other, "payroll", "after the Extend")
			select {
			case <-l.Done():
				t.Fatal("the lease's Done closed, yet its key is held")
			default:
			}
			if got := keyLeaseTTL(t, ns, "payroll"); tc.committed && err == nil && got <= 60 {
				t.Fatalf("the key's etcd lease has %d s left after an Extend to 2 minutes answered nil", got)
			}
			if err := l.Extend(ctx, 2*time.Minute); err != nil {
				t.Fatalf("the next Extend = %v, want nil", err)
			}
			if got := keyLeaseTTL(t, ns, "payroll"); got <= 60 {
				t.Fatalf("the key's etcd lease has %d s left after an Extend to 2 minutes", got)
			}
			mustBeHeld(t, other, "payroll", "after the next Extend")
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			mustBeFree(t, other, "payroll", "after the Release")
		})
	}
}

// A Release that comes while an Extend moves the key to a new etcd lease
// frees the key: it revokes the lease the key is on once the move ended.
// Revoking the lease the key was on before the move left the key on the
// new one, held by no one for the longer TTL.
func TestReleaseDuringAnExtendsMoveFreesTheKey(t *testing.T) {
	h, d, other, _ := lossyDriver(t)
	ctx := context.Background()
	l, err := d.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	etcdlocks.OnWait(t, func() { waiting <- struct{}{} })
	released := make(chan error, 1)
	h.arm(lockMove, func(ctx context.Context, send func(context.Context) error) error {
		err := send(ctx)
		go func() { released <- l.Release(context.Background()) }()
		select {
		case <-waiting: // the Release waits for this Extend
		case err := <-released: // or it went ahead
			released <- err
		}
		return err
	})
	if err := l.Extend(ctx, 2*time.Minute); err != nil && !errors.Is(err, locks.ErrLeaseLost) {
		t.Fatalf("Extend with a Release during its move = %v, want nil or ErrLeaseLost", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("Release during an Extend's move = %v, want nil", err)
	}
	mustBeFree(t, other, "payroll", "after the Release")
}

// A claim whose transaction committed but whose reply was lost (or whose
// context ended just after) stays recorded, through Claim and through
// AcquireClaims alike: a later claim of the same instant is refused. The
// lock key that AcquireClaims may have taken is free again. Revoking the
// claim's lease after the error deleted the claim key, and the fire could
// be claimed, and run, again.
func TestClaimWhoseReplyIsLostStays(t *testing.T) {
	for _, via := range []string{"Claim", "AcquireClaims"} {
		for _, how := range []string{"reply lost", "context ended"} {
			t.Run(via+"/"+how, func(t *testing.T) {
				h, d, other, _ := lossyDriver(t)
				ctx := context.Background()
				const day = 24 * time.Hour
				if ok, err := d.Claim(ctx, "payroll@c", 1, day); !ok || err != nil {
					t.Fatalf("Claim(1) = %v, %v", ok, err)
				}
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				fault := replyLost
				if how == "context ended" {
					fault = ctxEnded(cancel)
				}
				h.arm(writes("/claim/"), fault)
				var err error
				if via == "Claim" {
					_, err = d.Claim(cctx, "payroll@c", 2, day)
				} else {
					_, err = locks.AcquireClaim(cctx, d, "payroll", time.Minute, locks.FireClaim{Key: "payroll@c", Seq: 2, TTL: day})
				}
				if !errors.Is(err, etcdlocks.ErrEtcd) {
					t.Fatalf("%s whose reply was lost = %v, want ErrEtcd", via, err)
				}
				for _, seq := range []int64{2, 1} {
					if ok, err := other.Claim(ctx, "payroll@c", seq, day); ok || err != nil {
						t.Fatalf("Claim(%d) after a claim of 2 committed unseen = %v, %v; want false: the record went back", seq, ok, err)
					}
				}
				if l, err := locks.AcquireClaim(ctx, other, "payroll", time.Minute, locks.FireClaim{Key: "payroll@c", Seq: 2, TTL: day}); !errors.Is(err, locks.ErrClaimed) {
					if l != nil {
						_ = l.Release(ctx)
					}
					t.Fatalf("AcquireClaim of the fire claimed unseen = %v, want ErrClaimed: it would run twice", err)
				}
				mustBeFree(t, other, "payroll", "after the lost claim")
			})
		}
	}
}

// A thousand claimed fires of one task (every other one with its
// acquisition, as the scheduler takes them) leave etcd no lease without a
// key: the claims share the driver's claim lease. One etcd lease per claim
// left the previous one alive and empty for the claim's TTL, a day's worth
// of leases for a task that fires every second.
func TestClaimsLeaveNoEmptyLease(t *testing.T) {
	c := etcdtest.StartCluster(t, 1).Client()
	d := newDriver(t, c, "claims")
	ctx := context.Background()
	const fires, day = 1000, 24 * time.Hour
	for seq := int64(1); seq <= fires; seq++ {
		if seq%2 == 0 {
			l, err := locks.AcquireClaim(ctx, d, "payroll", time.Minute, locks.FireClaim{Key: "payroll", Seq: seq, TTL: day})
			if err != nil {
				t.Fatalf("AcquireClaim(%d): %v", seq, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		} else if ok, err := d.Claim(ctx, "payroll", seq, day); !ok || err != nil {
			t.Fatalf("Claim(%d) = %v, %v", seq, ok, err)
		}
	}
	resp, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keyless []string
	for _, ls := range resp.Leases {
		ttl, err := c.TimeToLive(ctx, ls.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		if len(ttl.Keys) == 0 && ttl.TTL > 0 {
			keyless = append(keyless, fmt.Sprintf("%x (%d s left)", ls.ID, ttl.TTL))
		}
	}
	if len(keyless) > 0 || len(resp.Leases) != 1 {
		t.Fatalf("%d etcd leases after %d claimed fires of one task, %d of them without a key (%.200v); want 1, the claims'",
			len(resp.Leases), fires, len(keyless), strings.Join(keyless, ", "))
	}
	if ok, err := d.Claim(ctx, "payroll", fires, day); ok || err != nil {
		t.Fatalf("Claim(%d) again = %v, %v; want false", fires, ok, err)
	}
}

// A heartbeat that replaces a member's key (its process restarted while
// the previous one's lease lived) and whose reply is lost leaves the
// member in the group. Revoking the new lease after the error deleted the
// member's key: the others saw it gone.
func TestHeartbeatWhoseReplyIsLostKeepsTheMember(t *testing.T) {
	h, d, other, _ := lossyDriver(t)
	ctx := context.Background()
	if _, err := other.Heartbeat(ctx, "workers", "node-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	h.arm(writes("/members/"), replyLost)
	if _, err := d.Heartbeat(ctx, "workers", "node-a", time.Minute); !errors.Is(err, etcdlocks.ErrEtcd) {
		t.Fatalf("Heartbeat whose reply was lost = %v, want ErrEtcd", err)
	}
	got, err := other.Heartbeat(ctx, "workers", "node-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "node-a") {
		t.Fatalf("members after node-a's lost heartbeat = %v, want node-a among them", got)
	}
}

// lockSettle matches the transaction that settles a lost move: it
// compares the lock key's lease.
func lockSettle(req any) bool {
	r, ok := req.(*pb.TxnRequest)
	return ok && slices.ContainsFunc(r.Compare, func(c *pb.Compare) bool { return c.Target == pb.Compare_LEASE })
}

// An Extend whose move is lost and whose settling round trip fails too
// leaves the move pending: the key stays held by its holder alone, and
// the next Extend or Release settles it first, then keeps or frees the
// key on the lease it is on. A move that reaches etcd between the
// settling put and the revoke of its lease is refused (the key's mod
// revision changed), so the revoke deletes nothing.
func TestExtendSettlesALostMove(t *testing.T) {
	notSent := func(context.Context, func(context.Context) error) error { return errLost }
	for _, tc := range []struct {
		name string
		arm  func(h *hijacker)
		then string // "Extend" or "Release"
	}{
		{"move committed, settle not sent, then Release", func(h *hijacker) {
			h.arm(lockMove, func(ctx context.Context, send func(context.Context) error) error {
				h.arm(lockSettle, notSent)
				return replyLost(ctx, send)
			})
		}, "Release"},
		{"move committed, settle not sent, then Extend", func(h *hijacker) {
			h.arm(lockMove, func(ctx context.Context, send func(context.Context) error) error {
				h.arm(lockSettle, notSent)
				return replyLost(ctx, send)
			})
		}, "Extend"},
		{"move not sent, settle's reply lost, then Release", func(h *hijacker) {
			h.arm(lockMove, func(context.Context, func(context.Context) error) error {
				h.arm(lockSettle, replyLost)
				return errLost
			})
		}, "Release"},
		{"move not sent, settle's reply lost, then Extend", func(h *hijacker) {
			h.arm(lockMove, func(context.Context, func(context.Context) error) error {
				h.arm(lockSettle, replyLost)
				return errLost
			})
		}, "Extend"},
		{"move sent after the settling put", func(h *hijacker) {
			h.arm(lockMove, func(_ context.Context, move func(context.Context) error) error {
				h.arm(lockSettle, func(ctx context.Context, settle func(context.Context) error) error {
					err := settle(ctx)
					_ = move(context.Background()) // refused: the mod revision it compares is gone
					return err
				})
				return errLost
			})
		}, "Extend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, d, other, ns := lossyDriver(t)
			ctx := context.Background()
			l, err := d.Acquire(ctx, "payroll", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tc.arm(h)
			if err := l.Extend(ctx, 2*time.Minute); !errors.Is(err, etcdlocks.ErrEtcd) {
				t.Fatalf("Extend whose move and settling failed = %v, want ErrEtcd", err)
			}
			mustBeHeld(t, other, "payroll", "after the failed Extend")
			if tc.then == "Extend" {
				if err := l.Extend(ctx, 2*time.Minute); err != nil {
					t.Fatalf("the next Extend = %v, want nil", err)
				}
				if got := keyLeaseTTL(t, ns, "payroll"); got <= 60 {
					t.Fatalf("the key's etcd lease has %d s left after an Extend to 2 minutes", got)
				}
				mustBeHeld(t, other, "payroll", "after the next Extend")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
			mustBeFree(t, other, "payroll", "after the Release")
		})
	}
}
