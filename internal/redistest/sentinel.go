package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
)

// MasterName is the name under which the sentinels of StartSentinel monitor
// their master: pass it as redis.FailoverOptions.MasterName.
const MasterName = "ndigo"

// Sentinel timings. A sentinel deems the master down after downAfter without
// a valid reply; two of three must agree (the quorum), then one is elected
// and promotes the replica. On loopback a failover completes a few seconds
// after the master stops answering.
const (
	downAfter       = 1000 * time.Millisecond
	failoverTimeout = 5 * time.Second
	// promoteTimeout bounds WaitPromoted: detection, election, promotion
	// and every sentinel learning the new configuration.
	promoteTimeout = 20 * time.Second
)

// A Sentinel is a Redis Sentinel setup made by StartSentinel: a master, one
// replica of it and three sentinels that monitor the master under
// MasterName with a quorum of 2.
type Sentinel struct {
	t testing.TB
	// Master and Replica are the data servers as started: the sentinels
	// monitor Master and Replica replicates it. After a failover Replica is
	// the master; these fields keep naming the servers by their first role.
	Master, Replica *Server
	// Sentinels are the three redis-sentinel processes.
	Sentinels []*Server

	probes []*redis.SentinelClient // one per sentinel, for polling its view
}

// StartSentinel starts a master, a replica of it and three redis-sentinel
// processes on private loopback ports, with persistence off, a quorum of 2, a
// down-after of 1s and a failover timeout of 5s, and waits until every
// sentinel knows the replica and the two other sentinels, so that a failover
// can start as soon as the master stops answering. Every process is stopped
// by t.Cleanup, the sentinels first.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	lookPath(t, "redis-sentinel") // fail before starting anything
	s := &Sentinel{t: t}
	s.Master = Start(t)
	s.Replica = StartReplica(t, s.Master)
	conf := fmt.Sprintf(`sentinel monitor %[1]s 127.0.0.1 %[2]d 2
sentinel down-after-milliseconds %[1]s %[3]d
sentinel failover-timeout %[1]s %[4]d
sentinel parallel-syncs %[1]s 1
`, MasterName, s.Master.Port(), downAfter.Milliseconds(), failoverTimeout.Milliseconds())
	for range 3 {
		s.Sentinels = append(s.Sentinels, start(t, redisproc.Options{Binary: "redis-sentinel", Conf: conf}))
	}
	// Sentinels find each other through hello messages on the master every
	// 2s and the replica through the master's INFO.
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(probeOptions(sn.Addr()))
		t.Cleanup(func() { _ = c.Close() })
		waitFor(t, startTimeout, "sentinel "+sn.Addr()+" ready", func() (bool, string) {
			m, err := c.Master(context.Background(), MasterName).Result()
			if err != nil {
				return false, err.Error()
			}
			return m["flags"] == "master" && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2", fmt.Sprint(m)
		})
		s.probes = append(s.probes, c)
	}
	return s
}

// SentinelAddrs returns the host:port of every sentinel.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// Client returns a new Sentinel-aware client (redis.NewFailoverClient) that
// follows the master across failovers, closed by t.Cleanup. Without opts it
// sets ContextTimeoutEnabled, so that a context deadline bounds every
// command. With opts, *opts[0] is the template and only MasterName and
// SentinelAddrs are replaced.
func (s *Sentinel) Client(opts ...*redis.FailoverOptions) *redis.Client {
	o := &redis.FailoverOptions{ContextTimeoutEnabled: true}
	if len(opts) > 0 && opts[0] != nil {
		c := *opts[0]
		o = &c
	}
	o.MasterName = MasterName
	o.SentinelAddrs = s.SentinelAddrs()
	c := redis.NewFailoverClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// KillMaster kills the master (SIGKILL) and waits until the sentinels have
// promoted the replica.
func (s *Sentinel) KillMaster() {
	s.t.Helper()
	s.Master.Kill()
	s.WaitPromoted()
}

// PauseMaster pauses the master (SIGSTOP, as a hung server or a partition)
// and waits until the sentinels have promoted the replica. Resuming the old
// master later makes it a replica of the new one: the sentinels reconfigure
// it and it discards its data for the new master's.
func (s *Sentinel) PauseMaster() {
	s.t.Helper()
	s.Master.Pause()
	s.WaitPromoted()
}

// RejoinMaster brings the old master back as a replica of the promoted one,
// as the sentinels do by themselves only some 10s after it answers again: a
// paused master is resumed and a killed one restarted (empty), it is told
// REPLICAOF the promoted replica, and RejoinMaster waits until the promoted
// replica counts it in sync. Call it after the failover.
func (s *Sentinel) RejoinMaster() {
	s.t.Helper()
	m := s.Master
	running, paused := m.State()
	switch {
	case !running:
		m.Restart()
	case paused:
		m.Resume()
	}
	c := probe(m.Addr())
	defer c.Close()
	if err := c.ReplicaOf(context.Background(), "127.0.0.1", strconv.Itoa(s.Replica.Port())).Err(); err != nil {
		s.t.Fatalf("redistest: REPLICAOF on the old master %s: %v", m.Addr(), err)
	}
	s.Replica.WaitReplicated()
}

// WaitPromoted waits until every sentinel names Replica as the master and
// Replica itself reports role:master, failing the test after 20s. Call it
// after stopping the master by other means than KillMaster or PauseMaster.
func (s *Sentinel) WaitPromoted() {
	s.t.Helper()
	deadline := time.Now().Add(promoteTimeout)
	want := s.Replica.Addr()
	for i, c := range s.probes {
		waitFor(s.t, time.Until(deadline), "sentinel "+s.Sentinels[i].Addr()+" naming "+want+" master", func() (bool, string) {
			addr, err := c.GetMasterAddrByName(context.Background(), MasterName).Result()
			if err != nil {
				return false, err.Error()
			}
			return len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == want, strings.Join(addr, ":")
		})
	}
	c := probe(want)
	defer c.Close()
	waitFor(s.t, time.Until(deadline), want+" reporting role:master", func() (bool, string) {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(info, "role:master"), info
	})
}
