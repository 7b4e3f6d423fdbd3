package etcdlocks

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/locks"
)

var _ locks.ClaimAcquirer = (*Driver)(nil)

// firesPerTxn bounds the fires of one transaction: each takes up to five
// operations, and etcd refuses a transaction of more than --max-txn-ops
// (128 by default).
const firesPerTxn = 16

// AcquireClaims implements locks.ClaimAcquirer: one etcd transaction for up
// to 16 fires, each a nested transaction that puts the claim (if absent or
// lower) and the lock key (if absent) together, or the claim alone with
// EvenIfHeld. Each fire's lease is granted beforehand, all at once and
// with the claims' leases kept alive (see claimLease): one round trip of
// wall time, a Grant each and a KeepAliveOnce per claim TTL. The lock
// leases not used are revoked after, also when the transaction's reply is
// lost, which frees a key it may have taken; a claim it may have recorded
// stays. Fires on a key that an earlier fire of the call names go into a
// later transaction, in order, as etcd refuses a transaction that writes a
// key twice.
func (d *Driver) AcquireClaims(ctx context.Context, fires []locks.FireLock) []locks.FireLease {
	out := make([]locks.FireLease, len(fires))
	var todo []int
	for i, f := range fires {
		err := locks.CheckFireLock(ctx, f)
		if err == nil {
			err = d.margin.Check("etcdlocks", f.Key, f.TTL)
		}
		if out[i].Err = err; err == nil {
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		// A round: fires whose lock and claim keys no earlier fire of the
		// round names, at most firesPerTxn.
		var round, later []int
		seen := map[string]bool{}
		for _, i := range todo {
			lk, ck := "l"+fires[i].Key, "c"+fires[i].Claim.Key
			if len(round) == firesPerTxn || seen[lk] || seen[ck] {
				later = append(later, i)
				continue
			}
			seen[lk], seen[ck] = true, true
			round = append(round, i)
		}
		d.acquireClaims(ctx, fires, round, out)
		todo = later
	}
	return out
}

// acquireClaims takes fires[round] in one transaction, into out.
func (d *Driver) acquireClaims(ctx context.Context, fires []locks.FireLock, round []int, out []locks.FireLease) {
	sent := d.clock.Now()
	// The leases: one per fire, and the driver's claim lease per claim
	// TTL, at once.
	lockIDs := make([]clientv3.LeaseID, len(round))
	claimIDs := map[time.Duration]clientv3.LeaseID{}
	var ttls []time.Duration // claimIDs' keys, fetched while the map is written
	for _, i := range round {
		if _, ok := claimIDs[fires[i].Claim.TTL]; !ok {
			claimIDs[fires[i].Claim.TTL] = 0
			ttls = append(ttls, fires[i].Claim.TTL)
		}
	}
	var mu sync.Mutex
	var leaseErr error
	var wg sync.WaitGroup
	get := func(ttl time.Duration, lease func(context.Context, time.Duration) (clientv3.LeaseID, error), set func(clientv3.LeaseID)) {
		wg.Go(func() {
			id, err := lease(ctx, ttl)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && leaseErr == nil {
				leaseErr = err
			}
			set(id)
		})
	}
	for n, i := range round {
		get(fires[i].TTL, d.grant, func(id clientv3.LeaseID) { lockIDs[n] = id })
	}
	for _, ttl := range ttls {
		get(ttl, d.claimLease, func(id clientv3.LeaseID) { claimIDs[ttl] = id })
	}
	wg.Wait()
	used := make([]bool, len(round))
	defer func() {
		var rw sync.WaitGroup
		for n, id := range lockIDs {
			if id != 0 && !used[n] {
				rw.Go(func() { d.revoke(ctx, id) })
			}
		}
		rw.Wait()
	}()
	if leaseErr != nil {
		for _, i := range round {
			out[i].Err = fmt.Errorf("%w: acquire key %q with claim %d of %q: the leases: %w", ErrEtcd, fires[i].Key, fires[i].Claim.Seq, fires[i].Claim.Key, leaseErr)
		}
		return
	}
	holders := make([]string, len(round))
	ops := make([]clientv3.Op, len(round))
	for n, i := range round {
		f := fires[i]
		holders[n] = d.nonce + strconv.FormatUint(d.calls.Add(1), 36)
		lk, ck := d.lockKey(f.Key), d.prefix+"claim/"+name(f.Claim.Key)
		seq := fmt.Sprintf("%020d", f.Claim.Seq)
		putClaim := clientv3.OpPut(ck, seq, clientv3.WithLease(claimIDs[f.Claim.TTL]))
		var held []clientv3.Op
		if f.Claim.EvenIfHeld {
			held = []clientv3.Op{putClaim}
		}
		take := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(lk), "=", 0)},
			[]clientv3.Op{putClaim, clientv3.OpPut(lk, holders[n], clientv3.WithLease(lockIDs[n]))}, held)
		ops[n] = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ck), "=", 0)}, []clientv3.Op{take},
			[]clientv3.Op{clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(ck), "<", seq)}, []clientv3.Op{take}, nil)})
	}
	resp, err := d.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		for _, i := range round {
			out[i].Err = fmt.Errorf("%w: acquire key %q with claim %d of %q: %w", ErrEtcd, fires[i].Key, fires[i].Claim.Seq, fires[i].Claim.Key, err)
		}
		return // the deferred revokes free the keys the transaction may have taken
	}
	for n, i := range round {
		f := fires[i]
		r := resp.Responses[n].GetResponseTxn()
		if !r.GetSucceeded() { // a claim was there: its lower branch
			r = r.GetResponses()[0].GetResponseTxn()
			if !r.GetSucceeded() {
				out[i].Err = fmt.Errorf("%w: claim %q of %d", locks.ErrClaimed, f.Claim.Key, f.Claim.Seq)
				continue
			}
		}
		inner := r.GetResponses()[0].GetResponseTxn()
		if !inner.GetSucceeded() {
			out[i].Err = fmt.Errorf("%w: key %q", locks.ErrNotAcquired, f.Key)
			continue
		}
		used[n] = true
		out[i].Lease = d.newLease(f.Key, holders[n], lockIDs[n], resp.Header.Revision, sent, f.TTL)
	}
}
