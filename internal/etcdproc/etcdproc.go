// Package etcdproc starts private etcd clusters (one member, or three to
// inject faults) as processes on free loopback ports, each member with its
// own temporary data directory, and kills, restarts, pauses, resumes and
// stops their members. It does not import package testing:
// internal/etcdtest wraps it for tests.
//
// The members run with fast raft timings (a 50ms heartbeat, a 500ms
// election timeout, pre-vote on), so that a killed leader is replaced in
// about a second. etcd derives its minimum lease TTL from them: 1.5
// election timeouts, rounded up to whole seconds, so MinLeaseTTL is 1s, the
// smallest TTL a grant can ask for anyway; etcd raises a shorter one to it.
// A lease expires on the leader, which looks for expired leases every
// 500ms, so a revocation can come up to that late; a new leader gives
// every lease its full TTL again, plus an election timeout.
//
// The data directories are on tmpfs (/dev/shm) when there is one, so that
// etcd's fsyncs cost nothing; the data still survives a member's SIGKILL
// and restart. The binary is Debian's etcd-server package's (etcd 3.4; the
// flags are 3.4's), looked up in PATH, then as /usr/bin/etcd.
package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ndigo/ndigo/internal/serverproc"
)

// The raft timings every member runs with.
const (
	// HeartbeatInterval is --heartbeat-interval.
	HeartbeatInterval = 50 * time.Millisecond
	// ElectionTimeout is --election-timeout: how long a follower waits
	// without a heartbeat before it campaigns.
	ElectionTimeout = 500 * time.Millisecond
	// MinLeaseTTL is the shortest lease the members grant: etcd raises a
	// shorter TTL to ceil(1.5 election timeouts) in whole seconds, here
	// ceil(750ms) = 1s.
	MinLeaseTTL = time.Second
)

// StartTimeout bounds how long members may take to answer once started
// (with the others needed for a quorum), and a graceful Stop.
const StartTimeout = 20 * time.Second

// probeTimeout bounds one probe of a member (a read or a Status).
const probeTimeout = time.Second

// installHint completes the error when etcd is missing.
const installHint = "install etcd (Debian: apt-get install etcd-server; make test does it)"

// LookPath returns the path of the etcd binary, in PATH or /usr/bin/etcd,
// or an error that says how to install it.
func LookPath() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	const debian = "/usr/bin/etcd"
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debian, nil
	}
	return "", fmt.Errorf("etcdproc: etcd not found in PATH nor as /usr/bin/etcd: %s", installHint)
}

// Options say what StartCluster starts.
type Options struct {
	// Members is how many members the cluster has: 1 (the default) or more
	// (3 to survive the loss of one).
	Members int
	// Dir holds the members' directories, m0, m1, ... (data and log),
	// which StartCluster makes afresh, removing any already there. If
	// empty, StartCluster makes a temporary directory, on /dev/shm when it
	// can, that Stop removes.
	Dir string
	// Args are appended to every member's command line (for example
	// "--max-txn-ops", "1024").
	Args []string
}

// A Cluster is a private etcd cluster of members on loopback ports. Its
// methods are safe for concurrent use.
type Cluster struct {
	dir     string
	ownDir  bool
	members []*Member
}

// A Member is one etcd process of a cluster, with its own client and peer
// ports and data directory, which it keeps across Kill and Restart. Its
// methods are safe for concurrent use.
type Member struct {
	bin     string
	name    string
	dir     string        // data/ and etcd.log
	args    []string      // Options.Args
	initial string        // --initial-cluster
	token   string        // --initial-cluster-token
	client  int           // the client port
	peer    int           // the peer port
	id      atomic.Uint64 // the raft ID, learned from Status

	mu   sync.Mutex      // serializes Kill, Restart, Pause, Resume and Stop
	pid  int             // the last process launched; valid while proc runs
	proc serverproc.Proc // the process
}

