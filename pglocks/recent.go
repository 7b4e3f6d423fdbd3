package pglocks

import (
	"crypto/md5"
	"sync"
)

// recentKeys is how many keys a driver remembers having acquired (see
// recent).
const recentKeys = 1024

// recent is the last recentKeys distinct keys a driver acquired, as the md5
// sums of their namespace and key (a key can be a megabyte), oldest out
// first. An Acquire of such a key that finds no row does not reclaim
// others' free rows (acquire.sql): the key is in use, its row was taken
// while free by the reclamation of another key's Acquire, and reclaiming
// for it would take the free rows of other keys in use, each of which
// would put its row back and reclaim in turn (at 64 goroutines on distinct
// keys, 69% of the cycles inserted a row and deleted another, where they
// otherwise update their own). It only puts back a row that a reclamation
// took, so rows grow no more than before that reclamation.
type recent struct {
	mu   sync.Mutex // protects the fields below
	ring [recentKeys][md5.Size]byte
	next int                         // the slot of ring to overwrite next
	in   map[[md5.Size]byte]struct{} // the sums in ring
}

// add records the sum of an acquired key.
func (r *recent) add(sum [md5.Size]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.in[sum]; ok {
		return
	}
	if r.in == nil {
		r.in = make(map[[md5.Size]byte]struct{}, recentKeys)
	}
	if len(r.in) == recentKeys {
		delete(r.in, r.ring[r.next])
	}
	r.ring[r.next] = sum
	r.in[sum] = struct{}{}
	r.next = (r.next + 1) % recentKeys
}

// has reports whether the key of sum is among the recent ones.
func (r *recent) has(sum [md5.Size]byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.in[sum]
	return ok
}
