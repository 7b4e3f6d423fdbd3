package redislocks_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
)

// commandCounter is a go-redis hook that records the commands a client
// sends.
type commandCounter struct {
	mu   sync.Mutex
	cmds []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.cmds = append(c.cmds, strings.ToLower(cmd.Name()))
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			c.cmds = append(c.cmds, strings.ToLower(cmd.Name()))
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns and forgets the commands recorded so far.
func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds := c.cmds
	c.cmds = nil
	return cmds
}

// Each operation is one round trip once the scripts are cached, and a
// NOSCRIPT reload costs exactly one more.
func TestOneRoundTripPerOperation(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	counter := &commandCounter{}
	c.AddHook(counter)
	ctx := context.Background()
	d := newDriver(t, c, "rt")

	// Load the scripts (the first EVALSHA of each answers NOSCRIPT).
	l, err := d.Acquire(ctx, "warm", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Besides the connection handshake (hello, client setinfo), the cold
	// run sends EVALSHA, answered NOSCRIPT, then EVAL, for each script.
	if got := scriptCalls(counter.take()); got != "evalsha,eval,evalsha,eval,evalsha,eval" {
		t.Fatalf("cold Acquire+Extend+Release sent %s; want evalsha then eval for each of the 3 scripts", got)
	}
	before := evalshaCalls(t, c)
	counter.take() // the INFO

	one := func(what string, op func() error) {
		t.Helper()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := counter.take(); len(got) != 1 || got[0] != "evalsha" {
			t.Fatalf("%s sent %v, want one evalsha", what, got)
		}
	}
	one("Acquire", func() error { l, err = d.Acquire(ctx, "k", time.Minute); return err })
	one("failed Acquire", func() error {
		if _, err := d.Acquire(ctx, "k", time.Minute); err == nil {
			t.Fatal("second Acquire of a held key succeeded")
		}
		return nil
	})
	one("Extend", func() error { return l.Extend(ctx, time.Minute) })
	one("Release", func() error { return l.Release(ctx) })
	if got := evalshaCalls(t, c) - before; got != 4 {
		t.Fatalf("INFO commandstats counts %d EVALSHA calls for 4 operations", got)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	counter.take()
	if _, err := d.Acquire(ctx, "k2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := counter.take(); strings.Join(got, ",") != "evalsha,eval" {
		t.Fatalf("Acquire after SCRIPT FLUSH sent %v, want evalsha,eval", got)
	}
}

func scriptCalls(cmds []string) string {
	var out []string
	for _, c := range cmds {
		if strings.HasPrefix(c, "eval") {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

// evalshaCalls returns the server's count of EVALSHA calls.
func evalshaCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			n := 0
			for _, r := range rest {
				if r < '0' || r > '9' {
					break
				}
				n = n*10 + int(r-'0')
			}
			return n
		}
	}
	return 0
}
