package etcdlocks

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// OnWait makes f run whenever an Extend or a Release of a lease waits for
// another call of the same lease to end, until t ends.
func OnWait(t testing.TB, f func()) {
	onWait.Store(&f)
	t.Cleanup(func() { onWait.Store(nil) })
}

// ClaimLeases returns the etcd leases d's claims go on, one per claim TTL:
// they may hold no key (every claim on them was replaced by another
// driver's), and live until their TTL.
func ClaimLeases(d *Driver) []clientv3.LeaseID {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]clientv3.LeaseID, 0, len(d.claims))
	for _, id := range d.claims {
		ids = append(ids, id)
	}
	return ids
}
