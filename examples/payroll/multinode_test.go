package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/redistest"
)

// closing is one "payroll closed" line of a node.
type closing struct {
	Msg   string `json:"msg"`
	Fire  string `json:"fire"`
	Node  string `json:"node"`
	Token uint64 `json:"token"`
}

// cluster runs payroll nodes and collects what they log.
type cluster struct {
	t     *testing.T
	bin   string
	mu    sync.Mutex // protects runs and procs
	runs  []closing
	procs map[string]*exec.Cmd
	seen  chan struct{} // a line arrived
}

func buildPayroll(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "payroll")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func (c *cluster) start(node string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"--node", node, "--log-format", "json", "--for", "2m"}, args...)...)
	// A node killed while it holds the lock blocks the others for a lease.
	cmd.Env = append(os.Environ(), "PAYROLL_LOCK_TTL=3s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.procs[node] = cmd
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l closing
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				c.t.Logf("%s: %s", node, sc.Text())
				continue
			}
			if l.Msg == "payroll closed" {
				c.mu.Lock()
				c.runs = append(c.runs, l)
				c.mu.Unlock()
				select {
				case c.seen <- struct{}{}:
				default:
				}
			} else if l.Msg != "" && l.Msg != "accounts reconciled" {
				c.t.Logf("%s: %s", node, sc.Text())
			}
		}
	}()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-done
	})
}

// fires returns the runs of each fire from the fire from on.
func (c *cluster) fires(from string) map[string][]closing {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string][]closing{}
	for _, r := range c.runs {
		if r.Fire >= from {
			m[r.Fire] = append(m[r.Fire], r)
		}
	}
	return m
}

// waitFires waits until at least n distinct fires from the fire from on
// have run, and returns them in order.
func (c *cluster) waitFires(from string, n int, within time.Duration) []string {
	c.t.Helper()
	deadline := time.After(within)
	for len(c.fires(from)) < n {
		select {
		case <-c.seen:
		case <-deadline:
			c.t.Fatalf("only %d fires from %q on within %v, want %d", len(c.fires(from)), from, within, n)
		}
	}
	var keys []string
	for k := range c.fires(from) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkExactlyOnce fails unless every fire from the fire from on ran exactly
// once and consecutive fires are one second apart, and returns the last run.
func (c *cluster) checkExactlyOnce(from string) closing {
	c.t.Helper()
	m := c.fires(from)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var prev time.Time
	for _, k := range keys {
		if len(m[k]) != 1 {
			c.t.Errorf("fire %s ran %d times: %+v", k, len(m[k]), m[k])
		}
		at, err := time.Parse(fireFormat, k)
		if err != nil {
			c.t.Fatalf("fire %q: %v", k, err)
		}
		if !prev.IsZero() && at.Sub(prev) != time.Second {
			c.t.Errorf("gap between fires %s and %s", prev.Format(fireFormat), k)
		}
		prev = at
	}
	return m[keys[len(keys)-1]][0]
}

// Three nodes on one Redis with clocks 300ms apart run every fire of an
// @every 1s schedule exactly once; after the node that ran last is killed,
// the others go on running every fire exactly once.
func TestMultiNodeExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 15s")
	}
	srv := redistest.Start(t)
	c := &cluster{t: t, bin: buildPayroll(t), procs: map[string]*exec.Cmd{}, seen: make(chan struct{}, 1)}
	common := []string{"--redis", "redis://" + srv.Addr(), "--namespace", "e2e", "--cron", "@every 1s"}
	c.start("n0", append(common, "--clock-offset", "0s")...)
	c.start("n1", append(common, "--clock-offset", "300ms")...)
	c.start("n2", append(common, "--clock-offset", "-300ms")...)

	c.waitFires("", 10, 40*time.Second)
	last := c.checkExactlyOnce("")

	c.mu.Lock()
	victim := c.procs[last.Node]
	c.mu.Unlock()
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, which ran fire %s", last.Node, last.Fire)
	lastAt, _ := time.Parse(fireFormat, last.Fire)
	next := lastAt.Add(time.Second).Format(fireFormat)
	// The node was most likely killed between its run and its release
	// (the test kills it on seeing the run's log line), so the lock stays
	// held until its 3s lease expires: a gap there is expected, and none
	// after it.
	after := c.waitFires(next, 5, 30*time.Second)
	for _, r := range c.fires(next) {
		if r[0].Node == last.Node {
			t.Errorf("killed node %s ran fire %s", last.Node, r[0].Fire)
		}
	}
	c.checkExactlyOnce(after[0])

	// The fenced ledger has each fire once.
	entries, err := newRedisLedger(srv.Client(), "e2e").entries(context.Background(), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	perFire := map[string]int{}
	for _, e := range entries {
		perFire[strings.Fields(e)[0]]++
	}
	for fire, n := range perFire {
		if n != 1 {
			t.Errorf("ledger has fire %s %d times", fire, n)
		}
	}
	if len(perFire) < 15 {
		t.Errorf("ledger has %d fires, want at least 15", len(perFire))
	}
}
