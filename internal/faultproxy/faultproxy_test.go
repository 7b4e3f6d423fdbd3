package faultproxy_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/faultproxy"
	"github.com/ndigo/ndigo/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start returns a proxy to a fresh redis-server, a client of the server
// itself, and a go-redis client with default options behind the proxy.
func start(t *testing.T) (*faultproxy.Proxy, *redis.Client, *redis.Client) {
	t.Helper()
	s := redistest.Start(t)
	p, err := faultproxy.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return p, s.Client(), c
}

// dial opens a raw connection to the proxy.
func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc, bufio.NewReader(nc)
}

func TestForwardsCommandsRepliesAndPushes(t *testing.T) {
	p, _, c := start(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET through the proxy = %q, %v", v, err)
	}
	// RESP3 maps, nulls and pipelines pass through.
	if _, err := c.Get(ctx, "missing").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key = %v, want redis.Nil", err)
	}
	cmds, err := c.Pipelined(ctx, func(pp redis.Pipeliner) error {
		pp.HSet(ctx, "h", "a", "1", "b", "2")
		pp.HGetAll(ctx, "h")
		pp.Incr(ctx, "n")
		return nil
	})
	if err != nil || cmds[1].(*redis.MapStringStringCmd).Val()["b"] != "2" || cmds[2].(*redis.IntCmd).Val() != 1 {
		t.Fatalf("pipeline through the proxy = %v, %v", cmds, err)
	}
	// Push frames (pub/sub) reach the subscriber and pair with no command.
	sub := c.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "ch", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "hello" {
		t.Fatalf("message through the proxy = %v, %v", msg, err)
	}
	if n := p.Count(faultproxy.Named("set")); n != 1 {
		t.Fatalf("Count(SET) = %d, want 1", n)
	}
	if p.Dropped() != 0 {
		t.Fatalf("Dropped() = %d with no drop armed", p.Dropped())
	}
}

// The dropped command ran on the server, its client saw the connection end
// without a reply, and later connections work.
func TestDropReplyAfterTheServerRan(t *testing.T) {
	p, direct, c := start(t)
	ctx := context.Background()
	p.DropReply(faultproxy.Named("INCR"))
	nc, r := dial(t, p)
	if _, err := nc.Write([]byte("*2\r\n$4\r\nincr\r\n$1\r\nn\r\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after a dropped reply the client read %q, %v; want EOF", b, err)
	}
	if n, err := direct.Get(ctx, "n").Int(); err != nil || n != 1 {
		t.Fatalf("the server's n = %d, %v; want 1: the command must run before its reply is dropped", n, err)
	}
	if p.Dropped() != 1 || p.Count(faultproxy.Named("INCR")) != 1 {
		t.Fatalf("Dropped() = %d, Count(INCR) = %d; want 1, 1", p.Dropped(), p.Count(faultproxy.Named("INCR")))
	}
	// The drop was used once: the next INCR is answered.
	if n, err := c.Incr(ctx, "n").Result(); err != nil || n != 2 {
		t.Fatalf("next INCR = %d, %v; want 2", n, err)
	}
}

