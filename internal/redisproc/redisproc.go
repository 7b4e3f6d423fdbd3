// Package redisproc starts private redis-server and redis-sentinel processes
// on free loopback ports with persistence off, and kills, restarts, pauses
// and resumes them to inject faults. It does not import package testing:
// internal/redistest wraps it for tests, and the benchmarks in bench/ use it
// as it is.
package redisproc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ndigo/ndigo/internal/serverproc"
)

// installHints complete the error when a Redis binary is missing.
var installHints = map[string]string{
	"redis-server":   "install redis-server (Debian: apt-get install redis-server; make test does it)",
	"redis-cli":      "install redis-server, which brings redis-cli (Debian: apt-get install redis-server; make test does it)",
	"redis-sentinel": "install redis-sentinel (Debian: apt-get install redis-sentinel; make test does it)",
}

// StartTimeout bounds how long a server may take to answer PING.
const StartTimeout = 10 * time.Second

// LookPath returns the path of the Redis binary name (redis-server,
// redis-cli or redis-sentinel), or an error that says how to install it.
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("redisproc: %s not found in PATH: %s", name, installHints[name])
	}
	return p, nil
}

// Options say what Start starts.
type Options struct {
	// Binary is redis-server (the default) or redis-sentinel.
	Binary string
	// Dir is the process's directory, for its log and any data. If empty,
	// Start makes a temporary directory that Stop removes.
	Dir string
	// Conf, if not empty, is written to redis.conf in Dir, which is passed
	// as the first argument (redis-sentinel needs a config file it can
	// rewrite).
	Conf string
	// Cluster requires the cluster bus port (the port plus 10000) to be
	// free as well.
	Cluster bool
	// Args are appended to the command line (for example "--maxmemory",
	// "1mb").
	Args []string
}

// A Server is one private redis-server (or redis-sentinel) process on a
// loopback port. Its methods are safe for concurrent use.
type Server struct {
	bin    string // the binary's path
	conf   string // the config file passed first; "" for none
	port   int
	dir    string
	ownDir bool     // dir was made by Start and is removed by Stop
	args   []string // extra arguments, kept for Restart

	serverproc.Proc // the process: Kill, Restart, Pause, Resume, State
}

// Start starts a server with persistence off on a free loopback port and
// waits until it answers PING. The process is killed if the process that
// started it dies; otherwise the caller ends it with Stop.
func Start(o Options) (*Server, error) {
	if o.Binary == "" {
		o.Binary = "redis-server"
	}
	bin, err := LookPath(o.Binary)
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: o.Dir, args: o.Args}
	s.Init("redisproc", s.Addr, s.launch, nil)
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "redisproc"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	if o.Conf != "" {
		s.conf = filepath.Join(s.dir, "redis.conf")
	}
	var lastErr error
	for range 10 {
		if s.port, lastErr = freePort(o.Cluster); lastErr != nil {
			continue
		}
		// Each try starts from the config as given: a sentinel rewrites it.
		if s.conf != "" {
			if err := os.WriteFile(s.conf, []byte(o.Conf), 0o600); err != nil {
				s.Stop()
				return nil, fmt.Errorf("redisproc: writing %s: %w", s.conf, err)
			}
		}
		// Another process may take the port between the probe and the
		// start: then try another one.
		if lastErr = s.Launch(); lastErr == nil {
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("redisproc: could not start %s: %w", o.Binary, lastErr)
}

// freePort returns a loopback port that is free now. Cluster nodes also need
// port+10000 (the cluster bus), so the range is kept below 55536.
func freePort(cluster bool) (int, error) {
	if cluster {
		return serverproc.FreePort(10000)
	}
	return serverproc.FreePort()
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch() (*exec.Cmd, error) {
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
	cmd := exec.Command(s.bin, args...)
	// The server dies with the process that started it, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Stdout and stderr stay nil (the null device), so exec starts no copying
	// goroutines that a leak check would see.
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisproc: starting %s: %w", s.bin, err)
	}
	if err := serverproc.WaitReady(cmd, StartTimeout, 5*time.Millisecond, func() error { return ping(s.Addr()) }); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("redisproc: %s on port %d did not answer PING: %v; log:\n%s",
			filepath.Base(s.bin), s.port, err, serverproc.Tail(filepath.Join(s.dir, "redis.log"), 2000))
	}
	return cmd, nil
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

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Stop kills the server if it is running and removes its directory if
// Start made it. It may be called more than once.
func (s *Server) Stop() {
	s.Halt()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}
