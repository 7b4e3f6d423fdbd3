package etcdlocks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/internal/drift"
	"github.com/ndigo/ndigo/internal/namespace"
	"github.com/ndigo/ndigo/internal/watchhub"
	"github.com/ndigo/ndigo/locks"
)

// Options configure a Driver. Client and Namespace are required.
type Options struct {
	// Client is the etcd client; the driver never closes it.
	Client *clientv3.Client
	// Namespace isolates this driver's keys from other applications' on
	// the same etcd: every key starts with "ndigo/<namespace>/". 1 to 64
	// bytes of [A-Za-z0-9_.-].
	Namespace string
	// Clock times the leases' local deadlines; nil means the real clock.
	Clock clockwork.Clock
	// DriftRatio and MinDrift set the margin by which a lease's Done
	// closes before its TTL ends (see the package documentation, Local
	// expiry); zero means 1% and 2ms.
	DriftRatio float64
	MinDrift   time.Duration
	// Logger receives the watch's reconnections; nil discards them.
	Logger *slog.Logger
}

// A Driver hands out leases on etcd. Make one with [New]; it is safe for
// concurrent use. [Driver.Close] stops its watch.
type Driver struct {
	client *clientv3.Client
	ns     string
	prefix string // "ndigo/<ns>/"
	clock  clockwork.Clock
	margin drift.Margin
	hub    *watchhub.Hub
	nonce  string        // random prefix of this driver's holder IDs
	calls  atomic.Uint64 // numbers them

	mu      sync.Mutex                 // protects members and claims
	members map[string]memberLease     // each (group, member)'s lease, as Heartbeat last granted it
	claims  map[int64]clientv3.LeaseID // the etcd lease this driver's claims go on, per TTL in seconds
}

// A memberLease is the etcd lease of a member's key.
type memberLease struct {
	id clientv3.LeaseID
	// unsure: the put of the key on id was sent and its reply lost; the
	// next heartbeat puts it on id again rather than keep id alive.
	unsure bool
}

var (
	_ locks.Driver     = (*Driver)(nil)
	_ locks.Watcher    = (*Driver)(nil)
	_ locks.Claimer    = (*Driver)(nil)
	_ locks.MinTTLer   = (*Driver)(nil)
	_ locks.Membership = (*Driver)(nil)
)

// New returns a driver for opts.
func New(opts Options) (*Driver, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: etcdlocks: Options.Client must not be nil", locks.ErrInvalid)
	}
	if err := CheckNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: Options.Namespace %q %v", ErrInvalidNamespace, opts.Namespace, err)
	}
	margin, err := drift.FromOptions("etcdlocks", opts.DriftRatio, opts.MinDrift)
	if err != nil {
		return nil, err
	}
	d := &Driver{client: opts.Client, ns: opts.Namespace, prefix: "ndigo/" + opts.Namespace + "/", clock: opts.Clock,
		nonce: strconv.FormatUint(rand.Uint64(), 36) + ".", members: map[string]memberLease{}, claims: map[int64]clientv3.LeaseID{}}
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	d.margin = margin
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &watcher{client: d.client, prefix: d.prefix + "lock/", log: log}
	d.hub = watchhub.New(w.listen)
	w.hub = d.hub
	return d, nil
}

// CheckNamespace says why ns cannot be a namespace, or returns nil: 1 to 64
// bytes of A-Z, a-z, 0-9, '_', '.' and '-', so that no namespace's keys are
// another's ('/' is refused).
func CheckNamespace(ns string) error { return namespace.Check(ns) }

// String names the driver and its namespace, for logs: "etcdlocks
// (namespace prod)".
func (d *Driver) String() string { return "etcdlocks (namespace " + d.ns + ")" }

// MinTTL implements locks.MinTTLer: the drift margin's floor (see Local
// expiry). etcd rounds a lease up to whole seconds and to its own minimum,
// which only keeps the key longer than the holder counts on.
func (d *Driver) MinTTL() time.Duration { return d.margin.MinTTL() }

// Close stops the driver's watch; its leases stay as they are.
func (d *Driver) Close() { d.hub.Close() }

// Watch implements locks.Watcher: the channel closes when the key is
// deleted (released, or its lease expired), which one etcd watch of the
// namespace's locks reports for every waiter of the driver.
func (d *Driver) Watch(key string) (<-chan struct{}, func()) { return d.hub.Watch(name(key)) }

// maxPlainKey is the longest key kept as it is in etcd's keys; a longer one
// is kept as its SHA-256, so that a transaction naming it twice stays under
// etcd's request limit (1.5 MiB by default) whatever the key's length, up
// to locks.MaxKeyLen.
const maxPlainKey = 512

