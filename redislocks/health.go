package redislocks

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
)

//go:embed health.lua
var healthSource string

var healthScript = redis.NewScript(healthSource)

var (
	_ locks.HealthChecker = (*Driver)(nil)
	_ locks.HealthChecker = (*Store)(nil)
)

// CheckHealth runs a script that touches no key: it fails, wrapping
// ErrRedis and the client's error, naming the server's address (never the
// password), when Redis cannot run the driver's scripts now. With
// Options.MinReplicas, WAIT follows the script on its connection, as it
// follows every acquisition, and too few replicas fail the check with
// ErrNotReplicated: every lease would be refused. One round trip; it
// implements locks.HealthChecker, for /healthz.
func (d *Driver) CheckHealth(ctx context.Context) error {
	what := "the lock driver (namespace " + d.ns + ")" + at(d.client)
	if d.replicas == nil {
		return checkHealth(ctx, d.client, what)
	}
	c, err := d.connFor(ctx, "health")
	if err != nil {
		return fmt.Errorf("%w: health check of %s: %w", ErrRedis, what, err)
	}
	// The replicas' timeout, within half of ctx's time as for a lease.
	wait := d.replicas.waitMillis(ctx, c, 2*d.replicas.timeout)
	sc, wc := evalWait(ctx, c, healthScript, wait, d.replicas.n, nil)
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: health check of %s: %w", ErrRedis, what, err)
	}
	acks, err := wc.Int64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: health check of %s: WAIT: %w", ErrRedis, what, err)
	case acks < int64(d.replicas.n):
		return fmt.Errorf("%w: %w: health check of %s: %d of the %d replicas required (Options.MinReplicas) answered WAIT within %dms, so every lease would be refused",
			ErrRedis, ErrNotReplicated, what, acks, d.replicas.n, wait)
	}
	return nil
}

// CheckHealth is [Driver.CheckHealth] for the task state: the same script
// on the store's client.
func (s *Store) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, s.client, "the task state store (namespace "+s.ns+")"+at(s.client))
}

func checkHealth(ctx context.Context, c redis.Scripter, what string) error {
	if err := healthScript.Run(ctx, c, nil).Err(); err != nil {
		return fmt.Errorf("%w: health check of %s: %w", ErrRedis, what, err)
	}
	return nil
}

// at returns " at " and the server address of c, which its errors do not
// always name (a timeout does not); "" for a client that does not say
// (a Ring, a failover client, whose address Sentinel decides).
func at(c any) string {
	switch c := c.(type) {
	case *redis.Client:
		if addr := c.Options().Addr; addr != "FailoverClient" {
			return " at " + addr
		}
	case *redis.ClusterClient:
		return " at " + strings.Join(c.Options().Addrs, ",")
	}
	return ""
}
