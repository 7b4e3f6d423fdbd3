// Package redislocks is a locks.Driver on Redis: it makes a locked task
// single-executor across every node that shares one Redis (a single server,
// a Sentinel-managed master, or a Cluster), as long as the server that
// decides a key keeps its leases. A failover to a replica may not: see
// Failover.
//
// # Operations
//
// Each operation is one Lua script, so one round trip. Acquire is GET of
// the lock key, then on a free key TIME, SET of the token counter (KEEPTTL,
// reading the old value back in the same command; PEXPIRE when the counter
// was missing) and SET PX of the lease; on a held key it only marks the
// lease (APPEND or SETRANGE of one byte) the first time a caller of a kind
// is refused. Release is GET and DEL (or SET of a handoff reservation, see
// Fairness) of the lock key, LPUSH and PTTL of the tombstone (PEXPIRE when
// less than a minute of it is left, LTRIM once it holds 16 entries), and
// PUBLISH only when someone waited. Extend is GET and PEXPIRE. An
// uncontended Acquire and Release cost 10 server commands in all, the two
// scripts included (INFO commandstats counts both), plus an LTRIM every 8th
// release of a key. They are cheap ones (no string of several leases read
// and rewritten, no string.format): redis-server runs about 100,000
// instructions for the cycle, bsm/redislock's takes 56,000 (see
// BENCHMARKS.md, Redis driver). A NOSCRIPT reply (the script cache was
// emptied) costs one more round trip, once.
// AcquireClaims (locks.ClaimAcquirer: how the scheduler takes the locked
// fires due at one instant) is Acquire's script preceded by GET of the
// claim key and followed by SET PX of the claim, for each fire, in one
// script: one round trip for up to 256 fires on a *redis.Client (one per
// fire with Options.MinReplicas, each followed by WAIT). On a Cluster or a
// Ring the claim key and the lock key may live on different servers, so
// there each fire is Acquire, then Claim (locks.AcquireThenClaim).
//
// # Retries
//
// go-redis retries a command whose reply was lost (a connection closed or
// reset after the command was sent), up to the client's MaxRetries (3 by
// default), so a script may run twice for one call. Each call answers what
// its first attempt did:
//
//   - Acquire sends a nonce made for the call, and the lock's value carries
//     it: a retry that finds its own nonce answers the token its first
//     attempt minted, instead of ErrNotAcquired. (A retry whose first
//     attempt found the key held, and that finds it free, acquires it, as a
//     call made a little later would.)
//   - Release leaves a tombstone naming the released lease: a retry that
//     finds the key gone (or taken by a successor) and its lease among the
//     tombstone's newest 8 answers nil, instead of ErrLeaseLost.
//   - Extend sets the TTL again from a later instant, which only moves
//     Redis's expiry further past the local deadline (measured from before
//     the first attempt).
//   - Claim sends a nonce made for the call, kept in the claim record
//     with the nonces of the 7 claims before: a retry that finds its own
//     nonce answers true, even once another call claimed a higher seq in
//     between; AcquireClaims one nonce per fire for both, its lease's and
//     its claim's.
//
// # Key layout
//
// For namespace ns and lock key k the driver uses
//
//	ndigo:{ns:k}:lock        the lease: "<token>:<nonce>", plus "+" once an Acquire was refused,
//	                         or "*" once an Acquire of locks.Wait was; or a handoff reservation:
//	                         "~" plus the same marks, for at most 10ms
//	ndigo:{ns:k}:token       the last token minted for k (or a later TIME); it expires
//	ndigo:{ns:k}:released    the tombstone: a list of the last 8 to 16 leases of k released by their
//	                         holders, "<token>:<nonce>" each, newest first; it expires one to two
//	                         minutes after the last release
//	ndigo:ns:released:k      the channel a release is published on (the message is the token)
//	ndigo:{ns:k}:claim       the latest claim (locks.Claimer): "<seq>:<nonce>", then the 7 claims
//	                         before it at most, newest first, each after a space; it expires
//
// A nonce is the Acquire or Claim call's own: unique per call, the same
// across the client's retries of it (see Retries). The value formats are
// internal and may change between versions. The hash tag {ns:k} keeps the
// keys of one lock in one Cluster slot for any k (it is never empty). Keys
// and channels are passed to the scripts as KEYS and ARGV, never spliced
// into script text. Namespaces are isolated: no key or channel of one
// namespace is a key or channel of another.
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
// rides out small steps back of one server's clock; it never leaks: the mint
// that finds it missing starts it with a life of max(lease TTL, 24h), and
// later mints keep that TTL rather than pay to refresh it, so a key in use
// loses its counter once a day, until its next mint starts another (the
// assumption above covers that moment as any counter loss).
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
// A TTL at or below the margin would give a lease whose Done closes before
// it opens: Acquire and Extend reject a TTL at or below [Driver.MinTTL]
// (about 2.02ms by default) with locks.ErrInvalid.
//
// # Waiting
//
// The driver implements locks.Watcher: locks.Wait wakes when the key is
// released instead of polling. A release is published only when someone
// waits: when an Acquire was refused during the lease (the refused script
// marks the lease) or the releasing driver has watchers of the key.
// Uncontended locks therefore cost no notification. All waiters of a driver
// share one Redis subscription (PSUBSCRIBE ndigo:ns:released:*) on its own
// connection, run by one goroutine that starts with the first Watch and
// stops a short while after the last watcher stops, or at once on Close. A
// release wakes one local waiter per key, in the order they watched, so 64
// waiters cost one retry per release rather than 64; polling at the wait
// step remains the fallback for expiries and lost notifications.
//
// # Fairness
//
// A releaser does not take a key back from callers that waited for it. The
// rule: when a caller of locks.Wait was refused during a lease, the lease's
// Release does not free the key but reserves it, for at most 10ms, for
// callers that have waited (locks.Wait's attempts after it was woken or
// polled, see locks.WithWaiting). Until one of them takes it, every other
// Acquire is refused as if the key were held: plain Acquire calls, and the
// first attempts of locks.Wait, the releaser's next one among them, which
// then wait in turn. A reservation that refused a caller passes its mark to
// the lease of the waiter that takes it, so a queue of waiters is served
// one release after another. A reservation nobody takes (its waiters gave
// up) lapses after 10ms; a Wait it refused is woken then. Releases whose
// lease no caller of locks.Wait was refused during, and every release
// without waiters, free the key at once. Among waiters the order is the
// notification's: each driver wakes its longest-waiting watcher, and the
// first of those to reach Redis takes the key.
//
// # Requirements
//
// Redis 6.2 or later (SET with GET and KEEPTTL; a script writes after
// calling TIME); the tests run on 7.0. Use a
// maxmemory policy that does not evict lock keys (noeviction, or a
// volatile-* policy only if nothing else of yours has a TTL). go-redis
// ignores context deadlines unless the client has ContextTimeoutEnabled;
// without it, the client's read and write timeouts bound each operation.
package redislocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/drift"
	"github.com/ndigo/ndigo/internal/namespace"
	"github.com/ndigo/ndigo/internal/remotelease"
	"github.com/ndigo/ndigo/internal/watchhub"
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

