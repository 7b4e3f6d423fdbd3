// Package nodetest runs node processes for tests, the payroll example or a
// test binary re-executed as a node, and collects the JSON log lines they
// write on stderr, so that a test can wait for a run, kill, pause or stop
// the node that made it, and check that every fire ran exactly once.
package nodetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FireFormat is how nodes log a fire: RFC 3339 with milliseconds, in UTC,
// the same text on every node.
const FireFormat = "2006-01-02T15:04:05.000Z07:00"

// A Line is one JSON log line of a node process, with the fields tests read
// from ndigo's log and from the nodes' own lines.
type Line struct {
	Proc        string        `json:"-"`    // the process that wrote it
	At          time.Time     `json:"-"`    // when the test read it
	Time        time.Time     `json:"time"` // when the node wrote it, by the real clock
	Level       string        `json:"level"`
	Msg         string        `json:"msg"`
	Task        string        `json:"task"`
	Fire        string        `json:"fire"`
	Node        string        `json:"node"`
	Token       uint64        `json:"token"`
	Err         string        `json:"err"`
	Cause       string        `json:"cause"`
	Extend      string        `json:"extend"`
	Ledger      string        `json:"ledger"`
	StartLedger string        `json:"start_ledger"`
	Goroutines  int           `json:"goroutines"`
	Manual      bool          `json:"manual"`   // a run asked for by hand
	Addr        string        `json:"addr"`     // the admin endpoints' address
	Tenant      string        `json:"tenant"`   // a tenant report's tenant
	Members     int           `json:"members"`  // a membership change's member count
	Lateness    time.Duration `json:"lateness"` // a late fire's, by the node's clock
}

// Procs runs node processes and collects their log lines. Its methods fail
// the test that made it.
type Procs struct {
	t       testing.TB
	payroll string // the payroll binary, once built

	mu      sync.Mutex // protects the fields below
	lines   []Line
	procs   map[string]*proc
	changed chan struct{} // closed and replaced on every new line or exit
}

// A proc is one node process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited closes
}

// New returns a Procs for t. Every process it starts is killed by
// t.Cleanup.
func New(t testing.TB) *Procs {
	return &Procs{t: t, procs: map[string]*proc{}, changed: make(chan struct{})}
}

func (p *Procs) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Start starts cmd as the node process named name and reads its stderr:
// lines that are not routine run logs are logged to the test.
func (p *Procs) Start(name string, cmd *exec.Cmd) {
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
		sc.Buffer(nil, 1<<20) // a line past the default 64 KiB would end the reading
		for sc.Scan() {
			l := Line{Proc: name, At: time.Now()}
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
		if err := sc.Err(); err != nil {
			p.t.Logf("%s: its log is no longer read: %v", name, err)
			_, _ = io.Copy(io.Discard, stderr) // the node must not block on a full pipe
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

// StartPayroll starts a payroll example node named name on the Redis at
// redisAddr, in namespace, with an @every 1s schedule, the lock TTL ttl and
// args added to its command line. The example is built on the first call.
func (p *Procs) StartPayroll(name, redisAddr, namespace, ttl string, args ...string) {
	p.t.Helper()
	p.StartPayrollOn(name, "--redis", "redis://"+redisAddr, namespace, ttl, args...)
}

// StartPayrollOn is StartPayroll on the lock store that storeFlag names,
// "--redis", "--postgres" or "--etcd", at url.
func (p *Procs) StartPayrollOn(name, storeFlag, url, namespace, ttl string, args ...string) {
	p.t.Helper()
	if p.payroll == "" {
		p.payroll = BuildPayroll(p.t)
	}
	cmd := exec.Command(p.payroll, append([]string{storeFlag, url, "--namespace", namespace,
		"--node", name, "--cron", "@every 1s", "--log-format", "json", "--for", "5m"}, args...)...)
	cmd.Env = append(os.Environ(), "PAYROLL_LOCK_TTL="+ttl)
	p.Start(name, cmd)
}

// Signal sends sig to the process named name.
func (p *Procs) Signal(name string, sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	pr := p.procs[name]
	p.mu.Unlock()
	if err := pr.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, name, err)
	}
}

// WaitExit waits until the process named name exits and returns Wait's
// error. It fails the test after within.
func (p *Procs) WaitExit(name string, within time.Duration) error {
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

// Running reports whether the process named name has not exited.
func (p *Procs) Running(name string) bool {
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

// All returns a copy of the lines read so far.
func (p *Procs) All() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// WaitLine waits until a line after the first skip lines satisfies ok, and
// returns it with its index. It fails the test after within, saying that
// what did not come.
func (p *Procs) WaitLine(what string, skip int, within time.Duration, ok func(Line) bool) (Line, int) {
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
			return Line{}, 0
		}
	}
}

// Runs returns the lines with message msg, grouped by fire, from fire from
// on.
func (p *Procs) Runs(msg, from string) map[string][]Line {
	m := map[string][]Line{}
	for _, l := range p.All() {
		if l.Msg == msg && l.Fire >= from {
			m[l.Fire] = append(m[l.Fire], l)
		}
	}
	return m
}

// WaitFires waits until n distinct fires from fire from on have a line with
// message msg, and returns all those fires, sorted. It fails the test after
// within.
func (p *Procs) WaitFires(msg, from string, n int, within time.Duration) []string {
	p.t.Helper()
	deadline := time.After(within)
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		m := p.Runs(msg, from)
		if len(m) >= n {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return keys
		}
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("only %d fires with %q from %q on within %v, want %d", len(m), msg, from, within, n)
			return nil
		}
	}
}

