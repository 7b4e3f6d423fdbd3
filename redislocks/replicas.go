package redislocks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/remotelease"
	"github.com/ndigo/ndigo/locks"
)

// defaultMinReplicasTimeout is how long WAIT waits for replicas when
// Options.MinReplicasTimeout is zero: far above a replica's acknowledgement
// on a healthy link (about a round trip) and below go-redis's default read
// timeout, which bounds the whole pipeline.
const defaultMinReplicasTimeout = time.Second

// replicaSync is Options.MinReplicas and its timeout, validated.
type replicaSync struct {
	n       int
	timeout time.Duration
}

// newReplicaSync validates opts' replica settings. It returns nil when
// MinReplicas is 0: then Acquire does not wait for replicas.
func newReplicaSync(opts Options) (*replicaSync, error) {
	if opts.MinReplicas < 0 {
		return nil, fmt.Errorf("%w: redislocks: Options.MinReplicas %d must not be negative", locks.ErrInvalid, opts.MinReplicas)
	}
	if opts.MinReplicasTimeout < 0 {
		return nil, fmt.Errorf("%w: redislocks: Options.MinReplicasTimeout %v must not be negative", locks.ErrInvalid, opts.MinReplicasTimeout)
	}
	if opts.MinReplicas == 0 {
		if opts.MinReplicasTimeout != 0 {
			return nil, fmt.Errorf("%w: redislocks: Options.MinReplicasTimeout %v is set but Options.MinReplicas is 0: set both, or neither", locks.ErrInvalid, opts.MinReplicasTimeout)
		}
		return nil, nil
	}
	switch opts.Client.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return nil, fmt.Errorf("%w: redislocks: Options.MinReplicas %d needs Options.Client to be a *redis.Client (also from NewFailoverClient) or a *redis.ClusterClient, not %T: WAIT must run on the connection that ran the acquire script",
			locks.ErrInvalid, opts.MinReplicas, opts.Client)
	}
	r := &replicaSync{n: opts.MinReplicas, timeout: opts.MinReplicasTimeout}
	if r.timeout == 0 {
		r.timeout = defaultMinReplicasTimeout
	}
	return r, nil
}

// waitMillis is the WAIT timeout for a lease of ttl sent on c: the
// configured timeout, but at most half the TTL, so that a granted lease
// keeps at least half of it, and at most half of what bounds the round trip
// (c's ReadTimeout, and ctx's deadline if c honours it), so that a lease too
// few replicas acknowledged is reported and given back rather than left held
// by nobody after a timeout. Never 0, which would make WAIT block until
// enough replicas answer.
func (r *replicaSync) waitMillis(ctx context.Context, c *redis.Client, ttl time.Duration) int64 {
	w := min(r.timeout, ttl/2)
	opts := c.Options()
	if opts.ReadTimeout > 0 {
		w = min(w, opts.ReadTimeout/2)
	}
	if deadline, ok := ctx.Deadline(); ok && opts.ContextTimeoutEnabled {
		w = min(w, time.Until(deadline)/2)
	}
	return max(w.Milliseconds(), 1)
}

// acquire runs script (the acquire script, or the acquire-and-claim one
// for one fire) with keys and args and returns its reply: the token, or 0 or less when
// the key is held (or the claim refused). With Options.MinReplicas set, a
// token is returned only once that many replicas acknowledged the lease;
// otherwise the lease is released and the error wraps ErrNotReplicated.
//
// WAIT blocks until the replicas acknowledged every write made so far by the
// connection it runs on (Redis keeps a per-connection replication offset),
// and a script may not call it. So the script and WAIT go out in one
// pipeline, which go-redis writes and reads on a single connection (retries
// included: a retried pipeline is resent whole on one new connection). That
// also keeps the acquisition at one round trip. A Cluster client routes a
// pipeline's commands by key, and WAIT has none, so for a Cluster the
// pipeline runs on the client of the master that owns the key's slot.
func (d *Driver) acquire(ctx context.Context, script *redis.Script, key string, ttl time.Duration, nonce string, keys []string, args ...any) (int64, error) {
	if d.replicas == nil {
		return firstReply(script.Run(ctx, d.client, keys, args...))
	}
	c, err := d.connFor(ctx, key)
	if err != nil {
		return 0, err
	}
	wait := d.replicas.waitMillis(ctx, c, ttl)
	sc, wc := evalWait(ctx, c, script, wait, d.replicas.n, keys, args...)
	reply, err := firstReply(sc)
	if err != nil || reply <= 0 {
		return reply, err
	}
	acks, err := wc.Int64()
	if err == nil && acks >= int64(d.replicas.n) {
		return reply, nil
	}
	// The lease is on the master but may be missing from the replica a
	// failover would promote: give it back instead of granting it.
	if err != nil {
		err = fmt.Errorf("%w: token %d was released: WAIT failed: %w", ErrNotReplicated, reply, err)
	} else {
		err = fmt.Errorf("%w: token %d reached %d of the %d replicas required (Options.MinReplicas) within %dms and was released",
			ErrNotReplicated, reply, acks, d.replicas.n, wait)
	}
	// Past its local deadline from the start: Release still frees the key.
	l := &lease{remotelease.New("redislocks", key, uint64(reply), d.clock, d.margin, time.Time{}, 0), d,
		strconv.FormatInt(reply, 10) + ":" + nonce}
	// A lease lost by now has expired: the key is free all the same.
	if rerr := l.Release(ctx); rerr != nil && !errors.Is(rerr, locks.ErrLeaseLost) {
		err = fmt.Errorf("%w; releasing it failed, so the key stays held by nobody until its TTL: %w", err, rerr)
	}
	return 0, err
}

