// Package redistest starts private redis-server processes for tests: single
// servers on free loopback ports with persistence off, small Redis Clusters
// made of them, and a Sentinel setup (a master, a replica and three
// redis-sentinel processes) that fails over in a few seconds. A test can
// kill, restart, pause and resume a server to inject faults. Every process is
// torn down by t.Cleanup. The processes themselves are internal/redisproc's;
// this package ties them to a test.
//
// The helpers never skip: when redis-server, redis-cli or redis-sentinel is
// missing, the test fails and says how to install them.
package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redisproc"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = redisproc.StartTimeout

// A Server is one private redis-server (or redis-sentinel) process on a
// loopback port. Its methods fail the test that started it on error; they are
// safe for concurrent use.
type Server struct {
	*redisproc.Server
	t testing.TB
}

// Start starts a redis-server with persistence off on a free loopback port,
// waits until it answers PING and registers its teardown with t.Cleanup.
// extraArgs are appended to the command line (for example "--maxmemory",
// "1mb").
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return start(t, redisproc.Options{Args: extraArgs})
}

// start starts a server in a directory of t's, stopped by t.Cleanup.
func start(t testing.TB, o redisproc.Options) *Server {
	t.Helper()
	o.Dir = t.TempDir()
	s, err := redisproc.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{Server: s, t: t}
}

func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := redisproc.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Client returns a new go-redis client for the server, closed by t.Cleanup.
// Without opts it sets ContextTimeoutEnabled, so that a context deadline
// bounds every command, as fault tests expect. With opts, *opts[0] is the
// template and only its Addr is replaced.
func (s *Server) Client(opts ...*redis.Options) *redis.Client {
	o := &redis.Options{ContextTimeoutEnabled: true}
	if len(opts) > 0 && opts[0] != nil {
		c := *opts[0]
		o = &c
	}
	o.Addr = s.Addr()
	c := redis.NewClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server with SIGKILL and waits for it to exit. Its data is
// lost: persistence is off.
func (s *Server) Kill() { s.t.Helper(); s.check(s.Server.Kill()) }

// Restart kills the server if it is running and starts a fresh one, with no
// data, on the same port, waiting until it answers PING. A sentinel keeps
// its config file, which is its state.
func (s *Server) Restart() { s.t.Helper(); s.check(s.Server.Restart()) }

// Pause stops the server with SIGSTOP: connections stay open but nothing is
// answered, as with a hung server or a network partition.
func (s *Server) Pause() { s.t.Helper(); s.check(s.Server.Pause()) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.t.Helper(); s.check(s.Server.Resume()) }

func (s *Server) check(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// waitFor polls cond until it reports true, failing t after within with
// what cond last reported.
func waitFor(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v; last seen:\n%s", what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
