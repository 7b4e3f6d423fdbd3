// Package redislocks is a locks.Driver on Redis: it makes a locked task
// single-executor across every node that shares one Redis (a single server,
// a Sentinel-managed master, or a Cluster), as long as the server that
// decides a key keeps its leases. A failover to a replica may not: see
// Failover.
//
// # Operations
//
// Each operation is one Lua script, so one round trip: Acquire is SET NX PX
// plus minting the fencing token, Release is compare-token-and-DEL plus a
// release notification, Extend is compare-token-and-PEXPIRE. A NOSCRIPT
// reply (the script cache was emptied) costs one more round trip, once.
//
// # Key layout
//
// For namespace ns and lock key k the driver uses
//
//	ndigo:{ns:k}:lock        the lease; its value is the holder's token, plus "+" once someone waited
//	ndigo:{ns:k}:token       the last token minted for k; it expires
//	ndigo:ns:released:k      the channel a release is published on
//	ndigo:{ns:k}:claim       the latest claim (locks.Claimer): "<seq>:<nonce>"; it expires
//
// The hash tag {ns:k} keeps both keys of one lock in one Cluster slot for any
// k (it is never empty). Keys and channels are passed to the scripts as
// KEYS and ARGV, never spliced into script text. Namespaces are isolated:
// no key or channel of one namespace is a key or channel of another.
//
// # Fencing tokens
//
// A token is max(last token + 1, the Redis server's TIME in microseconds),
// minted in the acquire script. TIME carries the order, so tokens of a key
// keep increasing when the counter key is lost (a restart without
// persistence, eviction, FLUSHALL, its own TTL) or stale (failover to a
// replica that had not received the last mints). This rests on one
// assumption: the clock of the server that mints a token is not behind the
// clock that minted the previous one by more than the time between the two
// mints. Keep the servers' clocks synchronised (NTP) well within your
// failover time. The counter only separates mints within one microsecond and
// rides out small steps back of one server's clock; it expires max(lease TTL,
// 24h) after the last acquisition and never leaks.
//
// # Failover
//
// Redis replicates asynchronously, and a failover (Sentinel or Cluster)
// promotes a replica that may lack the old master's last writes. By default
// a lease granted just before a failover can therefore be lost: another node
// acquires the key on the new master while the first holder still runs,
// until the first lease's TTL ends. Tokens still increase across the
// failover (see Fencing tokens), so fenced storage refuses the first holder
// once the second has written.
//
// Options.MinReplicas closes that window for replicas that acknowledged:
// Acquire runs WAIT after the acquire script, on the same connection, and
// grants the lease only once that many replicas have it; short of them it
// releases the lease and returns ErrNotReplicated. Extend waits the same way
// and, short of replicas, keeps the lease's earlier deadline, which the
// replicas have. Sentinel promotes, among replicas of equal
// replica-priority, the one with the largest replication offset, which has
// every acknowledged lease; the lease is lost only if every replica that
// acknowledged it is unreachable at the failover (or has a lower priority
// than one that did not), which MinReplicas equal to the number of replicas
// rules out at the cost of failing acquisitions while any replica is down.
// While fewer replicas are reachable, every Acquire that takes the lease
// waits the WAIT timeout and fails. Fire claims (Claim) are not waited on:
// a claim lost in a failover lets a node that reaches the same fire after
// the lease's TTL (its clock lags that much) run that fire again.
//
// # Local expiry
//
// A lease's Done channel closes at a local monotonic deadline: the time the
// Acquire (or the last successful Extend) was sent plus the TTL, less a drift
// margin (Options.DriftRatio of the TTL plus Options.MinDrift, by default 1%
// plus 2ms). Redis cannot expire the key before the request reaches it, so a
// holder that stops when Done closes stops before Redis could hand the key to
// another node, as long as the two clocks' rates differ by less than the
// margin.
//
// # Waiting
//
// The driver implements locks.Watcher: locks.Wait wakes when the key is
// released instead of polling. A release is published only when someone
// waits: when an Acquire failed during the lease (the failing script marks
// the lease) or the releasing driver has watchers of the key. Uncontended
// locks therefore cost no notification. All waiters of a driver share one
// Redis subscription (PSUBSCRIBE ndigo:ns:released:*) on its own connection,
// run by one goroutine that starts with the first Watch and stops a short
// while after the last watcher stops, or at once on Close. A release wakes one
// local waiter per key, in the order they watched, so 64 waiters cost one
// retry per release rather than 64; polling at the wait step remains the
// fallback for expiries and lost notifications.
//
// # Requirements
//
// Redis 5.0 or later (a script writes after calling TIME); the tests run on
// 7.0. Use a
// maxmemory policy that does not evict lock keys (noeviction, or a
// volatile-* policy only if nothing else of yours has a TTL). go-redis
// ignores context deadlines unless the client has ContextTimeoutEnabled;
// without it, the client's read and write timeouts bound each operation.
package redislocks

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
)