// StartCluster starts o.Members etcd members as a new cluster on free
// loopback ports and waits until every member answers a linearizable read,
// which needs an elected leader. The processes are killed if the process
// that started them dies; otherwise the caller ends them with Stop.
func StartCluster(o Options) (*Cluster, error) {
	if o.Members == 0 {
		o.Members = 1
	}
	if o.Members < 0 {
		return nil, fmt.Errorf("etcdproc: StartCluster with %d members", o.Members)
	}
	bin, err := LookPath()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: o.Dir}
	if c.dir == "" {
		// On tmpfs when there is one, where etcd's fsyncs cost nothing.
		if c.dir, err = os.MkdirTemp("/dev/shm", "etcdproc"); err != nil {
			if c.dir, err = os.MkdirTemp("", "etcdproc"); err != nil {
				return nil, fmt.Errorf("etcdproc: %w", err)
			}
		}
		c.ownDir = true
	}
	for i := range o.Members {
		m := &Member{bin: bin, name: "m" + strconv.Itoa(i), args: o.Args}
		m.dir = filepath.Join(c.dir, m.name)
		m.proc.Init("etcdproc", m.Endpoint, m.launch, nil)
		c.members = append(c.members, m)
	}
	var lastErr error
	for range 5 {
		// Another process may take a port between the probe and the
		// start: then the member exits, and the cluster starts afresh on
		// other ports.
		if lastErr = c.start(); lastErr == nil {
			return c, nil
		}
		if !errors.Is(lastErr, errExited) {
			break
		}
	}
	c.Stop()
	return nil, fmt.Errorf("etcdproc: could not start a cluster of %d: %w", o.Members, lastErr)
}

// tokens makes every cluster's --initial-cluster-token unique.
var tokens atomic.Int64

