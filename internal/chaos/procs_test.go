package chaos

import (
	"bufio"
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
)

// A line is one JSON log line of a node process, with the fields the tests
// read from ndigo's log and from the node's and payroll's own lines.
type line struct {
	Proc        string    `json:"-"` // the process that wrote it
	At          time.Time `json:"-"` // when the test read it
	Level       string    `json:"level"`
	Msg         string    `json:"msg"`
	Task        string    `json:"task"`
	Fire        string    `json:"fire"`
	Node        string    `json:"node"`
	Token       uint64    `json:"token"`
	Err         string    `json:"err"`
	Cause       string    `json:"cause"`
	Extend      string    `json:"extend"`
	Ledger      string    `json:"ledger"`
	StartLedger string    `json:"start_ledger"`
	Goroutines  int       `json:"goroutines"`
}

// procs runs node processes and collects their log lines.
type procs struct {
	t       *testing.T
	mu      sync.Mutex // protects the fields below
	lines   []line
	procs   map[string]*proc
	changed chan struct{} // closed and replaced on every new line or exit
}

// A proc is one node process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited closes
}

func newProcs(t *testing.T) *procs {
	return &procs{t: t, procs: map[string]*proc{}, changed: make(chan struct{})}
}

func (p *procs) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// start starts a node process named name and reads its stderr.
func (p *procs) start(name string, cmd *exec.Cmd) {
	p.t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	// A node outlives nothing: if the test binary dies, so does the node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	pr := &proc{cmd: cmd, exited: make(chan struct{})}
	p.mu.Lock()
	p.procs[name] = pr
	p.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l := line{Proc: name, At: time.Now()}
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg == "" {
				// go-redis logs every failed dial on its own; the
				// scheduler's lines say what failed.
				if !strings.HasPrefix(sc.Text(), "redis: ") {
					p.t.Logf("%s: %s", name, sc.Text())
				}
				continue
			}
			if l.Level != "INFO" || (l.Msg != "run start" && l.Msg != "run end" && l.Msg != "payroll closed" && l.Msg != "accounts reconciled") {
				p.t.Logf("%s: %s", name, sc.Text())
			}
			p.mu.Lock()
			p.lines = append(p.lines, l)
			p.notify()
			p.mu.Unlock()
		}
		err := cmd.Wait()
		p.mu.Lock()
		pr.err = err
		close(pr.exited)
		p.notify()
		p.mu.Unlock()
	}()
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-pr.exited
	})
}

// startNode starts the test binary as a chaos node (see node_test.go) with
// env added to its environment.
func (p *procs) startNode(name, redisAddr string, env ...string) {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+roleNode, "CHAOS_NODE="+name, "CHAOS_REDIS="+redisAddr)
	cmd.Env = append(cmd.Env, env...)
	p.start(name, cmd)
}

// signal sends sig to the process named name.
func (p *procs) signal(name string, sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	pr := p.procs[name]
	p.mu.Unlock()
	if err := pr.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, name, err)
	}
}

// waitExit waits until the process named name exits and returns Wait's
// error.
func (p *procs) waitExit(name string, within time.Duration) error {
	p.t.Helper()
	p.mu.Lock()
	pr := p.procs[name]
	p.mu.Unlock()
	select {
	case <-pr.exited:
		return pr.err
	case <-time.After(within):
		p.t.Fatalf("%s did not exit within %v", name, within)
		return nil
	}
}

// running reports whether the process named name has not exited.
func (p *procs) running(name string) bool {
	p.mu.Lock()
	pr := p.procs[name]
	p.mu.Unlock()
	select {
	case <-pr.exited:
		return false
	default:
		return true
	}
}

// all returns a copy of the lines read so far.
func (p *procs) all() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line(nil), p.lines...)
}

// waitLine waits until a line after the first skip lines satisfies ok, and
// returns it with its index. It fails the test after within.
func (p *procs) waitLine(what string, skip int, within time.Duration, ok func(line) bool) (line, int) {
	p.t.Helper()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		for i := skip; i < len(p.lines); i++ {
			if ok(p.lines[i]) {
				l := p.lines[i]
				p.mu.Unlock()
				return l, i
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("no %s within %v", what, within)
			return line{}, 0
		}
	}
}

// runs returns the lines with message msg, grouped by fire, from fire from
// on.
func (p *procs) runs(msg, from string) map[string][]line {
	m := map[string][]line{}
	for _, l := range p.all() {
		if l.Msg == msg && l.Fire >= from {
			m[l.Fire] = append(m[l.Fire], l)
		}
	}
	return m
}

// waitFires waits until n distinct fires from fire from on have a line with
// message msg, and returns them sorted.
func (p *procs) waitFires(msg, from string, n int, within time.Duration) []string {
	p.t.Helper()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		m := p.runs(msg, from)
		if len(m) >= n {
			return sortedKeys(m)
		}
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("only %d fires with %q from %q on within %v, want %d", len(m), msg, from, within, n)
			return nil
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkEveryFireOnce fails t unless each fire in fires (sorted) has exactly
// one line with message msg and the fires are period apart.
func (p *procs) checkEveryFireOnce(msg string, fires []string, period time.Duration) {
	p.t.Helper()
	m := p.runs(msg, "")
	var prev time.Time
	for _, f := range fires {
		if n := len(m[f]); n != 1 {
			p.t.Errorf("fire %s ran %d times: %+v", f, n, m[f])
		}
		at := parseFire(p.t, f)
		if !prev.IsZero() && at.Sub(prev) != period {
			p.t.Errorf("fires lost between %s and %s", prev.Format(fireFormat), f)
		}
		prev = at
	}
}

func parseFire(t *testing.T, f string) time.Time {
	t.Helper()
	at, err := time.Parse(fireFormat, f)
	if err != nil {
		t.Fatalf("fire %q: %v", f, err)
	}
	return at
}

func fireString(t time.Time) string { return t.UTC().Format(fireFormat) }

var (
	payrollOnce sync.Once
	payrollBin  string
	payrollErr  error
	payrollOut  []byte
)

// buildPayroll builds the payroll example once per test binary run.
func buildPayroll(t *testing.T) string {
	t.Helper()
	payrollOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chaos-payroll")
		if err != nil {
			payrollErr = err
			return
		}
		payrollBin = filepath.Join(dir, "payroll")
		payrollOut, payrollErr = exec.Command("go", "build", "-o", payrollBin, "github.com/ndigo/ndigo/examples/payroll").CombinedOutput()
	})
	if payrollErr != nil {
		t.Fatalf("go build examples/payroll: %v\n%s", payrollErr, payrollOut)
	}
	return payrollBin
}

// startPayroll starts a payroll example node on redisAddr with an @every 1s
// schedule and the given lock TTL.
func (p *procs) startPayroll(name, redisAddr, ttl string, args ...string) {
	p.t.Helper()
	cmd := exec.Command(buildPayroll(p.t), append([]string{"--redis", "redis://" + redisAddr, "--namespace", "chaos",
		"--node", name, "--cron", "@every 1s", "--log-format", "json", "--for", "5m"}, args...)...)
	cmd.Env = append(os.Environ(), "PAYROLL_LOCK_TTL="+ttl)
	p.start(name, cmd)
}