// A Client is the part of a go-redis v9 client the driver uses: scripting
// and pattern subscriptions. *redis.Client (also from NewFailoverClient),
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all satisfy it.
// The driver borrows the client: it never closes it.
type Client interface {
	redis.Scripter
	PSubscribe(ctx context.Context, patterns ...string) *redis.PubSub
}

// Options configures a Driver made by New.
type Options struct {
	// Client is the Redis client to borrow. Required.
	Client Client
	// Namespace isolates this driver's locks from those of other
	// environments sharing the Redis. Required: 1 to 64 characters from
	// [A-Za-z0-9_.-].
	Namespace string
	// Clock measures local lease deadlines; nil means the real clock.
	Clock clockwork.Clock
	// DriftRatio is the share of a lease's TTL by which Done closes early,
	// in [0, 0.5); zero means 0.01.
	DriftRatio float64
	// MinDrift is added to the drift margin; zero means 2ms, negative is
	// invalid.
	MinDrift time.Duration
	// Logger receives warnings about the shared release subscription; nil
	// means they are dropped.
	Logger *slog.Logger
	// MinReplicas is how many replicas must hold a lease before Acquire
	// grants it, so that a failover cannot lose it: after the acquire
	// script, Acquire runs WAIT MinReplicas on the same connection, and
	// when fewer replicas acknowledge in time it releases the lease and
	// returns an error wrapping ErrNotReplicated and ErrRedis. Extend waits
	// the same way and, short of replicas, fails and keeps the earlier
	// deadline. Zero means no waiting; negative is invalid. Setting it
	// needs a *redis.Client (also from NewFailoverClient) or
	// *redis.ClusterClient as Client.
	MinReplicas int
	// MinReplicasTimeout bounds the WAIT of MinReplicas; zero means 1s.
	// Each WAIT is further capped at half the lease's TTL, half the
	// client's ReadTimeout and half the time left before the context's
	// deadline (with ContextTimeoutEnabled), so that an unacknowledged
	// lease is reported and given back, not cut off by a timeout. Negative
	// is invalid, and so is setting it without MinReplicas.
	MinReplicasTimeout time.Duration
}

const (
	defaultDriftRatio = 0.01
	defaultMinDrift   = 2 * time.Millisecond
	maxNamespaceLen   = 64
	// counterTTL is the shortest life of a token counter. A longer life puts
	// tokens further behind the clock (see the package documentation); a
	// bounded one keeps counters of keys no longer used from piling up.
	counterTTL = 24 * time.Hour
)

// A Driver is a locks.Driver and locks.Watcher on Redis. Make one with New;
// it is safe for concurrent use.
type Driver struct {
	client     Client
	ns         string
	clock      clockwork.Clock
	driftRatio float64
	minDrift   time.Duration
	channels   string // prefix of the release channels: ndigo:ns:released:
	hub        *hub
	nonce      string        // random prefix of the nonces of this driver's calls
	calls      atomic.Uint64 // numbers the calls that carry a nonce
	replicas   *replicaSync  // nil unless Options.MinReplicas is set
}

var (
	_ locks.Driver  = (*Driver)(nil)
	_ locks.Watcher = (*Driver)(nil)
	_ locks.Claimer = (*Driver)(nil)
)

// New returns a driver on opts.Client. It does not contact Redis: a bad
// address shows up as ErrRedis from the first operation.
func New(opts Options) (*Driver, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: redislocks: Options.Client must not be nil", locks.ErrInvalid)
	}
	if err := checkNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	if opts.DriftRatio < 0 || opts.DriftRatio >= 0.5 {
		return nil, fmt.Errorf("%w: redislocks: Options.DriftRatio %v must be in [0, 0.5)", locks.ErrInvalid, opts.DriftRatio)
	}
	if opts.MinDrift < 0 {
		return nil, fmt.Errorf("%w: redislocks: Options.MinDrift %v must not be negative", locks.ErrInvalid, opts.MinDrift)
	}
	replicas, err := newReplicaSync(opts)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		client:     opts.Client,
		ns:         opts.Namespace,
		clock:      opts.Clock,
		driftRatio: opts.DriftRatio,
		minDrift:   opts.MinDrift,
		channels:   "ndigo:" + opts.Namespace + ":released:",
		nonce:      strconv.FormatUint(rand.Uint64(), 36) + ".",
		replicas:   replicas,
	}
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	if d.driftRatio == 0 {
		d.driftRatio = defaultDriftRatio
	}
	if d.minDrift == 0 {
		d.minDrift = defaultMinDrift
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d.hub = newHub(d.client, d.channels, log)
	return d, nil
}

func checkNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("%w: Options.Namespace %q must not be empty", ErrInvalidNamespace, ns)
	case len(ns) > maxNamespaceLen:
		return fmt.Errorf("%w: Options.Namespace %q is %d bytes long, the limit is %d", ErrInvalidNamespace, ns, len(ns), maxNamespaceLen)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("%w: Options.Namespace %q has %q at byte %d; only A-Z, a-z, 0-9, '_', '.' and '-' are allowed", ErrInvalidNamespace, ns, c, i)
		}
	}
	return nil
}

// Namespace returns the driver's namespace.
func (d *Driver) Namespace() string { return d.ns }

// keys returns the lock key and the token counter key of key.
func (d *Driver) keys(key string) []string {
	tag := "ndigo:{" + d.ns + ":" + key + "}:"
	return []string{tag + "lock", tag + "token"}
}

// lockKey returns the lock key of key.
func (d *Driver) lockKey(key string) string { return "ndigo:{" + d.ns + ":" + key + "}:lock" }

// margin is how much earlier than Redis a lease of ttl ends locally.
func (d *Driver) margin(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*d.driftRatio) + d.minDrift
}

// millis rounds ttl up to whole milliseconds, so that Redis never expires a
// key before the local deadline.
func millis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

func counterMillis(ttl time.Duration) int64 { return millis(max(ttl, counterTTL)) }

// Acquire implements locks.Driver in one round trip. With
// Options.MinReplicas it grants a lease only once that many replicas have it.
func (d *Driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.Check(ctx, key, ttl); err != nil {
		return nil, err
	}
	sent := d.clock.Now()
	n, err := d.acquire(ctx, key, ttl, d.keys(key), millis(ttl), counterMillis(ttl))
	if err != nil {
		return nil, fmt.Errorf("%w: acquire key %q: %w", ErrRedis, key, err)
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: key %q is held", locks.ErrNotAcquired, key)
	}
	return &lease{d: d, key: key, token: uint64(n), tokenArg: strconv.FormatInt(n, 10), deadline: sent.Add(ttl - d.margin(ttl))}, nil
}

// Claim implements locks.Claimer in one round trip on
// ndigo:{ns:key}:claim. The record carries the call's nonce, so a call that
// go-redis retries after its first attempt took effect still answers true.
func (d *Driver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	if err := locks.CheckClaim(ctx, key, seq, ttl); err != nil {
		return false, err
	}
	n, err := claimScript.Run(ctx, d.client, []string{"ndigo:{" + d.ns + ":" + key + "}:claim"},
		seq, millis(ttl), d.newNonce()).Int64()
	if err != nil {
		return false, fmt.Errorf("%w: claim key %q: %w", ErrRedis, key, err)
	}
	return n == 1, nil
}

// newNonce returns a string that no other call of any driver uses.
func (d *Driver) newNonce() string { return d.nonce + strconv.FormatUint(d.calls.Add(1), 36) }

// Watch implements locks.Watcher. The first Watch of an idle driver starts
// the shared subscription and waits (up to half a second) until Redis
// confirms it, so that a release right after Watch returns is not missed.
// Each published release wakes one watcher of the key, the longest waiting.
// A release is published if this driver had watchers of the key when the
// lease was released, or an Acquire of the key failed during the lease: so
// watch, then Acquire, then wait, as locks.Wait does. The channel may also
// close spuriously, for example after the subscription reconnects.
func (d *Driver) Watch(key string) (<-chan struct{}, func()) {
	return d.hub.watch(key)
}

// Close stops the shared release subscription, if it runs, and waits for its
// goroutine to end. It does not close the Client. The driver stays usable: a
// later Watch starts the subscription again. Calling Close is optional (the
// subscription stops on its own shortly after the last watcher stops), but
// tests that check for leaked goroutines should call it.
func (d *Driver) Close() error {
	d.hub.close()
	return nil
}
