package admin

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/scheduling"
)

// serveModule starts Module's server with cfg (its Addr set to a free
// loopback port) and returns its address.
func serveModule(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	var server *Server
	app := fxtest.New(t, fx.Supply(cfg), fx.Provide(func() *slog.Logger { return slog.New(slog.DiscardHandler) }),
		scheduling.Module, Module, fx.Populate(&server))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return server.Addr()
}

// guard bounds each wait for the server to close a connection: far above
// the timeouts under test, far below the ones they must not be mistaken
// for.
const guard = 5 * time.Second

// readUntilClosed reads conn, through r, until the server closes it and
// returns what it read and how long that took; it fails the test if the
// connection is still open after guard.
func readUntilClosed(t *testing.T, conn net.Conn, r io.Reader) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := conn.SetReadDeadline(start.Add(guard)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %v (read %q)", guard, got)
	}
	return string(got), took
}

// An idle keep-alive connection is closed after IdleTimeout, not kept until
// the client goes: here long before ReadTimeout.
func TestServerClosesIdleConnections(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := serveModule(t, Config{IdleTimeout: idle, ReadTimeout: 10 * guard})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v; want 200 on a connection kept alive", resp.StatusCode, resp.Close)
	}
	rest, took := readUntilClosed(t, conn, br)
	if rest != "" || took < idle/2 {
		t.Errorf("closed after %v with %q; want nothing more, after the idle timeout %v", took, rest, idle)
	}
}

// A client that sends its headers and then stalls its body is cut off
// after ReadTimeout, with the connection's goroutine.
func TestServerCutsAStalledBody(t *testing.T) {
	const read = 300 * time.Millisecond
	addr := serveModule(t, Config{ReadTimeout: read})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /scheduledtasks/Payroll.Close/pause HTTP/1.1\r\nHost: admin\r\n"+
		"Content-Length: 1000\r\n\r\n{\"partial\":"); err != nil {
		t.Fatal(err)
	}
	got, took := readUntilClosed(t, conn, conn)
	if took < read/2 || (got != "" && !strings.Contains(got, "Connection: close")) {
		t.Errorf("closed after %v with %q; want it closed after the read timeout %v", took, got, read)
	}
}

// The server's timeouts refuse negative values, naming the field.
func TestServerRejectsNegativeTimeouts(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Addr: "127.0.0.1:0", ReadTimeout: -time.Second}, "Config.ReadTimeout -1s"},
		{Config{Addr: "127.0.0.1:0", IdleTimeout: -time.Second}, "Config.IdleTimeout -1s"},
		{Config{Addr: "127.0.0.1:0", ReadHeaderTimeout: -time.Second}, "Config.ReadHeaderTimeout -1s"},
		{Config{Addr: "127.0.0.1:0", ShutdownTimeout: -time.Second}, "Config.ShutdownTimeout -1s"},
	} {
		err := fx.New(fx.NopLogger, fx.Supply(tc.cfg), scheduling.Module, Module).Err()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field+" must not be negative") {
			t.Errorf("%+v: %v; want ErrInvalid naming %s", tc.cfg, err, tc.field)
		}
	}
}
