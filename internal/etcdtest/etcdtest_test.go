package etcdtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/etcdproc"
	"github.com/ndigo/ndigo/internal/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { etcdtest.StopShared() }))
}

// opTimeout bounds one call in these tests: well above a commit under
// -race, well below a test's time.
const opTimeout = 3 * time.Second

func put(t *testing.T, c *clientv3.Client, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := c.Put(ctx, k, v); err != nil {
		t.Fatalf("Put %s: %v", k, err)
	}
}

// get returns k's value ("" if there is none); serializable reads the
// member's own data without asking the leader.
func get(t *testing.T, c *clientv3.Client, k string, serializable bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var opts []clientv3.OpOption
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := c.Get(ctx, k, opts...)
	if err != nil {
		t.Fatalf("Get %s: %v", k, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestShared: Start's one member is shared by tests, each under a prefix of
// its own; it answers Put, Get and a lease grant of the minimum TTL.
func TestShared(t *testing.T) {
	a, b := etcdtest.Start(t), etcdtest.Start(t)
	if strings.Join(a.Endpoints(), ",") != strings.Join(b.Endpoints(), ",") || len(a.Members()) != 1 {
		t.Fatalf("two Starts: %v and %v; want one shared member", a.Endpoints(), b.Endpoints())
	}
	if a.Prefix() == b.Prefix() || !strings.HasPrefix(a.Prefix(), "etcdtest/TestShared/") {
		t.Fatalf("prefixes %q and %q; want two under etcdtest/TestShared/", a.Prefix(), b.Prefix())
	}
	c := a.Client()
	put(t, c, a.Prefix()+"k", "v")
	if v := get(t, c, a.Prefix()+"k", false); v != "v" {
		t.Fatalf("Get = %q, want v", v)
	}
	if v := get(t, b.Client(), b.Prefix()+"k", false); v != "" {
		t.Fatalf("Get under the other prefix = %q, want none", v)
	}
	if m := a.Leader(); m.Name() != "m0" {
		t.Fatalf("leader %s, want m0", m.Name())
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ttl := int64(etcdproc.MinLeaseTTL / time.Second)
	l, err := c.Grant(ctx, ttl)
	if err != nil || l.TTL != ttl {
		t.Fatalf("Grant(%d) = %+v, %v; want TTL %d", ttl, l, err, ttl)
	}
	if _, err := c.Put(ctx, a.Prefix()+"leased", "v", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	// Unrenewed, it goes within its TTL and one pass of the leader's
	// 500ms expiry loop (plus a commit).
	deadline := time.Now().Add(etcdproc.MinLeaseTTL + 2*time.Second)
	for get(t, c, a.Prefix()+"leased", false) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("the key of an unrenewed %ds lease still there after %v", ttl, etcdproc.MinLeaseTTL+2*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLeaderKilled: a 3-member cluster elects a leader; killed, it is
// replaced and writes go on; restarted, it rejoins with its data and what
// was written while it was down.
func TestLeaderKilled(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	c := cl.Client()
	put(t, c, "before", "1")
	old := cl.Leader()
	start := time.Now()
	old.Kill()
	leader := cl.Leader()
	t.Logf("new leader %s %v after the kill of %s", leader.Name(), time.Since(start), old.Name())
	if leader.Name() == old.Name() {
		t.Fatalf("leader still %s after its kill", old.Name())
	}
	put(t, c, "after", "2")

	old.Restart()
	if running, paused := old.State(); !running || paused {
		t.Fatalf("restarted member: running %v, paused %v", running, paused)
	}
	// Restart waited for a linearizable read on it: it has caught up.
	oc := old.Client()
	if v1, v2 := get(t, oc, "before", true), get(t, oc, "after", true); v1 != "1" || v2 != "2" {
		t.Fatalf("the restarted member's own data: before=%q after=%q; want 1 and 2", v1, v2)
	}
	put(t, oc, "through-it", "3")
	if v := get(t, c, "through-it", false); v != "3" {
		t.Fatalf("Get = %q, want 3", v)
	}
}

// TestFollowerPaused: the cluster goes on without a paused follower, which
// answers nothing until resumed and then catches up.
func TestFollowerPaused(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	leader := cl.Leader()
	f := cl.Followers()[0]
	fc := f.Client()
	put(t, fc, "k", "1")
	f.Pause()
	if _, paused := f.State(); !paused {
		t.Fatal("State of a paused member: not paused")
	}
	put(t, leader.Client(), "k", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := fc.Get(ctx, "k", clientv3.WithSerializable())
	cancel()
	if err == nil {
		t.Fatal("Get on a paused member succeeded")
	}
	if m := cl.Leader(); m.Name() != leader.Name() {
		t.Fatalf("leader %s while a follower was paused, was %s", m.Name(), leader.Name())
	}

	f.Resume()
	if v := get(t, fc, "k", false); v != "2" {
		t.Fatalf("linearizable Get on the resumed member = %q, want 2", v)
	}
	if m := cl.Leader(); m.Name() != leader.Name() {
		t.Fatalf("leader %s after the follower's resume, was %s (pre-vote keeps it)", m.Name(), leader.Name())
	}
}

// TestLeaderStopped: a leader stopped gracefully hands over; it restarts
// and rejoins.
func TestLeaderStopped(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	c := cl.Client()
	old := cl.Leader()
	old.Stop()
	if running, _ := old.State(); running {
		t.Fatal("State of a stopped member: running")
	}
	old.Stop() // nothing to do
	if leader := cl.Leader(); leader.Name() == old.Name() {
		t.Fatalf("leader still %s after its stop", old.Name())
	}
	put(t, c, "k", "v")
	old.Restart()
	if v := get(t, old.Client(), "k", true); v != "v" {
		t.Fatalf("the restarted member's own data: %q, want v", v)
	}
}

// TestQuorumLost: with two of three members down nothing is written; a
// restarted one restores the quorum.
func TestQuorumLost(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	ms := cl.Members()
	ms[1].Kill()
	ms[2].Pause()
	c := ms[0].Client()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := c.Put(ctx, "k", "v")
	cancel()
	if err == nil {
		t.Fatal("Put without a quorum succeeded")
	}
	ms[1].Restart()
	put(t, c, "k", "v")
	ms[2].Resume()
	cl.Leader()
}
