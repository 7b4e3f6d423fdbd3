package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/locks"
)

//go:embed ledger.lua
var ledgerLua string

var ledgerScript = redis.NewScript(ledgerLua)

// redisLedger is a Redis list shared by every node, fenced by a script that
// refuses a token below the highest it accepted. Its entries are text:
// "fire node token".
type redisLedger struct {
	client     redis.Cmdable
	list, high string
}

func newRedisLedger(c redis.Cmdable, namespace string) *redisLedger {
	// One hash tag keeps both keys in one Cluster slot.
	prefix := "ndigo:" + namespace + ":payroll:{ledger}"
	return &redisLedger{client: c, list: prefix, high: prefix + ":high"}
}

func (r *redisLedger) Append(ctx context.Context, lease locks.Lease, fire time.Time, node string) error {
	token := lease.Token()
	e := entry{Fire: fire, Node: node, Token: token}
	res, err := ledgerScript.Run(ctx, r.client, []string{r.list, r.high}, token, e.String()).Slice()
	if err != nil {
		return fmt.Errorf("payroll: ledger append: %w", err)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		high, _ := res[1].(string)
		return fmt.Errorf("%w: token %d, ledger at %s", errStaleToken, token, high)
	}
	return nil
}

func (r *redisLedger) Entries(ctx context.Context) ([]entry, error) {
	texts, err := r.client.LRange(ctx, r.list, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("payroll: ledger entries: %w", err)
	}
	entries := make([]entry, 0, len(texts))
	for _, text := range texts {
		e, err := parseEntry(text)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// parseEntry reads entry.String's text back; the node name, in the middle,
// may hold spaces.
func parseEntry(text string) (entry, error) {
	fire, rest, ok1 := strings.Cut(text, " ")
	i := strings.LastIndexByte(rest, ' ')
	at, err := time.Parse(fireFormat, fire)
	if !ok1 || i < 0 || err != nil {
		return entry{}, fmt.Errorf("payroll: ledger entry %q is not \"fire node token\"", text)
	}
	token, err := strconv.ParseUint(rest[i+1:], 10, 64)
	if err != nil {
		return entry{}, fmt.Errorf("payroll: ledger entry %q: token: %w", text, err)
	}
	return entry{Fire: at, Node: rest[:i], Token: token}, nil
}
