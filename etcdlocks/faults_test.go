package etcdlocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/locks"
)

// contend tries to acquire key through d every 50ms until deadline, and
// fails the test if any attempt gets the lease: another node holds it.
// It returns how many attempts etcd answered (held), the others failing
// with ErrEtcd while the cluster had no leader.
func contend(t *testing.T, d *etcdlocks.Driver, key string, until time.Time) (answered int) {
	t.Helper()
	for time.Now().Before(until) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l, err := d.Acquire(ctx, key, time.Minute)
		cancel()
		switch {
		case err == nil:
			_ = l.Release(context.Background())
			t.Fatalf("a second node acquired %q (token %d) while its holder's lease lasted", key, l.Token())
		case errors.Is(err, locks.ErrNotAcquired):
			answered++
		case !errors.Is(err, etcdlocks.ErrEtcd):
			t.Fatalf("Acquire while held = %v, want ErrNotAcquired or ErrEtcd", err)
		}
		time.Sleep(50 * time.Millisecond) // the contender's pace; nothing is timed by it
	}
	return answered
}

// extendWithin extends l for ttl, retrying a failing call (each bounded to
// a second) until it succeeds or the lease's local deadline passes, as the
// scheduler's renewal does.
func extendWithin(t *testing.T, l locks.Lease, ttl time.Duration) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := l.Extend(ctx, ttl)
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, locks.ErrLeaseLost):
			t.Fatalf("Extend after the fault = %v: the lease did not survive it", err)
		}
		select {
		case <-l.Done():
			t.Fatalf("the lease's deadline passed before an Extend got through (last: %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A lease held when the leader is killed survives it: a new leader keeps
// the etcd lease, no other node acquires the key meanwhile, the holder
// extends and releases it, and the next holder's token is greater.
func TestLeaseSurvivesTheLeadersDeath(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	holder, other := newDriver(t, c.Client(), "faults"), newDriver(t, c.Client(), "faults")
	ctx := context.Background()
	l, err := holder.Acquire(ctx, "payroll", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Leader()
	leader.Kill()
	if n := contend(t, other, "payroll", time.Now().Add(3*time.Second)); n == 0 {
		t.Fatal("etcd answered no Acquire in the 3 s after the leader's death: the test checked nothing")
	}
	if got := c.Leader(); got.Name() == leader.Name() {
		t.Fatalf("leader %s still leads after its kill", got.Name())
	}
	extendWithin(t, l, 10*time.Second)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the failover = %v, want nil", err)
	}
	next, err := other.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the holder's release = %v", err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("token after the failover %d, want above %d", next.Token(), l.Token())
	}
	_ = next.Release(ctx)
	leader.Restart()
}

// A paused member (a minority, cut off) does not stop the holder: its
// extensions go through the others within the lease, and no other node
// acquires the key meanwhile; the same with the leader paused, which the
// others replace.
func TestLeaseSurvivesAPausedMember(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	for _, which := range []string{"follower", "leader"} {
		t.Run(which, func(t *testing.T) {
			holder, other := newDriver(t, c.Client(), "faults-"+which), newDriver(t, c.Client(), "faults-"+which)
			ctx := context.Background()
			l, err := holder.Acquire(ctx, "payroll", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			m := c.Leader()
			if which == "follower" {
				m = c.Followers()[0]
			}
			m.Pause()
			contend(t, other, "payroll", time.Now().Add(2*time.Second))
			extendWithin(t, l, 10*time.Second)
			contend(t, other, "payroll", time.Now().Add(time.Second))
			m.Resume()
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v, want nil", err)
			}
		})
	}
}

// Tokens keep increasing across a restart of the whole cluster: etcd keeps
// its revision on disk.
func TestTokensIncreaseAcrossAClusterRestart(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	d := newDriver(t, c.Client(), "restart")
	ctx := context.Background()
	l, err := d.Acquire(ctx, "payroll", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	members := c.Members()
	for _, m := range members {
		m.Kill()
	}
	// Together: each member's restart waits for a quorum of them.
	errs := make(chan error, len(members))
	for _, m := range members {
		go func() { errs <- m.Member.Restart() }()
	}
	for range members {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.Leader()
	var next locks.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		next, err = newDriver(t, c.Client(), "restart").Acquire(cctx, "payroll", time.Minute)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Acquire after the cluster's restart = %v", err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("token after the cluster's restart %d, want above %d", next.Token(), l.Token())
	}
	_ = next.Release(ctx)
}