// name is how key appears in etcd's keys: "k/" and the key, or "h/" and
// its SHA-256 in hex for a key longer than maxPlainKey.
func name(key string) string {
	if len(key) <= maxPlainKey {
		return "k/" + key
	}
	sum := sha256.Sum256([]byte(key))
	return "h/" + hex.EncodeToString(sum[:])
}

// lockKey is the etcd key of lock key.
func (d *Driver) lockKey(key string) string { return d.prefix + "lock/" + name(key) }

// seconds is the etcd lease TTL for ttl: whole seconds, rounded up.
func seconds(ttl time.Duration) int64 { return int64((ttl + time.Second - 1) / time.Second) }

// grant grants an etcd lease of at least ttl, with an ID the driver
// chooses (at random, of 63 bits): it returns that ID with an error too,
// so that a caller can revoke a lease whose grant's reply was lost and
// that holds nothing. clientv3 resends a grant whose reply it did not get
// (it counts the grant as repeatable); the resend of a chosen ID finds the
// lease there (etcd's "lease already exists"), which is this call's own.
// With IDs that etcd chose, each lost reply left a lease that nobody knew,
// alive and empty for its TTL.
func (d *Driver) grant(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	id := clientv3.LeaseID(rand.Int64N(math.MaxInt64) + 1)
	_, err := clientv3.RetryLeaseClient(d.client).LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: seconds(ttl), ID: int64(id)})
	if err = clientv3.ContextError(ctx, err); err != nil && !errors.Is(err, rpctypes.ErrLeaseExist) {
		return id, err
	}
	return id, nil
}

// revoke revokes id, on a context of its own bounded by ctx's deadline or a
// second, so that a cancelled call still gives back what it granted.
func (d *Driver) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = d.client.Revoke(rctx, id)
}

// Acquire implements locks.Driver in two round trips: Grant of an etcd
// lease of the TTL (rounded up to whole seconds), then a transaction that
// puts the lock key on it if the key does not exist. The token is the
// key's create revision, which etcd's quorum orders across every key and
// member change. A held key gives the lease back (a third round trip).
func (d *Driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.Check(ctx, key, ttl); err != nil {
		return nil, err
	}
	if err := d.margin.Check("etcdlocks", key, ttl); err != nil {
		return nil, err
	}
	sent := d.clock.Now()
	id, err := d.grant(ctx, ttl)
	if err != nil {
		d.revoke(ctx, id) // granted or not, it holds nothing
		return nil, fmt.Errorf("%w: acquire key %q: granting a lease: %w", ErrEtcd, key, err)
	}
	holder := d.nonce + strconv.FormatUint(d.calls.Add(1), 36)
	k := d.lockKey(key)
	resp, err := d.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, holder, clientv3.WithLease(id))).Commit()
	if err != nil {
		// Whether it took the key or not, the key is free again: id holds
		// nothing else, and a transaction that commits after the revoke
		// finds no lease and fails.
		d.revoke(ctx, id)
		return nil, fmt.Errorf("%w: acquire key %q: %w", ErrEtcd, key, err)
	}
	if !resp.Succeeded {
		d.revoke(ctx, id)
		return nil, fmt.Errorf("%w: key %q", locks.ErrNotAcquired, key)
	}
	return d.newLease(key, holder, id, resp.Header.Revision, sent, ttl), nil
}

// Claim implements locks.Claimer: the claim key holds the latest claimed
// sequence number, zero-padded so that etcd compares it as a number, on the
// driver's claim lease of the TTL (see claimLease). A KeepAliveOnce (or a
// Grant) of that lease and one transaction (nested: create the key, or
// replace a lower claim). Nothing is given back after a failed
// transaction: the claim may have been recorded over an earlier one, and
// the lease holds other keys' claims.
func (d *Driver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	if err := locks.CheckClaim(ctx, key, seq, ttl); err != nil {
		return false, err
	}
	id, err := d.claimLease(ctx, ttl)
	if err != nil {
		return false, fmt.Errorf("%w: claim %d of key %q: the claims' lease: %w", ErrEtcd, seq, key, err)
	}
	k, v := d.prefix+"claim/"+name(key), fmt.Sprintf("%020d", seq)
	put := clientv3.OpPut(k, v, clientv3.WithLease(id))
	resp, err := d.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(put).
		Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "<", v)}, []clientv3.Op{put}, nil)).Commit()
	if err != nil {
		return false, fmt.Errorf("%w: claim %d of key %q: %w", ErrEtcd, seq, key, err)
	}
	return resp.Succeeded || resp.Responses[0].GetResponseTxn().GetSucceeded(), nil
}

