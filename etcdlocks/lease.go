package etcdlocks

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/internal/remotelease"
)

// lease is one acquisition: the lock key, put by holder on an etcd lease.
// etcd decides whether it is still the holder (the etcd lease lives and
// holds the key); the embedded local half decides when Done closes.
type lease struct {
	*remotelease.Lease
	d      *Driver
	holder string

	// turn holds a token while an Extend or a Release talks to etcd, so
	// that a Release never revokes the etcd lease an Extend is moving the
	// key off; the fields below are that call's alone.
	turn        chan struct{}
	id          clientv3.LeaseID // the etcd lease the key is known to be on
	secs        int64            // its TTL, in seconds
	mod         int64            // the key's mod revision as this acquisition last wrote it
	pending     clientv3.LeaseID // where a move whose reply was lost may have put the key, or 0
	pendingSecs int64            // pending's TTL, in seconds
}

// newLease is the acquisition of key by holder on etcd lease id, whose put
// committed at revision rev (the token, and the key's mod revision).
func (d *Driver) newLease(key, holder string, id clientv3.LeaseID, rev int64, sent time.Time, ttl time.Duration) *lease {
	return &lease{Lease: remotelease.New("etcdlocks", key, uint64(rev), d.clock, d.margin, sent, ttl),
		d: d, holder: holder, turn: make(chan struct{}, 1), id: id, secs: seconds(ttl), mod: rev}
}

// onWait, set by tests, runs when an Extend or a Release waits for
// another call of the same lease to finish.
var onWait atomic.Pointer[func()]

// take waits for the lease's turn, or for ctx to end.
func (l *lease) take(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
		return nil
	default:
	}
	if f := onWait.Load(); f != nil {
		(*f)()
	}
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give ends the turn that take began.
func (l *lease) give() { <-l.turn }

// failed wraps err, the failure of op, with ErrEtcd and the lease.
func (l *lease) failed(op string, err error) error {
	return fmt.Errorf("%w: %s key %q token %d: %w", ErrEtcd, op, l.Key(), l.Token(), err)
}

// ours compares lock key k with this acquisition: its create revision is
// the token and its value the holder.
func (l *lease) ours(k string) []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", int64(l.Token())),
		clientv3.Compare(clientv3.Value(k), "=", l.holder)}
}

// Extend implements locks.Lease. For a TTL within the etcd lease's own
// (whole seconds) it keeps that lease alive: one round trip, which resets
// it to its full TTL. A longer TTL moves the key to a new etcd lease, in a
// transaction that checks the key is still this acquisition's, unchanged
// since it last wrote it: two round trips, and a third that revokes the
// old lease. A move whose reply is lost costs one more: see settle.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	d := l.d
	return l.ExtendWith(ctx, ttl, func(ctx context.Context) (bool, error) {
		if err := l.take(ctx); err != nil {
			return false, l.failed("extend", err)
		}
		defer l.give()
		if err := l.Live(d.clock.Now()); err != nil {
			return false, nil // released or lost while this call waited
		}
		if l.pending != 0 {
			if held, err := l.settle(ctx); err != nil || !held {
				return false, err
			}
		}
		if seconds(ttl) > l.secs {
			return l.move(ctx, ttl)
		}
		r, err := d.client.KeepAliveOnce(ctx, l.id)
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return false, nil
		case err != nil:
			return false, l.failed("extend", err)
		}
		return r.TTL > 0, nil
	})
}

// move puts the key on a new etcd lease of ttl and revokes the old one,
// during the lease's turn.
func (l *lease) move(ctx context.Context, ttl time.Duration) (bool, error) {
	d := l.d
	nid, err := d.grant(ctx, ttl)
	if err != nil {
		d.revoke(ctx, nid) // granted or not, it holds nothing
		return false, l.failed("extend", fmt.Errorf("granting a lease: %w", err))
	}
	k := d.lockKey(l.Key())
	resp, err := d.client.Txn(ctx).If(append(l.ours(k), clientv3.Compare(clientv3.ModRevision(k), "=", l.mod))...).
		Then(clientv3.OpPut(k, l.holder, clientv3.WithLease(nid))).Commit()
	switch {
	case err != nil:
		// The move may have committed, or may yet: revoking nid now could
		// delete the key while this holder goes on. Find out where it is,
		// on a context of its own, as the call's may have ended.
		l.pending, l.pendingSecs = nid, seconds(ttl)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		held, serr := l.settle(sctx)
		switch {
		case serr != nil:
			return false, l.failed("extend", fmt.Errorf("%w (and then: %w)", err, serr))
		case !held:
			return false, nil
		case l.id == nid:
			return true, nil // it committed
		}
		return false, l.failed("extend", err) // it did not, and now cannot
	case !resp.Succeeded:
		d.revoke(ctx, nid) // refused: nothing was put on nid
		return false, nil
	}
	old := l.id
	l.id, l.secs, l.mod = nid, seconds(ttl), resp.Header.Revision
	d.revoke(ctx, old)
	return true, nil
}

// settle finds out, after a move whose reply was lost, whether the key is
// on its old etcd lease (l.id) or the new one (l.pending), and makes that
// final: in one transaction it puts the key again on l.id if it is still
// there, which changes its mod revision so that the move, were it to
// commit later, is refused; otherwise it reads the key. Then the lease the
// key is not on holds nothing and never will, and is revoked. It reports
// whether the key is still this acquisition's, during the lease's turn;
// on an error the outcome stays pending, for the next Extend or Release.
func (l *lease) settle(ctx context.Context) (bool, error) {
	d := l.d
	k := d.lockKey(l.Key())
	resp, err := d.client.Txn(ctx).If(append(l.ours(k), clientv3.Compare(clientv3.LeaseValue(k), "=", l.id))...).
		Then(clientv3.OpPut(k, l.holder, clientv3.WithLease(l.id))).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return false, l.failed("settle the move of", err)
	}
	empty, held := []clientv3.LeaseID{l.pending}, true
	if resp.Succeeded {
		l.mod = resp.Header.Revision
	} else if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 &&
		kvs[0].CreateRevision == int64(l.Token()) && string(kvs[0].Value) == l.holder &&
		clientv3.LeaseID(kvs[0].Lease) == l.pending {
		empty = []clientv3.LeaseID{l.id}
		l.id, l.secs, l.mod = l.pending, l.pendingSecs, kvs[0].ModRevision
	} else {
		empty, held = append(empty, l.id), false // the key is gone, or another's
	}
	l.pending = 0
	for _, id := range empty {
		d.revoke(ctx, id)
	}
	return held, nil
}

// Release implements locks.Lease in one round trip: it revokes the etcd
// lease, which deletes the key in the same step. A lease etcd no longer
// has (it expired) is lost. A Release waits for an Extend of the same
// lease to end, so that it revokes the etcd lease the key is on.
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	return l.ReleaseWith(ctx, func(ctx context.Context) (bool, error) {
		if err := l.take(ctx); err != nil {
			return false, l.failed("release", err)
		}
		defer l.give()
		if l.pending != 0 {
			if held, err := l.settle(ctx); err != nil || !held {
				return false, err
			}
		}
		_, err := d.client.Revoke(ctx, l.id)
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return false, nil
		case err != nil:
			return false, l.failed("release", err)
		}
		return true, nil
	})
}
