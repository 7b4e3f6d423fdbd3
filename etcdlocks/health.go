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
	if _, err := d.client.Get(ctx, d.prefix+"health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("%w: health check of namespace %q on %s: %w", ErrEtcd, d.ns, strings.Join(d.client.Endpoints(), ","), err)
	}
	return nil
}
