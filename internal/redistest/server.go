// Package redistest starts private redis-server processes for tests: single
// servers on free loopback ports with persistence off, small Redis Clusters
// made of them, and a Sentinel setup (a master, a replica and three
// redis-sentinel processes) that fails over in a few seconds. A test can
// kill, restart, pause and resume a server to inject faults. Every process is
// torn down by t.Cleanup.
//
// The helpers never skip: when redis-server, redis-cli or redis-sentinel is
// missing, the test fails and says how to install them.
package redistest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// installHints are the failure messages when a Redis binary is missing.
var installHints = map[string]string{
	"redis-server":   "install redis-server (Debian: apt-get install redis-server; make test does it)",
	"redis-cli":      "install redis-server, which brings redis-cli (Debian: apt-get install redis-server; make test does it)",
	"redis-sentinel": "install redis-sentinel (Debian: apt-get install redis-sentinel; make test does it)",
}

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// A Server is one private redis-server (or redis-sentinel) process on a
// loopback port. Its methods fail the test that started it on error; they are
// safe for concurrent use.
type Server struct {
	t    testing.TB
	bin  string // the binary's name: redis-server or redis-sentinel
	conf string // the config file passed first; "" for none
	port int
	dir  string
	args []string // extra arguments, kept for Restart

	mu     sync.Mutex // protects the fields below
	cmd    *exec.Cmd  // the running process, nil after Kill
	paused bool
}

// Start starts a redis-server with persistence off on a free loopback port,
// waits until it answers PING and registers its teardown with t.Cleanup.
// extraArgs are appended to the command line (for example "--maxmemory",
// "1mb").
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return start(t, false, extraArgs)
}

// start starts a server; with cluster set, its cluster bus port must be free
// as well.
func start(t testing.TB, cluster bool, extraArgs []string) *Server {
	t.Helper()
	return startProcess(t, "redis-server", "", cluster, extraArgs)
}

// startProcess starts binary name on a free port. A non-empty conf is
// written to redis.conf in the process's directory, which is passed as the
// first argument (redis-sentinel needs a config file it can rewrite).
func startProcess(t testing.TB, name, conf string, cluster bool, extraArgs []string) *Server {
	t.Helper()
	bin := lookPath(t, name)
	var lastErr error
	for range 10 {
		port, err := freePort(cluster)
		if err != nil {
			lastErr = err
			continue
		}
		s := &Server{t: t, bin: name, port: port, dir: t.TempDir(), args: extraArgs}
		if conf != "" {
			s.conf = filepath.Join(s.dir, "redis.conf")
			if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
				t.Fatalf("redistest: writing %s: %v", s.conf, err)
			}
		}
		if err := s.launch(bin); err != nil {
			// Another process may have taken the port between the probe
			// and the start: try another one.
			lastErr = err
			continue
		}
		t.Cleanup(s.stop)
		return s
	}
	t.Fatalf("redistest: could not start %s: %v", name, lastErr)
	return nil
}

func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found in PATH: %s", name, installHints[name])
	}
	return p
}

// freePort returns a loopback port that is free now. Cluster nodes also need
// port+10000 (the cluster bus), so the range is kept below 55536.
func freePort(cluster bool) (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(30000)
		if !portFree(port) || (cluster && !portFree(port+10000)) {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("redistest: no free loopback port found")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch(bin string) error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--daemonize", "no",
		// A replica's first sync starts at once instead of after 5s.
		"--repl-diskless-sync-delay", "0",
	)
	args = append(args, s.args...)
	cmd := exec.Command(bin, args...)
	// Stdout and stderr stay nil (the null device), so exec starts no copying
	// goroutines that a leak check would see.
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting %s: %w", bin, err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		if err := ping(s.Addr()); err == nil {
			break
		} else if time.Now().After(deadline) || exited(cmd) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("redistest: %s on port %d did not answer PING: %v; log:\n%s", s.bin, s.port, err, s.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

// exited reports whether the process has exited, without reaping it: an
// exited child is a zombie ("Z") in /proc until Wait.
func exited(cmd *exec.Cmd) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// ping sends one PING on a fresh connection and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

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
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: Kill of server %s that is not running", s.Addr())
	}
	s.killLocked()
}

func (s *Server) killLocked() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	if s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		s.paused = false
	}
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server if it is running and starts a fresh one, with no
// data, on the same port, waiting until it answers PING. A sentinel keeps
// its config file, which is its state.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.killLocked()
	}
	s.mu.Unlock()
	bin := lookPath(s.t, s.bin)
	if err := s.launch(bin); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Pause stops the server with SIGSTOP: connections stay open but nothing is
// answered, as with a hung server or a network partition.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP, true)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT, false)
}

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: signal %v to server %s that is not running", sig, s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v to server %s: %v", sig, s.Addr(), err)
	}
	s.paused = paused
}

// stop is the Cleanup teardown.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.killLocked()
	}
}
