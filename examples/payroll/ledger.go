package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// errStaleToken reports a ledger write whose fencing token is below the
// highest the ledger has accepted: its writer's lease was superseded.
var errStaleToken = errors.New("payroll: ledger rejected a stale fencing token")

// A ledger is where closed payrolls are recorded. Every write carries the
// writer's fencing token, and the ledger rejects a token lower than the
// highest it has accepted.
type ledger interface {
	Append(ctx context.Context, token uint64, entry string) error
}

// memoryLedger is the single-node ledger.
type memoryLedger struct {
	mu      sync.Mutex // protects high and entries
	high    uint64
	entries []string
}

func (m *memoryLedger) Append(_ context.Context, token uint64, entry string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if token < m.high {
		return fmt.Errorf("%w: token %d, ledger at %d", errStaleToken, token, m.high)
	}
	m.high = token
	m.entries = append(m.entries, entry)
	return nil
}

//go:embed ledger.lua
var ledgerLua string

var ledgerScript = redis.NewScript(ledgerLua)

// redisLedger is a Redis list shared by every node, fenced by a script.
type redisLedger struct {
	client     redis.Scripter
	list, high string
}

func newRedisLedger(c redis.Scripter, namespace string) *redisLedger {
	// One hash tag keeps both keys in one Cluster slot.
	prefix := "ndigo:" + namespace + ":payroll:{ledger}"
	return &redisLedger{client: c, list: prefix, high: prefix + ":high"}
}

func (r *redisLedger) Append(ctx context.Context, token uint64, entry string) error {
	res, err := ledgerScript.Run(ctx, r.client, []string{r.list, r.high}, token, entry).Slice()
	if err != nil {
		return fmt.Errorf("payroll: ledger append: %w", err)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		high, _ := res[1].(string)
		return fmt.Errorf("%w: token %d, ledger at %s", errStaleToken, token, high)
	}
	return nil
}

// entries returns the ledger's entries, oldest first.
func (r *redisLedger) entries(ctx context.Context, c redis.Cmdable) ([]string, error) {
	return c.LRange(ctx, r.list, 0, -1).Result()
}