// MsgStillRunning is the scheduler's line for a fire skipped because the
// task's previous run was still going (its default overlap policy).
const MsgStillRunning = "previous run still going; fire skipped"

// CheckEveryFireOnce fails the test unless each fire in fires (sorted) has
// exactly one line with message msg and the fires are period apart, or the
// fires between two of them were skipped by the node that ran the first
// because its run was still going: on a loaded machine a run can outlast
// its period, and the task's default overlap skips the next fire.
func (p *Procs) CheckEveryFireOnce(msg string, fires []string, period time.Duration) {
	p.t.Helper()
	m := p.Runs(msg, "")
	skipped := map[int64][]string{} // by fire (Unix ms), the processes that skipped it as still running
	for _, l := range p.All() {
		if l.Msg == MsgStillRunning {
			if at, err := time.Parse(time.RFC3339Nano, l.Fire); err == nil {
				skipped[at.UnixMilli()] = append(skipped[at.UnixMilli()], l.Proc)
			}
		}
	}
	var prev time.Time
	var prevProc string
	for _, f := range fires {
		if n := len(m[f]); n != 1 {
			p.t.Errorf("fire %s ran %d times: %+v", f, n, m[f])
		}
		at := ParseFire(p.t, f)
		for gap := prev.Add(period); !prev.IsZero() && gap.Before(at); gap = gap.Add(period) {
			if !slices.Contains(skipped[gap.UnixMilli()], prevProc) {
				p.t.Errorf("fires lost between %s and %s: %s ran nowhere, and %s, which ran the one before, did not skip it as still running",
					prev.Format(FireFormat), f, gap.Format(FireFormat), prevProc)
				break
			}
		}
		if at.Sub(prev)%period != 0 && !prev.IsZero() {
			p.t.Errorf("fires %s and %s are not a whole number of periods (%v) apart", prev.Format(FireFormat), f, period)
		}
		prev, prevProc = at, ""
		if len(m[f]) > 0 {
			prevProc = m[f][0].Proc
		}
	}
}

// ParseFire parses a fire logged in FireFormat, failing t if it does not
// parse.
func ParseFire(t testing.TB, f string) time.Time {
	t.Helper()
	at, err := time.Parse(FireFormat, f)
	if err != nil {
		t.Fatalf("fire %q: %v", f, err)
	}
	return at
}

// FireString formats a fire as nodes log it.
func FireString(t time.Time) string { return t.UTC().Format(FireFormat) }

// payrollBuild is the payroll example built once per test process.
var payrollBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// BuildPayroll builds the payroll example with the tag etcd (so that it
// takes --etcd), once per test process, and returns the binary's path. The binary lives in a directory of its own
// until [RemoveBuilds], which the TestMain of a package that calls
// BuildPayroll runs when its tests end.
func BuildPayroll(t testing.TB) string {
	t.Helper()
	b := &payrollBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "ndigo-payroll-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "payroll")
		if out, err := exec.Command("go", "build", "-tags", "etcd", "-o", b.bin, "github.com/ndigo/ndigo/examples/payroll").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build examples/payroll: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// RemoveBuilds removes what BuildPayroll built. It is a goleak.Cleanup
// function, for a TestMain: goleak.VerifyTestMain(m, goleak.Cleanup(nodetest.RemoveBuilds)).
func RemoveBuilds(int) {
	if payrollBuild.dir != "" {
		_ = os.RemoveAll(payrollBuild.dir)
	}
}
