package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
)

// A Cluster is a Redis Cluster of private masters without replicas, made by
// StartCluster.
type Cluster struct {
	t testing.TB
	// Servers are the cluster's masters, in the order their slots were
	// assigned.
	Servers []*Server
}

// StartCluster starts masters redis-server processes with cluster mode on
// (and persistence off), joins them with `redis-cli --cluster create` with
// no replicas, and waits until every node reports cluster_state:ok. Redis
// needs at least 3 masters for a cluster.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: StartCluster(%d): a Redis Cluster needs at least 3 masters", masters)
	}
	cli := lookPath(t, "redis-cli")
	c := &Cluster{t: t}
	for range masters {
		c.Servers = append(c.Servers, start(t, redisproc.Options{Cluster: true, Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		}}))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitOK()
	return c
}

// Addrs returns the host:port of every master.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Client returns a new cluster client for the cluster, closed by t.Cleanup.
// It sets ContextTimeoutEnabled, so that a context deadline bounds every
// command.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// waitOK waits until every node sees the cluster as ok and knows all the
// others.
func (c *Cluster) waitOK() {
	c.t.Helper()
	deadline := time.Now().Add(startTimeout + 20*time.Second)
	ctx := context.Background()
	for _, s := range c.Servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		for {
			info, err := rc.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Servers))) {
				break
			}
			if time.Now().After(deadline) {
				_ = rc.Close()
				c.t.Fatalf("redistest: cluster node %s not ok: %v\n%s", s.Addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = rc.Close()
	}
}