// claimLease returns the etcd lease that the driver's claims of ttl go on,
// just kept alive to its full TTL (one round trip), or granted when it has
// none or the last one expired: a claim put on it then lives at least ttl
// from about its put, and at most ttl past the driver's last claim of that
// TTL. One live lease per driver and claim TTL, rather than one per claim,
// which would leave the claim's previous lease alive and empty for the
// claim's TTL (a day's worth of leases for a task that fires every
// second). Claims on it are never revoked: a claim record goes only when
// its lease expires.
func (d *Driver) claimLease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	secs := seconds(ttl)
	d.mu.Lock()
	id, ok := d.claims[secs]
	d.mu.Unlock()
	if ok {
		r, err := d.client.KeepAliveOnce(ctx, id)
		switch {
		case err == nil && r.TTL > 0:
			return id, nil
		case err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return 0, fmt.Errorf("keeping it alive: %w", err)
		}
	}
	nid, err := d.grant(ctx, ttl)
	if err != nil {
		d.revoke(ctx, nid) // granted or not, it holds nothing
		return 0, fmt.Errorf("granting it: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A concurrent call that found the lease expired too may have granted
	// another: the first one kept is the driver's; the other holds this
	// call's claims and expires at its TTL.
	if cur, found := d.claims[secs]; !found || cur == id {
		d.claims[secs] = nid
	}
	return nid, nil
}

// memberKey is the key of member in group: the group's length first, so
// that no group's prefix is another's.
func (d *Driver) memberPrefix(group string) string {
	return d.prefix + "members/" + strconv.Itoa(len(group)) + ":" + group + "/"
}

// Heartbeat implements locks.Membership: the member's key lives on an etcd
// lease of the TTL, which the next heartbeat keeps alive (one round trip)
// or, once it lapsed, grants again (two); the members are the group's keys,
// read in a second round trip (or in the same transaction as a new lease's
// put). After a heartbeat whose put failed, the next puts the key on that
// lease again.
func (d *Driver) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	if err := locks.CheckMembership(ctx, group, member, ttl, false); err != nil {
		return nil, err
	}
	p := d.memberPrefix(group)
	mk := p + member
	slot := strconv.Itoa(len(group)) + ":" + group + "/" + member
	d.mu.Lock()
	ml, ok := d.members[slot]
	d.mu.Unlock()
	var kvs *clientv3.GetResponse
	if ok && !ml.unsure {
		if _, err := d.client.KeepAliveOnce(ctx, ml.id); err == nil {
			var gerr error
			if kvs, gerr = d.client.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly()); gerr != nil {
				return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrEtcd, member, group, gerr)
			}
		} else if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrEtcd, member, group, err)
		}
	}
	for kvs == nil {
		nid := ml.id
		if !ml.unsure {
			var err error
			if nid, err = d.grant(ctx, ttl); err != nil {
				d.revoke(ctx, nid) // granted or not, it holds nothing
				return nil, fmt.Errorf("%w: heartbeat of %q in group %q: granting a lease: %w", ErrEtcd, member, group, err)
			}
		}
		resp, err := d.client.Txn(ctx).Then(clientv3.OpPut(mk, "", clientv3.WithLease(nid)),
			clientv3.OpGet(p, clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
		if ml.unsure && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			ml = memberLease{} // it expired: grant another
			continue
		}
		// No revoke after an error: the put may have committed, moving
		// the member's key off a lease that still lived (its previous
		// process's), and a revoke would take the member out of the
		// group. The next heartbeat puts the key on nid again, so that
		// nid does not stay alive and empty for its TTL.
		d.mu.Lock()
		d.members[slot] = memberLease{id: nid, unsure: err != nil}
		d.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("%w: heartbeat of %q in group %q: %w", ErrEtcd, member, group, err)
		}
		kvs = (*clientv3.GetResponse)(resp.Responses[1].GetResponseRange())
	}
	out := make([]string, 0, len(kvs.Kvs))
	for _, kv := range kvs.Kvs {
		out = append(out, string(kv.Key[len(p):]))
	}
	return out, nil // etcd returns keys in byte order: sorted
}

// Leave implements locks.Membership: it deletes the member's key and
// revokes the lease it lived on, after a failed delete too (the revoke
// deletes the key if it is still on that lease): a delete whose reply was
// lost left the lease alive and empty for its TTL.
func (d *Driver) Leave(ctx context.Context, group, member string) error {
	if err := locks.CheckMembership(ctx, group, member, 0, true); err != nil {
		return err
	}
	slot := strconv.Itoa(len(group)) + ":" + group + "/" + member
	d.mu.Lock()
	ml, ok := d.members[slot]
	delete(d.members, slot)
	d.mu.Unlock()
	_, err := d.client.Delete(ctx, d.memberPrefix(group)+member)
	if ok {
		d.revoke(ctx, ml.id)
	}
	if err != nil {
		return fmt.Errorf("%w: leave of %q from group %q: %w", ErrEtcd, member, group, err)
	}
	return nil
}