// start picks ports, wipes the members' directories and starts the members,
// waiting until each answers.
func (c *Cluster) start() error {
	for _, m := range c.members {
		m.proc.Halt()
		if err := os.RemoveAll(m.dir); err != nil {
			return fmt.Errorf("etcdproc: %w", err)
		}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return fmt.Errorf("etcdproc: %w", err)
		}
	}
	taken := map[int]bool{}
	for _, m := range c.members {
		for _, port := range []*int{&m.client, &m.peer} {
			p, err := freePort(taken)
			if err != nil {
				return fmt.Errorf("etcdproc: %w", err)
			}
			*port = p
		}
	}
	peers := make([]string, len(c.members))
	for i, m := range c.members {
		peers[i] = m.name + "=" + m.peerURL()
	}
	token := fmt.Sprintf("etcdproc-%d-%d-%d", os.Getpid(), tokens.Add(1), rand.Int64())
	for _, m := range c.members {
		m.initial, m.token = strings.Join(peers, ","), token
	}
	// Every process first, then the waits: a member of several answers
	// only once a quorum of them has started.
	for _, m := range c.members {
		if err := m.proc.Launch(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(StartTimeout)
	for _, m := range c.members {
		if err := m.waitAnswer(deadline); err != nil {
			return err
		}
	}
	return nil
}

// freePort returns a free loopback port not in taken, and adds it there.
func freePort(taken map[int]bool) (int, error) {
	for range 100 {
		p, err := serverproc.FreePort()
		if err != nil {
			return 0, err
		}
		if !taken[p] {
			taken[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}

// Endpoints returns every member's client URL, in the order of Members.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Members returns the cluster's members, named m0, m1, ... in order.
func (c *Cluster) Members() []*Member { return append([]*Member(nil), c.members...) }

// Leader returns the member that is leader now: the one that a quorum of
// the members answering Status (all but the killed and paused ones) report
// as leader, itself among them. It waits until there is one, polling, until
// ctx is done.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	for {
		m, seen := c.leader(ctx)
		if m != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdproc: no leader agreed by a quorum of %d members (%s): %w",
				len(c.members)/2+1, seen, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leader asks every running, unpaused member for its Status at once, and
// returns the leader they agree on, or nil and what they answered.
func (c *Cluster) leader(ctx context.Context) (*Member, string) {
	type answer struct {
		leader uint64
		err    error
	}
	answers := make([]answer, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		if running, paused := m.proc.State(); !running || paused {
			answers[i].err = errors.New("down")
			if paused {
				answers[i].err = errors.New("paused")
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.status(ctx)
			if err == nil {
				answers[i].leader = st.Leader
			}
			answers[i].err = err
		}()
	}
	wg.Wait()
	var seen []string
	votes := map[uint64]int{}
	for i, a := range answers {
		m := c.members[i]
		if a.err != nil {
			seen = append(seen, fmt.Sprintf("%s: %v", m.name, a.err))
			continue
		}
		votes[a.leader]++
		seen = append(seen, fmt.Sprintf("%s: leader %x", m.name, a.leader))
	}
	for i, a := range answers {
		m := c.members[i]
		// Every member answering names it, and they are a quorum.
		if a.err == nil && a.leader != 0 && a.leader == m.id.Load() && len(votes) == 1 &&
			votes[a.leader] > len(c.members)/2 {
			return m, ""
		}
	}
	return nil, strings.Join(seen, "; ")
}

// Stop kills every member and removes the cluster's directory if
// StartCluster made it. It may be called more than once.
func (c *Cluster) Stop() {
	for _, m := range c.members {
		// After a Restart under way, not in the middle of it.
		m.mu.Lock()
		m.proc.Halt()
		m.mu.Unlock()
	}
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// Name returns the member's name (m0, m1, ...).
func (m *Member) Name() string { return m.name }

// Endpoint returns the member's client URL, http://127.0.0.1:port.
func (m *Member) Endpoint() string { return "http://" + m.Addr() }

// Addr returns the host:port of the member's client URL.
func (m *Member) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.client)) }

// ID returns the member's raft ID, or 0 before it first answered.
func (m *Member) ID() uint64 { return m.id.Load() }

// State reports whether the member is running (not killed nor stopped) and
// whether it is paused.
func (m *Member) State() (running, paused bool) { return m.proc.State() }

func (m *Member) peerURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peer))
}

// LogPath returns the path of the member's log, which its restarts append
// to.
func (m *Member) LogPath() string { return filepath.Join(m.dir, "etcd.log") }

// Tail returns the last max bytes of the member's log.
func (m *Member) Tail(max int) string { return serverproc.Tail(m.LogPath(), max) }

