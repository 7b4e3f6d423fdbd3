// Package pgproc starts a private PostgreSQL server (initdb into a fresh
// temporary directory, then postgres on a free loopback port) with
// durability to disk off (fsync=off, full_page_writes=off; commits still reach
// the operating system, so they survive a SIGKILL of the server),
// and kills, restarts, pauses and resumes it to inject faults. It does not
// import package testing: internal/pgtest wraps it for tests.
//
// Run as root, it runs initdb and postgres as the postgres system user
// (PostgreSQL refuses to run as root) and hands it the directory. The
// binaries are looked up in PATH, then under /usr/lib/postgresql/*/bin (the
// Debian layout), newest version first.
package pgproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/serverproc"
)

// StartTimeout bounds how long a server may take to accept connections.
const StartTimeout = 30 * time.Second

// installHint completes the error when the PostgreSQL binaries are missing.
const installHint = "install PostgreSQL (Debian: apt-get install postgresql; make test does it)"

// BinDir returns the directory holding initdb and postgres, or an error
// that says how to install them.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: compare the version directories as numbers.
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		_, err1 := os.Stat(filepath.Join(dir, "initdb"))
		_, err2 := os.Stat(filepath.Join(dir, "postgres"))
		if err1 == nil && err2 == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgproc: initdb and postgres not found in PATH nor under /usr/lib/postgresql/*/bin: %s", installHint)
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// A Server is one private PostgreSQL server on a loopback port, with the
// trust authentication of the superuser postgres. Its methods are safe for
// concurrent use.
type Server struct {
	bin  string // the directory of initdb and postgres
	dir  string // the temporary directory: data/ and postgres.log
	port int
	cred *syscall.Credential // the postgres user's, when run as root; else nil

	serverproc.Proc // the postmaster and its backends: Kill, Restart, Pause, Resume, State
}

// Start runs initdb into a new temporary directory and starts postgres on a
// free loopback port, waiting until it accepts connections. The server is
// killed if the process that started it dies; otherwise the caller ends it
// with Stop, which also removes the directory.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	s.Init("pgproc", s.Addr, s.launch, childrenOf)
	if s.dir, err = os.MkdirTemp("", "pgproc"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if s.cred, err = postgresUser(); err != nil {
			s.Stop()
			return nil, err
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			s.Stop()
			return nil, fmt.Errorf("pgproc: %w", err)
		}
	}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("pgproc: initdb: %w\n%s", err, out)
	}
	var lastErr error
	for range 10 {
		if s.port, lastErr = serverproc.FreePort(); lastErr != nil {
			continue
		}
		// Another process may take the port between the probe and the
		// start: then try another one.
		if lastErr = s.Launch(); lastErr == nil {
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("pgproc: could not start postgres: %w", lastErr)
}

// postgresUser returns the credential of the postgres system user.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgproc: running as root needs the postgres system user (PostgreSQL refuses root): %w; %s", err, installHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgproc: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command returns a command run as the postgres user when we are root,
// killed if this process dies (its backends then exit on their own).
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

// launch starts postgres on the data directory and waits until it accepts
// connections.
func (s *Server) launch() (*exec.Cmd, error) {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	defer logf.Close()
	if s.cred != nil {
		_ = logf.Chown(int(s.cred.Uid), int(s.cred.Gid))
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data(),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=100",
		"-c", "shared_buffers=32MB",
	)
	// An *os.File as output: exec starts no copying goroutine that a leak
	// check would see.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgproc: starting postgres: %w", err)
	}
	if err := serverproc.WaitReady(cmd, StartTimeout, 10*time.Millisecond, s.ping); err != nil {
		for _, pid := range childrenOf(cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("pgproc: postgres on port %d did not accept connections: %v; log:\n%s", s.port, err, serverproc.Tail(s.logPath(), 3000))
	}
	return cmd, nil
}

// ping opens one connection and runs SELECT 1.
func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "SELECT 1")
	return err
}

// URL returns a connection URL for the superuser postgres on database
// postgres, without TLS.
func (s *Server) URL() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// childrenOf lists the processes whose parent is ppid: the postmaster's
// backends and auxiliary processes. Each is its own process group leader
// (PostgreSQL calls setsid in every child), so a signal to the
// postmaster's group would not reach them.
func childrenOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// After the parenthesised command name: state, then ppid.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Stop kills the server if it is running and removes its directory. It may
// be called more than once.
func (s *Server) Stop() {
	s.Halt()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
