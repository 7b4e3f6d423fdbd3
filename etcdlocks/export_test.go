package etcdlocks

import "testing"

// OnWait makes f run whenever an Extend or a Release of a lease waits for
// another call of the same lease to end, until t ends.
func OnWait(t testing.TB, f func()) {
	onWait.Store(&f)
	t.Cleanup(func() { onWait.Store(nil) })
}
