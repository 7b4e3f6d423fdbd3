package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/redislocks"
)

// ttl is every contender's lease; no benchmark lets it expire.
const ttl = 10 * time.Second

func ndigo(c *redis.Client) (*lockbench.Contender, error) {
	d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	return lockbench.WaitFor(d, ttl, func() { _ = d.Close() }), nil
}

// bsmRecommendedRetry is the retry strategy of bsm/redislock's README
// example; its default is not to retry at all.
const bsmRecommendedRetry = 100 * time.Millisecond

func bsm(c *redis.Client, retry time.Duration) *lockbench.Contender {
	client := redislock.New(c)
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			l, err := client.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(retry)})
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		},
		Close: func() {},
	}
}

// redsyncV4 retries every retry, or at redsync's default (a random delay of
// 50-250ms) when retry is 0; tries are unlimited either way.
func redsyncV4(c *redis.Client, retry time.Duration) *lockbench.Contender {
	rs := redsync.New(redsyncgoredis.NewPool(c))
	opts := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1 << 30)}
	if retry > 0 {
		opts = append(opts, redsync.WithRetryDelay(retry))
	}
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			m := rs.NewMutex(key, opts...)
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: unlock failed")
				}
				return err
			}, nil
		},
		Close: func() {},
	}
}

// The raw loop is the floor: the same SET NX PX + token mint and
// compare-and-delete as one script each, a retry sleep when held, and
// nothing else (no local deadline, no notifications, no validation).
var (
	rawAcquire = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return token`)
	rawRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
)

func raw(c *redis.Client, retry time.Duration) *lockbench.Contender {
	return rawLoop(c, retry, rawAcquire, rawRelease, func(key string) rawCall {
		lock := "raw:{" + key + "}:lock"
		return rawCall{
			keys: []string{lock, "raw:{" + key + "}:token"}, args: []any{ttl.Milliseconds()},
			release: func(tok int64) ([]string, []any) { return []string{lock}, []any{tok} },
		}
	})
}

// rawSame runs the driver's own scripts, read from dir, in a bare loop:
// the same work in Redis (TIME-based restart-safe tokens, nonces, the
// release tombstone), none of the driver's Go code.
func rawSame(c *redis.Client, retry time.Duration, dir string) (*lockbench.Contender, error) {
	acq, err := os.ReadFile(filepath.Join(dir, "acquire.lua"))
	if err != nil {
		return nil, err
	}
	rel, err := os.ReadFile(filepath.Join(dir, "release.lua"))
	if err != nil {
		return nil, err
	}
	handoffTTL := (10 * time.Millisecond).Milliseconds()
	var calls atomic.Uint64
	return rawLoop(c, retry, redis.NewScript(string(acq)), redis.NewScript(string(rel)), func(key string) rawCall {
		tag := "ndigo:{raw:" + key + "}:"
		nonce := "raw." + strconv.FormatUint(calls.Add(1), 36)
		return rawCall{
			keys: []string{tag + "lock", tag + "token"}, args: []any{ttl.Milliseconds(), nonce, "0"},
			release: func(tok int64) ([]string, []any) {
				return []string{tag + "lock", tag + "released"},
					[]any{strconv.FormatInt(tok, 10) + ":" + nonce, "ndigo:raw:released:" + key, "0", handoffTTL}
			},
		}
	}), nil
}

// A rawCall is the arguments of one acquisition in a raw loop and of its
// release.
type rawCall struct {
	keys    []string
	args    []any
	release func(tok int64) ([]string, []any)
}

func rawLoop(c *redis.Client, retry time.Duration, acquire, release *redis.Script,
	call func(key string) rawCall) *lockbench.Contender {
	return &lockbench.Contender{
		Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			rc := call(key)
			for {
				tok, err := acquire.Run(ctx, c, rc.keys, rc.args...).Int64()
				if err != nil {
					return nil, err
				}
				if tok > 0 {
					return func(ctx context.Context) error {
						keys, args := rc.release(tok)
						return release.Run(ctx, c, keys, args...).Err()
					}, nil
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(retry):
				}
			}
		},
		Close: func() {},
	}
}
