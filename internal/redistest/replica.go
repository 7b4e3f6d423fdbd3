package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
)

// StartReplica starts a redis-server (persistence off) that replicates
// master, and waits until its replication link is up, it has loaded the
// master's data and the master counts it as online and in sync.
func StartReplica(t testing.TB, master *Server, extraArgs ...string) *Server {
	t.Helper()
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}, extraArgs...)
	r := start(t, redisproc.Options{Args: args})
	c := probe(r.Addr())
	defer c.Close()
	waitFor(t, startTimeout, "replica "+r.Addr()+" linked to "+master.Addr(), func() (bool, string) {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0"), info
	})
	// The master counts the replica in WAIT only once it acknowledged.
	master.WaitReplicated()
	return r
}

// WaitReplicated waits until every replica of s (at least one) has
// acknowledged everything s has written so far, failing the test after 10s.
// It publishes on channel redistest:sync (publications are replicated; no
// key is written) and runs WAIT on the same connection, as a replica that
// has just synced receives the stream only after its first acknowledgement.
func (s *Server) WaitReplicated() {
	s.t.Helper()
	c := probe(s.Addr())
	defer c.Close()
	ctx := context.Background()
	waitFor(s.t, startTimeout, "replicas of "+s.Addr()+" in sync", func() (bool, string) {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		if n == 0 {
			return false, info
		}
		pipe := c.Pipeline()
		pipe.Publish(ctx, "redistest:sync", "")
		wait := pipe.Do(ctx, "WAIT", n, 100)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, err.Error()
		}
		acks, _ := wait.Int()
		return acks >= n, fmt.Sprintf("%d of %d replicas acknowledged\n%s", acks, n, info)
	})
}

// probeOptions are the options of the short-lived clients that poll a
// server's state: one attempt per poll, bounded by a second.
func probeOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second}
}

// probe returns a client for polling addr; the caller closes it.
func probe(addr string) *redis.Client { return redis.NewClient(probeOptions(addr)) }