// launch starts the process and waits until it listens on its client port
// (it answers only once it is part of a quorum: waitAnswer waits for that).
func (m *Member) launch() (*exec.Cmd, error) {
	logf, err := os.OpenFile(m.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	defer logf.Close()
	args := []string{
		"--name", m.name,
		"--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", m.Endpoint(),
		"--advertise-client-urls", m.Endpoint(),
		"--listen-peer-urls", m.peerURL(),
		"--initial-advertise-peer-urls", m.peerURL(),
		// Read only when the data directory is empty: a restarted member
		// rejoins from its data.
		"--initial-cluster", m.initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", m.token,
		"--heartbeat-interval", strconv.Itoa(int(HeartbeatInterval / time.Millisecond)),
		"--election-timeout", strconv.Itoa(int(ElectionTimeout / time.Millisecond)),
		// A member that comes back (restarted, resumed) does not depose a
		// working leader with a higher term; etcd 3.5 turns it on by
		// default.
		"--pre-vote=true",
		"--logger", "zap",
		"--log-level", "warn",
		"--log-outputs", "stderr",
	}
	args = append(args, m.args...)
	cmd := exec.Command(m.bin, args...)
	cmd.Dir = m.dir
	// The member dies with the process that started it, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// An *os.File as output: exec starts no copying goroutine that a leak
	// check would see.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdproc: starting %s: %w", m.bin, err)
	}
	m.pid = cmd.Process.Pid
	listening := func() error {
		c, err := net.DialTimeout("tcp", m.Addr(), probeTimeout)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if err := serverproc.WaitReady(cmd, StartTimeout, 5*time.Millisecond, listening); err != nil {
		exited := serverproc.Exited(m.pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, m.failed("did not listen", exited, err)
	}
	return cmd, nil
}

// errExited marks the errors of a member that exited while it was awaited.
var errExited = errors.New("exited")

// failed returns the error of a member that did not start, with its log;
// it wraps errExited if the member had exited.
func (m *Member) failed(what string, exited bool, err error) error {
	if exited {
		// serverproc.WaitReady's error may say it already.
		err = fmt.Errorf("%w: %s", errExited, strings.TrimPrefix(err.Error(), "exited: "))
	}
	return fmt.Errorf("etcdproc: member %s on %s %s: %w; log:\n%s", m.name, m.Addr(), what, err, m.Tail(3000))
}

// waitAnswer waits until the member answers a linearizable read (it is then
// part of a quorum with a leader, and has applied what was committed before
// the read), until deadline or until it exits.
func (m *Member) waitAnswer(deadline time.Time) error {
	cli, err := m.probe()
	if err != nil {
		return fmt.Errorf("etcdproc: member %s: %w", m.name, err)
	}
	defer cli.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		_, err := cli.Get(ctx, "etcdproc/probe")
		if err == nil {
			var st *clientv3.StatusResponse
			if st, err = cli.Status(ctx, m.Endpoint()); err == nil {
				m.id.Store(st.Header.MemberId)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if serverproc.Exited(m.pid) {
			return m.failed("exited before it answered", true, err)
		}
		if time.Now().After(deadline) {
			return m.failed("did not answer", false, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// probe returns a quiet client of the member alone; the caller closes it.
func (m *Member) probe() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{m.Endpoint()},
		DialTimeout: probeTimeout,
		Logger:      zap.NewNop(),
	})
}

// status returns the member's Status, bounded by probeTimeout.
func (m *Member) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := m.probe()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := cli.Status(ctx, m.Endpoint())
	if err != nil {
		return nil, err
	}
	m.id.Store(st.Header.MemberId)
	return st, nil
}

// Kill stops the member with SIGKILL, a crash, and waits until it is gone.
// Its data stays for Restart.
func (m *Member) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.Kill()
}

// Restart kills the member if it is running and starts it again on the same
// data and ports, waiting until it has rejoined: until it answers a
// linearizable read, which needs a quorum of the cluster running.
func (m *Member) Restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.proc.Restart(); err != nil {
		return err
	}
	return m.waitAnswer(time.Now().Add(StartTimeout))
}

// Pause stops the member with SIGSTOP: its connections stay open but it
// answers nothing, to clients or peers, as with a hung machine or a network
// partition.
func (m *Member) Pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.Pause()
}

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.Resume()
}

// Stop ends the member gracefully with SIGTERM (a leader hands its
// leadership over first), resuming it if it is paused, and waits until it
// has exited, killing it after StartTimeout. Its data stays for Restart. It
// does nothing if the member is not running.
func (m *Member) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if running, _ := m.proc.State(); !running {
		return nil
	}
	// Under m.mu, a running member's pid is its live, unreaped process.
	_ = syscall.Kill(m.pid, syscall.SIGTERM)
	_ = syscall.Kill(m.pid, syscall.SIGCONT)
	var err error
	for deadline := time.Now().Add(StartTimeout); !serverproc.Exited(m.pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			err = fmt.Errorf("etcdproc: member %s on %s did not stop within %v of SIGTERM; killed; log:\n%s",
				m.name, m.Addr(), StartTimeout, m.Tail(3000))
			break
		}
	}
	m.proc.Halt() // reaps it
	return err
}