// Replies before the dropped one arrive; the dropped one and those after it
// on the same connection do not, though the server ran every command up to
// the dropped one.
func TestDropReplyInAPipeline(t *testing.T) {
	p, direct, _ := start(t)
	p.DropReply(faultproxy.And(faultproxy.Named("INCR"), faultproxy.Arg("b")))
	nc, r := dial(t, p)
	// An inline command, then RESP arrays.
	if _, err := nc.Write([]byte("INCR a\r\n*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != ":1\r\n" {
		t.Fatalf("first reply = %q, %v; want :1", line, err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after the dropped reply the client read %q, %v; want EOF", rest, err)
	}
	for _, k := range []string{"a", "b"} {
		if n, err := direct.Get(context.Background(), k).Int(); err != nil || n != 1 {
			t.Fatalf("the server's %s = %d, %v; want 1", k, n, err)
		}
	}
	// A command pipelined after the dropped one may not have been forwarded
	// when the proxy closed the connection (make test with two CPU burners:
	// c was 0); it never runs twice.
	if n, err := direct.Get(context.Background(), "c").Int(); (err != nil && err != redis.Nil) || n > 1 {
		t.Fatalf("the server's c = %d, %v; want 0 or 1", n, err)
	}
}

// go-redis, with its default retries, sends the command again on a new
// connection: INCR then counts twice for one call.
func TestGoRedisRetriesADroppedReply(t *testing.T) {
	p, _, c := start(t)
	ctx := context.Background()
	p.DropReply(faultproxy.Named("INCR"))
	n, err := c.Incr(ctx, "n").Result()
	if err != nil || n != 2 {
		t.Fatalf("INCR whose first reply was dropped = %d, %v; want 2 (run, reply lost, retried)", n, err)
	}
	if got := p.Count(faultproxy.Named("INCR")); got != 2 {
		t.Fatalf("Count(INCR) = %d, want 2", got)
	}
}

// DropReplyThen's function runs after the server ran the command and
// before the client's retry: another client's command lands between the two
// attempts.
func TestDropReplyThenRunsBeforeTheRetry(t *testing.T) {
	p, direct, c := start(t)
	ctx := context.Background()
	var seen, sentBefore atomic.Int64
	p.DropReplyThen(faultproxy.Named("INCR"), func() {
		n, err := direct.Get(ctx, "n").Int()
		if err != nil {
			t.Error(err)
		}
		seen.Store(int64(n))
		sentBefore.Store(int64(p.Count(faultproxy.Named("INCR"))))
		if err := direct.Set(ctx, "n", 10, 0).Err(); err != nil {
			t.Error(err)
		}
	})
	n, err := c.Incr(ctx, "n").Result()
	if err != nil || n != 11 {
		t.Fatalf("INCR whose first reply was dropped = %d, %v; want 11 (run, then's SET 10, retried)", n, err)
	}
	if seen.Load() != 1 || sentBefore.Load() != 1 {
		t.Fatalf("then saw n = %d after %d INCR sent; want 1 after 1: it must run between the attempts", seen.Load(), sentBefore.Load())
	}
}

func TestMatches(t *testing.T) {
	src := "return 1"
	h := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(h[:])
	cmd := func(args ...string) faultproxy.Command { return faultproxy.Command{Args: args} }
	for _, c := range []struct {
		name string
		m    faultproxy.Match
		cmd  faultproxy.Command
		want bool
	}{
		{"Named any case", faultproxy.Named("evalsha"), cmd("EvalSha", sha, "0"), true},
		{"Named other", faultproxy.Named("GET"), cmd("SET", "k", "v"), false},
		{"Named empty command", faultproxy.Named("GET"), cmd(), false},
		{"Script EVALSHA", faultproxy.Script(sha), cmd("evalsha", sha, "0"), true},
		{"Script EVALSHA upper-case hash", faultproxy.Script(strings.ToUpper(sha)), cmd("EVALSHA", sha, "0"), true},
		{"Script EVALSHA other hash", faultproxy.Script(sha), cmd("EVALSHA", "0"+sha[1:], "0"), sha[0] == '0'},
		{"Script EVALSHA_RO", faultproxy.Script(sha), cmd("EVALSHA_RO", sha, "0"), true},
		{"Script EVAL", faultproxy.Script(sha), cmd("EVAL", src, "0"), true},
		{"Script other EVAL", faultproxy.Script(sha), cmd("EVAL", "return 2", "0"), false},
		{"Script other command", faultproxy.Script(sha), cmd("GET", sha), false},
		{"Script no args", faultproxy.Script(sha), cmd("EVALSHA"), false},
		{"Arg", faultproxy.Arg("k"), cmd("GET", "k"), true},
		{"Arg not the name", faultproxy.Arg("GET"), cmd("GET", "k"), false},
		{"Arg empty command", faultproxy.Arg("k"), cmd(), false},
		{"And", faultproxy.And(faultproxy.Named("GET"), faultproxy.Arg("k")), cmd("GET", "k"), true},
		{"And one fails", faultproxy.And(faultproxy.Named("GET"), faultproxy.Arg("j")), cmd("GET", "k"), false},
	} {
		if got := c.m(c.cmd); got != c.want {
			t.Errorf("%s: match(%q) = %v, want %v", c.name, c.cmd.Args, got, c.want)
		}
	}
}

// Close ends every proxied connection and stops accepting; goleak (in
// TestMain) checks that its goroutines are gone.
func TestClose(t *testing.T) {
	p, _, c := start(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	nc, r := dial(t, p)
	// A round trip first: a connection still in the listener's backlog at
	// Close is reset, not closed (seen under load).
	if _, err := nc.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING through the proxy read %q, %v", line, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("an open connection after Close read %v, want EOF", err)
	}
	if err := p.Close(); !errors.Is(err, faultproxy.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if nc, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = nc.Close()
		t.Fatal("the proxy still accepts after Close")
	}
}
