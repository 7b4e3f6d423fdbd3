package redislocks

import (
	"context"
	_ "embed"
	"fmt"

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
// ErrRedis and the client's error (which names the server's address, never
// the password), when Redis cannot run the driver's scripts now. One round
// trip; it implements locks.HealthChecker, for /healthz.
func (d *Driver) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, d.client, "the lock driver (namespace "+d.ns+")")
}

// CheckHealth is [Driver.CheckHealth] for the task state: the same script
// on the store's client.
func (s *Store) CheckHealth(ctx context.Context) error {
	return checkHealth(ctx, s.client, "the task state store (namespace "+s.ns+")")
}

func checkHealth(ctx context.Context, c redis.Scripter, what string) error {
	if err := healthScript.Run(ctx, c, nil).Err(); err != nil {
		return fmt.Errorf("%w: health check of %s: %w", ErrRedis, what, err)
	}
	return nil
}