// handoffTTL bounds a handoff reservation (see Fairness): far longer than a
// notified waiter takes to come back on a healthy link, and short, because a
// reservation whose waiters gave up keeps the key from everyone until it
// lapses. (The token counter's and the tombstone's lives are the scripts'
// own: see acquire.lua and release.lua.) A variable only for tests
// (LongHandoff).
var handoffTTL = 10 * time.Millisecond

// A Driver is a locks.Driver, locks.Watcher, locks.ClaimAcquirer,
// locks.Membership and locks.MinTTLer on Redis. Make one with New;
// it is safe for concurrent use.
type Driver struct {
	client   Client
	ns       string
	clock    clockwork.Clock
	margin   drift.Margin
	channels string // prefix of the release channels: ndigo:ns:released:
	hub      *watchhub.Hub
	nonce    string        // random prefix of the nonces of this driver's calls
	calls    atomic.Uint64 // numbers the calls that carry a nonce
	replicas *replicaSync  // nil unless Options.MinReplicas is set
	single   bool          // Client is a *redis.Client: every key on one server
}

var (
	_ locks.Driver        = (*Driver)(nil)
	_ locks.Watcher       = (*Driver)(nil)
	_ locks.ClaimAcquirer = (*Driver)(nil)
	_ locks.MinTTLer      = (*Driver)(nil)
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
	margin, err := drift.FromOptions("redislocks", opts.DriftRatio, opts.MinDrift)
	if err != nil {
		return nil, err
	}
	replicas, err := newReplicaSync(opts)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		client:   opts.Client,
		ns:       opts.Namespace,
		clock:    opts.Clock,
		channels: "ndigo:" + opts.Namespace + ":released:",
		nonce:    strconv.FormatUint(rand.Uint64(), 36) + ".",
		replicas: replicas,
	}
	_, d.single = opts.Client.(*redis.Client)
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	d.margin = margin
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sub := &subscriber{client: d.client, prefix: d.channels, log: log}
	d.hub = watchhub.New(sub.listen)
	sub.hub = d.hub
	return d, nil
}

