package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A callgrindServer is a private redis-server run under valgrind's
// callgrind (-callgrind). The instructions it runs for a scenario do not
// move with what else the machine runs, unlike its time; everything is
// about 50 times slower under valgrind, so throughput means nothing then.
type callgrindServer struct {
	cmd   *exec.Cmd
	dir   string
	addr  string
	dumps int // dumps taken, which callgrind numbers from 1
}

func startCallgrind() (*callgrindServer, error) {
	for _, bin := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("-callgrind needs %s (Debian: apt-get install valgrind redis-server): %w", bin, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	dir, err := os.MkdirTemp("", "redislockbench-callgrind")
	if err != nil {
		return nil, err
	}
	s := &callgrindServer{dir: dir, addr: "127.0.0.1:" + port}
	s.cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.out"),
		"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	for start := time.Now(); c.Ping(context.Background()).Err() != nil; time.Sleep(200 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			s.stop()
			return nil, fmt.Errorf("redis-server under callgrind did not answer PING within a minute")
		}
	}
	return s, nil
}

// zero resets the server's instruction count.
func (s *callgrindServer) zero() error {
	return exec.Command("callgrind_control", "-z", strconv.Itoa(s.cmd.Process.Pid)).Run()
}

// dump returns the instructions the server ran since the last zero.
func (s *callgrindServer) dump() (int64, error) {
	if err := exec.Command("callgrind_control", "-d", strconv.Itoa(s.cmd.Process.Pid)).Run(); err != nil {
		return 0, err
	}
	s.dumps++
	f, err := os.Open(filepath.Join(s.dir, "cg.out."+strconv.Itoa(s.dumps)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no summary line in callgrind dump %d", s.dumps)
}

func (s *callgrindServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
}
