package etcdlocks

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/locks"
)

// Guard commits ops in one etcd transaction if, and only if, held still
// holds its key: the transaction compares the lock key's create revision
// with the lease's token and its value with the lease's holder, so that
// etcd itself refuses the writes of a stale holder (one whose lease expired
// while it was paused, say), whatever its own clock says. It returns the
// transaction's response, whose Responses answer ops in order.
//
// A stale holder (its lease expired in etcd, was released, or is past its
// local deadline) gets an error wrapping locks.ErrLeaseLost, nothing is
// written, and its Done closes. A lease not made by this package's Driver
// gets locks.ErrInvalid. A failing call gets ErrEtcd: the writes may or may
// not have been committed, as for any etcd call whose reply was lost.
func Guard(ctx context.Context, held locks.Lease, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: etcdlocks.Guard: ctx must not be nil", locks.ErrInvalid)
	}
	l, ok := held.(*lease)
	if !ok || l == nil {
		return nil, fmt.Errorf("%w: etcdlocks.Guard: %T is not a lease of an etcdlocks.Driver", locks.ErrInvalid, held)
	}
	d := l.d
	if err := l.Live(d.clock.Now()); err != nil {
		return nil, err
	}
	k := d.lockKey(l.Key())
	resp, err := d.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", int64(l.Token())),
		clientv3.Compare(clientv3.Value(k), "=", l.holder)).Then(ops...).Commit()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: guard key %q token %d: %w", ErrEtcd, l.Key(), l.Token(), err)
	case !resp.Succeeded:
		return nil, l.Lose()
	}
	return resp, nil
}