func checkNamespace(ns string) error {
	if err := CheckNamespace(ns); err != nil {
		return fmt.Errorf("%w: Options.Namespace %q %v", ErrInvalidNamespace, ns, err)
	}
	return nil
}

// CheckNamespace says why ns cannot be a namespace, or returns nil: a
// namespace is 1 to 64 bytes of A-Z, a-z, 0-9, '_', '.' and '-', so that
// it can neither be empty nor reach into another namespace's keys (':',
// '{', '}' and spaces are refused). New applies it to Options.Namespace.
func CheckNamespace(ns string) error { return namespace.Check(ns) }

// CheckURL says why go-redis cannot parse url (redis.ParseURL), or returns
// nil. The reason never quotes the URL: go-redis's own errors may quote any
// part of it, the password included.
func CheckURL(url string) error {
	if _, err := redis.ParseURL(url); err != nil {
		return errors.New("go-redis cannot parse it: check the scheme (redis:// or rediss://), the host and port, " +
			"the /database number, and that special characters in the password are percent-escaped")
	}
	return nil
}

// Namespace returns the driver's namespace.
func (d *Driver) Namespace() string { return d.ns }

// String describes the driver for logs: "redislocks (namespace ns)". It
// names no address or credential.
func (d *Driver) String() string { return "redislocks (namespace " + d.ns + ")" }

// tag returns the prefix of every key of key: its hash tag.
func (d *Driver) tag(key string) string { return "ndigo:{" + d.ns + ":" + key + "}:" }

// MinTTL implements locks.MinTTLer: it returns the largest TTL whose lease
// would end locally (Done closed) no later than it starts, because the
// drift margin DriftRatio*ttl + MinDrift is at least the TTL. Acquire and
// Extend reject a TTL at or below it with locks.ErrInvalid.
func (d *Driver) MinTTL() time.Duration { return d.margin.MinTTL() }

// millis rounds ttl up to whole milliseconds, so that Redis never expires a
// key before the local deadline. It cannot overflow for any ttl, and every
// TTL that locks.Check accepts (at most locks.MaxTTL, about 3.2e10 ms) is
// far inside what Redis's PX and PEXPIRE take.
func millis(ttl time.Duration) int64 {
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// Acquire implements locks.Driver in one round trip. With
// Options.MinReplicas it grants a lease only once that many replicas have it.
func (d *Driver) Acquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.Check(ctx, key, ttl); err != nil {
		return nil, err
	}
	if err := d.margin.Check("redislocks", key, ttl); err != nil {
		return nil, err
	}
	tag := d.tag(key)
	nonce := d.newNonce()
	caller := "0"
	if waiting, waited := locks.Waiting(ctx); waited {
		caller = "2"
	} else if waiting {
		caller = "1"
	}
	sent := d.clock.Now()
	n, err := d.acquire(ctx, acquireScript, key, ttl, nonce, []string{tag + "lock", tag + "token"}, millis(ttl), nonce, caller)
	if err != nil {
		return nil, fmt.Errorf("%w: acquire key %q: %w", ErrRedis, key, withContext(ctx, err))
	}
	return d.leaseFor(key, ttl, nonce, sent, nil, n)
}

// maxFiresPerScript bounds the fires of one acquire-and-claim script: the
// server runs nothing else while a script runs, and 256 fires take it
// about a millisecond.
const maxFiresPerScript = 256

// AcquireClaims implements locks.ClaimAcquirer. On a *redis.Client (a
// single server, or a Sentinel-managed master through NewFailoverClient) it
// is one script, one round trip, for up to 256 fires (more take one more
// per 256); with Options.MinReplicas, one per fire, each followed by WAIT.
// Other clients (a Cluster, a Ring) may keep the claim key and the lock key
// on different servers, and take each fire with locks.AcquireThenClaim: two
// round trips.
func (d *Driver) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	out := make([]locks.FireLease, len(fires))
	if !d.single {
		for i, f := range fires {
			out[i].Lease, out[i].Err = locks.AcquireThenClaim(ctx, d, f.Key, f.TTL, f.Claim)
		}
		return out
	}
	var batch []int // the fires with valid input
	for i, f := range fires {
		err := locks.CheckFireLock(ctx, f)
		if err == nil {
			err = d.margin.Check("redislocks", f.Key, f.TTL)
		}
		if out[i].Err = err; err == nil {
			batch = append(batch, i)
		}
	}
	per := maxFiresPerScript
	if d.replicas != nil {
		per = 1
	}
	for len(batch) > 0 {
		n := min(len(batch), per)
		d.acquireClaims(ctx, fires, batch[:n], out)
		batch = batch[n:]
	}
	return out
}

