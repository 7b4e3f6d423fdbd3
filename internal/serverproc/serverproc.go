// Package serverproc holds what internal/redisproc and internal/pgproc
// share to run a private server process: a free loopback port, waiting
// until the server answers, whether a process has exited, the tail of its
// log, and the process's faults (kill, restart, pause, resume). It does not
// import package testing.
package serverproc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FreePort returns a loopback port that is free now, with port+off free
// too for each off in also (a Redis cluster node's bus port is its port
// plus 10000). It is below the kernel's ephemeral ports, from which every
// outgoing connection takes its own: a server restarted on its port (a
// test's kill and restart) found it taken by a client's connection
// otherwise (an etcd member's peer port, in make test). Without room below
// them, it is in [20000, 50000).
func FreePort(also ...int) (int, error) {
	lo, n := 20000, 30000
	top := 0 // the largest offset
	for _, off := range also {
		top = max(top, off)
	}
	if eph := ephemeralLow(); eph-2000-top >= 1000 {
		lo, n = 2000, eph-2000-top
	}
	for range 100 {
		port := lo + rand.IntN(n)
		free := portFree(port)
		for _, off := range also {
			free = free && portFree(port+off)
		}
		if free {
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}

// ephemeralLow returns the first of the kernel's ephemeral ports
// (net.ipv4.ip_local_port_range), 0 if it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	lo, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
	n, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil {
		return 0
	}
	return n
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// WaitReady calls ready every interval until it returns nil, for at most
// timeout, and returns nil then; or ready's last error once the timeout
// passed or cmd exited. The caller kills cmd on an error.
func WaitReady(cmd *exec.Cmd, timeout, interval time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		if Exited(cmd.Process.Pid) {
			return fmt.Errorf("exited: %w", err)
		}
		time.Sleep(interval)
	}
}

// Exited reports whether the process pid has exited, without reaping it:
// an exited child is a zombie ("Z") in /proc until Wait.
func Exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// Tail returns the last max bytes of the file at path, or "" if it cannot
// be read.
func Tail(path string, max int) string {
	b, _ := os.ReadFile(path)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// A Proc is a server's process as tests drive it: killed (a crash),
// restarted, paused and resumed. A server embeds it and calls Init with how
// to start its process. Its methods are safe for concurrent use.
type Proc struct {
	name   string                    // the package, for errors
	addr   func() string             // the server's address, for errors
	launch func() (*exec.Cmd, error) // starts the process and waits until it answers
	family func(pid int) []int       // the processes pid forked that signals must reach too

	mu     sync.Mutex // protects the fields below
	cmd    *exec.Cmd  // the running process, nil once killed
	paused bool
}

// Init sets how p starts its process (launch, which returns it once the
// server answers) and which processes besides it a signal must reach
// (family, listed while the process is stopped so that it forks no new
// one; nil for none). name and addr make errors.
func (p *Proc) Init(name string, addr func() string, launch func() (*exec.Cmd, error), family func(pid int) []int) {
	p.name, p.addr, p.launch, p.family = name, addr, launch, family
	if p.family == nil {
		p.family = func(int) []int { return nil }
	}
}

// Launch starts the process and waits until the server answers.
func (p *Proc) Launch() error {
	cmd, err := p.launch()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmd = cmd
	return nil
}

// State reports whether the server is running (not killed) and whether it
// is paused.
func (p *Proc) State() (running, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil, p.paused
}

// Kill stops the server and every process it forked with SIGKILL, a crash,
// and waits until they are gone.
func (p *Proc) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s: Kill of server %s that is not running", p.name, p.addr())
	}
	p.killLocked()
	return nil
}

// Halt kills the server if it is running.
func (p *Proc) Halt() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.killLocked()
	}
}

func (p *Proc) killLocked() {
	pid := p.cmd.Process.Pid
	// Stopped first, it forks nothing while its family is listed.
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	family := p.family(pid)
	for _, f := range family {
		_ = syscall.Kill(f, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	p.paused = false
	_ = p.cmd.Wait()
	// A restart must not find what they held (ports, shared memory)
	// still held.
	for _, f := range family {
		for range 500 {
			if Exited(f) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.cmd = nil
}

// Restart kills the server if it is running and starts it again on the same
// port, waiting until it answers.
func (p *Proc) Restart() error {
	p.Halt()
	if err := p.Launch(); err != nil {
		return fmt.Errorf("%s: restart: %w", p.name, err)
	}
	return nil
}

// Pause stops the server and its family with SIGSTOP: connections stay
// open but nothing is answered, as with a hung server or a network
// partition.
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT, false) }

func (p *Proc) signal(sig syscall.Signal, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s: signal %v to server %s that is not running", p.name, sig, p.addr())
	}
	pid := p.cmd.Process.Pid
	// The process stops first and resumes last, so that it forks nothing
	// the signal would miss.
	if sig == syscall.SIGSTOP {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("%s: signal %v to server %s: %w", p.name, sig, p.addr(), err)
		}
	}
	for _, f := range p.family(pid) {
		_ = syscall.Kill(f, sig)
	}
	if sig != syscall.SIGSTOP {
		if err := syscall.Kill(pid, sig); err != nil {
			return fmt.Errorf("%s: signal %v to server %s: %w", p.name, sig, p.addr(), err)
		}
	}
	p.paused = paused
	return nil
}
