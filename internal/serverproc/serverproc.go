// Package serverproc holds what internal/redisproc and internal/pgproc
// share to run a private server process: a free loopback port, waiting
// until the server answers, whether a process has exited, and the tail of
// its log. It does not import package testing.
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
	"time"
)

// FreePort returns a loopback port in [20000, 50000) that is free now,
// with port+off free too for each off in also (a Redis cluster node's bus
// port is its port plus 10000).
func FreePort(also ...int) (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(30000)
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