// acquireClaims takes the fires of batch (indexes into fires, whose input
// is valid) in one acquire-and-claim script and sets their results in out.
func (d *Driver) acquireClaims(ctx context.Context, fires []locks.FireLock, batch []int, out []locks.FireLease) {
	keys := make([]string, 0, 3*len(batch))
	args := make([]any, 0, 6*len(batch))
	nonces := make([]string, len(batch))
	for j, i := range batch {
		f := fires[i]
		tag := d.tag(f.Key)
		nonces[j] = d.newNonce()
		held := "0"
		if f.Claim.EvenIfHeld {
			held = "1"
		}
		keys = append(keys, tag+"lock", tag+"token", d.tag(f.Claim.Key)+"claim")
		args = append(args, millis(f.TTL), nonces[j], "0", f.Claim.Seq, millis(f.Claim.TTL), held)
	}
	sent := d.clock.Now()
	var replies []int64
	var err error
	if d.replicas != nil { // one fire per call: the script, then WAIT
		var n int64
		f := fires[batch[0]]
		n, err = d.acquire(ctx, acquireClaimScript, f.Key, f.TTL, nonces[0], keys, args...)
		replies = []int64{n}
	} else {
		replies, err = acquireClaimScript.Run(ctx, d.client, keys, args...).Int64Slice()
		if err == nil && len(replies) != len(batch) {
			err = fmt.Errorf("the script answered %d replies for %d fires", len(replies), len(batch))
		}
	}
	for j, i := range batch {
		f := fires[i]
		if err != nil {
			out[i].Err = fmt.Errorf("%w: acquire key %q: %w", ErrRedis, f.Key, withContext(ctx, err))
			continue
		}
		out[i].Lease, out[i].Err = d.leaseFor(f.Key, f.TTL, nonces[j], sent, &f.Claim, replies[j])
	}
}

// leaseFor turns the reply n of an acquire script (or of one fire of the
// acquire-and-claim script, whose claim is c) sent at sent into the lease
// or the error.
func (d *Driver) leaseFor(key string, ttl time.Duration, nonce string, sent time.Time, c *locks.FireClaim, n int64) (locks.Lease, error) {
	switch {
	case n == -2:
		return nil, fmt.Errorf("%w: claim key %q of %d", locks.ErrClaimed, c.Key, c.Seq)
	case n < 0:
		// Nobody publishes when a reservation lapses untaken: wake a
		// watcher then, in case every waiter it was kept for gave up.
		d.hub.WakeAfter(key, handoffTTL)
		return nil, fmt.Errorf("%w: key %q is reserved for a caller that waited", locks.ErrNotAcquired, key)
	case n == 0:
		return nil, fmt.Errorf("%w: key %q is held", locks.ErrNotAcquired, key)
	}
	return &lease{remotelease.New("redislocks", key, uint64(n), d.clock, d.margin, sent, ttl), d,
		strconv.FormatInt(n, 10) + ":" + nonce}, nil
}

// Claim implements locks.Claimer in one round trip on
// ndigo:{ns:key}:claim. The record carries the call's nonce, so a call that
// go-redis retries after its first attempt took effect still answers true.
func (d *Driver) Claim(ctx context.Context, key string, seq int64, ttl time.Duration) (bool, error) {
	if err := locks.CheckClaim(ctx, key, seq, ttl); err != nil {
		return false, err
	}
	n, err := claimScript.Run(ctx, d.client, []string{d.tag(key) + "claim"},
		seq, millis(ttl), d.newNonce()).Int64()
	if err != nil {
		return false, fmt.Errorf("%w: claim key %q: %w", ErrRedis, key, withContext(ctx, err))
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
	return d.hub.Watch(key)
}

// Close stops the shared release subscription, if it runs, and waits for its
// goroutine to end. It does not close the Client. The driver stays usable: a
// later Watch starts the subscription again. Calling Close is optional (the
// subscription stops on its own shortly after the last watcher stops), but
// tests that check for leaked goroutines should call it.
func (d *Driver) Close() error {
	d.hub.Close()
	return nil
}
