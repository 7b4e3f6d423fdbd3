package etcdlocks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/internal/remotelease"
)

// lease is one acquisition: the lock key, put by holder on the etcd lease
// id. etcd decides whether it is still the holder (the etcd lease lives);
// the embedded local half decides when Done closes.
type lease struct {
	*remotelease.Lease
	d      *Driver
	holder string

	mu   sync.Mutex       // protects id and secs
	id   clientv3.LeaseID // the etcd lease the key is on
	secs int64            // its TTL, in seconds
}

// Extend implements locks.Lease. For a TTL within the etcd lease's own
// (whole seconds) it keeps that lease alive: one round trip, which resets
// it to its full TTL. A longer TTL moves the key to a new etcd lease, in a
// transaction that checks the key is still this acquisition's (its create
// revision and holder): two round trips, and a third that revokes the old
// lease.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	d := l.d
	return l.ExtendWith(ctx, ttl, func(ctx context.Context) (bool, error) {
		l.mu.Lock()
		id, secs := l.id, l.secs
		l.mu.Unlock()
		if seconds(ttl) <= secs {
			r, err := d.client.KeepAliveOnce(ctx, id)
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return false, nil
			case err != nil:
				return false, fmt.Errorf("%w: extend key %q token %d: %w", ErrEtcd, l.Key(), l.Token(), err)
			}
			return r.TTL > 0, nil
		}
		nid, err := d.grant(ctx, ttl)
		if err != nil {
			return false, fmt.Errorf("%w: extend key %q token %d: granting a lease: %w", ErrEtcd, l.Key(), l.Token(), err)
		}
		k := d.lockKey(l.Key())
		resp, err := d.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", int64(l.Token())),
			clientv3.Compare(clientv3.Value(k), "=", l.holder)).
			Then(clientv3.OpPut(k, l.holder, clientv3.WithLease(nid))).Commit()
		if err != nil || !resp.Succeeded {
			d.revoke(ctx, nid)
			if err != nil {
				return false, fmt.Errorf("%w: extend key %q token %d: %w", ErrEtcd, l.Key(), l.Token(), err)
			}
			return false, nil
		}
		l.mu.Lock()
		l.id, l.secs = nid, seconds(ttl)
		l.mu.Unlock()
		d.revoke(ctx, id)
		return true, nil
	})
}

// Release implements locks.Lease in one round trip: it revokes the etcd
// lease, which deletes the key in the same step. A lease etcd no longer
// has (it expired) is lost.
func (l *lease) Release(ctx context.Context) error {
	d := l.d
	return l.ReleaseWith(ctx, func(ctx context.Context) (bool, error) {
		l.mu.Lock()
		id := l.id
		l.mu.Unlock()
		_, err := d.client.Revoke(ctx, id)
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("%w: release key %q token %d: %w", ErrEtcd, l.Key(), l.Token(), err)
		}
		return true, nil
	})
}
