// Package pgtest starts a private PostgreSQL server for a test: initdb into
// a temporary directory and postgres on a free loopback port, durability
// off, torn down by t.Cleanup. A test can kill (SIGKILL), restart, pause and
// resume it to inject faults. The process itself is internal/pgproc's; this
// package ties it to a test.
//
// Start never skips: when initdb or postgres is missing, the test fails and
// says how to install them.
package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ndigo/ndigo/internal/pgproc"
)

// A Server is one private PostgreSQL server. Its methods fail the test that
// started it on error; they are safe for concurrent use.
type Server struct {
	*pgproc.Server
	t testing.TB
}

// Start starts a server, waits until it accepts connections and registers
// its teardown with t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := pgproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return Wrap(t, s)
}

// Wrap ties a server started elsewhere (for example in TestMain, shared by
// a package's tests) to t, without taking over its teardown.
func Wrap(t testing.TB, s *pgproc.Server) *Server { return &Server{Server: s, t: t} }

// Pool returns a new connection pool on the server, closed by t.Cleanup.
func (s *Server) Pool() *pgxpool.Pool {
	s.t.Helper()
	p, err := pgxpool.New(context.Background(), s.URL())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Close)
	return p
}

// Kill stops the server and its backends with SIGKILL; its data stays.
func (s *Server) Kill() { s.t.Helper(); s.check(s.Server.Kill()) }

// Restart kills the server if it is running and starts it again on the same
// data and port, waiting until it accepts connections.
func (s *Server) Restart() { s.t.Helper(); s.check(s.Server.Restart()) }

// Pause stops the server and its backends with SIGSTOP.
func (s *Server) Pause() { s.t.Helper(); s.check(s.Server.Pause()) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.t.Helper(); s.check(s.Server.Resume()) }

func (s *Server) check(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}
