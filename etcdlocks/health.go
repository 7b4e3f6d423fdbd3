package etcdlocks

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/locks"
)

var _ locks.HealthChecker = (*Driver)(nil)

// CheckHealth implements locks.HealthChecker in one round trip: a
// linearizable read of one key, which the leader answers only with its
// quorum, as every lock operation needs. The error names the endpoints,
// never the credentials.
func (d *Driver) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, d.client, d.prefix, "namespace "+d.ns)
}

var _ locks.HealthChecker = (*Store)(nil)

// CheckHealth implements locks.HealthChecker for the task state, as the
// driver's does, so that /healthz names the store too when etcd is out of
// reach (admin.BackendChecks).
func (s *Store) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, s.client, s.prefix, "the task state store (namespace "+s.ns+")")
}

func checkHealth(ctx context.Context, c *clientv3.Client, prefix, what string) error {
	if _, err := c.Get(ctx, prefix+"health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("%w: health check of %s on %s: %w", ErrEtcd, what, strings.Join(c.Endpoints(), ","), err)
	}
	return nil
}
