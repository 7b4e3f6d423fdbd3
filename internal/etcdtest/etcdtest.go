// Package etcdtest starts private etcd clusters for tests: one member
// shared by a test binary's tests (Start), each test under a prefix of its
// own, and private clusters of several members for fault tests
// (StartCluster), whose members a test can kill, restart, pause, resume and
// stop. It makes clients with short timeouts, closed by t.Cleanup. The
// processes themselves are internal/etcdproc's; this package ties them to a
// test. The raft timings, and the minimum lease TTL they give
// (etcdproc.MinLeaseTTL, 1s), are etcdproc's.
//
// The helpers never skip: when etcd is missing, the test fails and says how
// to install it.
package etcdtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ndigo/ndigo/internal/etcdproc"
)

// LeaderTimeout bounds how long Leader waits for a leader: an election
// after the leader's loss takes about two election timeouts.
const LeaderTimeout = 10 * time.Second

// A Cluster is a private etcd cluster tied to a test. Its methods fail the
// test on error; they are safe for concurrent use.
type Cluster struct {
	*etcdproc.Cluster
	t      testing.TB
	shared bool   // Start's: no faults, no Stop
	prefix string // the test's keys' prefix
}

// A Member is one member of a Cluster. Its methods fail the test on error;
// they are safe for concurrent use.
type Member struct {
	*etcdproc.Member
	t      testing.TB
	shared bool
}

// shared is the one-member cluster that Start returns, started on first use
// and stopped by StopShared.
var shared struct {
	mu  sync.Mutex
	c   *etcdproc.Cluster
	err error // the first start's, repeated to every later test
}

// prefixes numbers the prefixes that Start hands out.
var prefixes atomic.Int64

// Start returns the test binary's shared one-member cluster, starting it on
// first use, with a key prefix of the test's own (Prefix). Its members
// cannot be killed, paused or stopped: a fault test starts its own cluster
// with StartCluster. The cluster outlives the test: TestMain stops it with
// StopShared, for example
//
//	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { etcdtest.StopShared() }))
//
// Without that its process still dies with the test binary, but its
// temporary directory stays.
func Start(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = etcdproc.StartCluster(etcdproc.Options{})
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	prefix := fmt.Sprintf("etcdtest/%s/%d-%d/", t.Name(), time.Now().UnixNano(), prefixes.Add(1))
	return &Cluster{Cluster: shared.c, t: t, shared: true, prefix: prefix}
}

// StopShared stops Start's shared cluster, if it was started, and removes
// its directory. Start starts a new one after it.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c != nil {
		shared.c.Stop()
	}
	shared.c, shared.err = nil, nil
}

// StartCluster starts a private cluster of members (3 to survive the loss
// of one), waits until every member answers with a leader elected, and
// registers its teardown with t.Cleanup.
func StartCluster(t testing.TB, members int) *Cluster {
	t.Helper()
	if members < 1 {
		t.Fatalf("etcdtest: StartCluster(%d): a cluster needs a member", members)
	}
	c, err := etcdproc.StartCluster(etcdproc.Options{Members: members})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return &Cluster{Cluster: c, t: t, prefix: "etcdtest/"}
}

// Prefix returns the prefix under which the test keeps its keys: unique to
// the Start call on the shared cluster (go test -count=n runs each test n
// times on it), etcdtest/ on a private one.
func (c *Cluster) Prefix() string { return c.prefix }

// Client returns a new client of every member (Config), closed by
// t.Cleanup.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	return Client(c.t, c.Endpoints()...)
}

// Members returns the cluster's members, named m0, m1, ... in order.
func (c *Cluster) Members() []*Member {
	ms := c.Cluster.Members()
	out := make([]*Member, len(ms))
	for i, m := range ms {
		out[i] = &Member{Member: m, t: c.t, shared: c.shared}
	}
	return out
}

// Leader waits until a quorum of the members agrees on a leader, for at
// most LeaderTimeout, and returns it.
func (c *Cluster) Leader() *Member {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LeaderTimeout)
	defer cancel()
	m, err := c.Cluster.Leader(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return &Member{Member: m, t: c.t, shared: c.shared}
}

// Followers waits for the leader (Leader) and returns the other members,
// in order.
func (c *Cluster) Followers() []*Member {
	c.t.Helper()
	leader := c.Leader()
	var out []*Member
	for _, m := range c.Members() {
		if m.Member != leader.Member {
			out = append(out, m)
		}
	}
	return out
}

// Stop kills every member of a private cluster now, rather than at the
// test's cleanup. The shared cluster is not for a test to stop.
func (c *Cluster) Stop() {
	c.t.Helper()
	if c.shared {
		c.t.Fatal("etcdtest: Stop of the shared cluster of Start: start a private one with StartCluster")
	}
	c.Cluster.Stop()
}

// Config returns the client configuration of Client for endpoints: a 2s
// dial timeout; gRPC keepalive pings every 10s (gRPC's minimum; etcd's
// server refuses pings more often than every 5s), a connection that has
// not answered one within 2s is dropped, so a paused member stops getting
// requests; no client logs (tests read the errors the calls return).
func Config(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	}
}

// Client returns a new client of endpoints (Config), closed by t.Cleanup;
// its goroutines end with Close.
func Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		t.Fatal("etcdtest: Client without endpoints")
	}
	c, err := clientv3.New(Config(endpoints...))
	if err != nil {
		t.Fatalf("etcdtest: client of %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Client returns a new client of the member alone, closed by t.Cleanup.
func (m *Member) Client() *clientv3.Client {
	m.t.Helper()
	return Client(m.t, m.Endpoint())
}

// Kill stops the member with SIGKILL and waits for it to exit; its data
// stays.
func (m *Member) Kill() { m.t.Helper(); m.check("Kill", m.Member.Kill) }

// Restart kills the member if it is running and starts it again on the
// same data and ports, waiting until it has rejoined (a quorum must be
// running).
func (m *Member) Restart() { m.t.Helper(); m.check("Restart", m.Member.Restart) }

// Pause stops the member with SIGSTOP: it answers nothing, to clients or
// peers.
func (m *Member) Pause() { m.t.Helper(); m.check("Pause", m.Member.Pause) }

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() { m.t.Helper(); m.check("Resume", m.Member.Resume) }

// Stop ends the member gracefully with SIGTERM (a leader hands over its
// leadership first) and waits until it has exited; Restart starts it again.
func (m *Member) Stop() { m.t.Helper(); m.check("Stop", m.Member.Stop) }

func (m *Member) check(what string, fault func() error) {
	m.t.Helper()
	if m.shared {
		m.t.Fatalf("etcdtest: %s of a member of the shared cluster of Start: a fault test starts its own with StartCluster", what)
	}
	if err := fault(); err != nil {
		m.t.Fatal(err)
	}
}