// firstReply is the number a script answered: the acquire script's reply
// (a token comes as text), or the first of the acquire-and-claim script's.
func firstReply(c *redis.Cmd) (int64, error) {
	v, err := c.Result()
	if err != nil {
		return 0, err
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		v = a[0]
	}
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("redislocks: unexpected script reply %T %v", v, v)
}

// extend runs the extend script with keys and args and returns its reply: 1
// when extended, 0 when the lease was no longer the holder. With
// Options.MinReplicas, an extension that fewer replicas acknowledged returns
// an error wrapping ErrNotReplicated: a failover could promote a replica
// with the earlier expiry, so the lease must keep its earlier deadline.
// Nothing is undone: the master's longer expiry only keeps the key from
// others after the holder has stopped. As in acquire, the script and WAIT
// share one pipeline, hence one connection.
func (d *Driver) extend(ctx context.Context, key string, ttl time.Duration, keys []string, args ...any) (int64, error) {
	if d.replicas == nil {
		return extendScript.Run(ctx, d.client, keys, args...).Int64()
	}
	c, err := d.connFor(ctx, key)
	if err != nil {
		return 0, err
	}
	wait := d.replicas.waitMillis(ctx, c, ttl)
	sc, wc := evalWait(ctx, c, extendScript, wait, d.replicas.n, keys, args...)
	reply, err := sc.Int64()
	if err != nil || reply != 1 {
		return reply, err
	}
	acks, err := wc.Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: the extension was not confirmed: WAIT failed: %w; the lease keeps its earlier deadline", ErrNotReplicated, err)
	case acks < int64(d.replicas.n):
		return 0, fmt.Errorf("%w: the extension reached %d of the %d replicas required (Options.MinReplicas) within %dms; the lease keeps its earlier deadline",
			ErrNotReplicated, acks, d.replicas.n, wait)
	}
	return reply, nil
}

// connFor returns the client whose pipelines reach the master of key.
func (d *Driver) connFor(ctx context.Context, key string) (*redis.Client, error) {
	if cc, ok := d.client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, d.tag(key)+"lock")
	}
	return d.client.(*redis.Client), nil
}

// evalWait runs script and then WAIT n waitMs in one pipeline, falling back
// from EVALSHA to EVAL on NOSCRIPT as Script.Run does, and returns the two
// commands with their replies.
func evalWait(ctx context.Context, c *redis.Client, script *redis.Script, waitMs int64, n int, keys []string, args ...any) (sc, wc *redis.Cmd) {
	run := func(eval bool) (*redis.Cmd, *redis.Cmd) {
		pipe := c.Pipeline()
		var sc *redis.Cmd
		if eval {
			sc = script.Eval(ctx, pipe, keys, args...)
		} else {
			sc = script.EvalSha(ctx, pipe, keys, args...)
		}
		wc := pipe.Do(ctx, "WAIT", n, waitMs)
		_, _ = pipe.Exec(ctx) // each command carries its own error
		return sc, wc
	}
	sc, wc = run(false)
	if redis.HasErrorPrefix(sc.Err(), "NOSCRIPT") {
		sc, wc = run(true)
	}
	return sc, wc
}
