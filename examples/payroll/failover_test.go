package main

import (
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
)

var failoverAll = flag.Bool("failover.all", false, "run the failover tests on PostgreSQL and etcd too, not only on Redis (make chaos)")

const (
	// failoverTTL is the payroll lock's TTL in the failover tests.
	failoverTTL = 5 * time.Second
	// heartbeat is the nodes' membership heartbeat with that TTL: a
	// quarter of it, at most scheduling.DefaultHeartbeat (1s).
	heartbeat = time.Second
	// lateDeadline bounds a late fire's lateness: a takeover gives up on
	// the late fires still pending a lock TTL and two heartbeats after it,
	// and it comes three heartbeats after the dead member's last, which
	// the lease it held (the lock TTL) outlasts.
	lateDeadline = failoverTTL + 2*heartbeat
	lateMsg      = "running a fire late after a takeover"
)

// Three nodes run an @every 1s fire; the node that ran the last one (its
// owner) is killed (SIGKILL). Every instant from the first run to 8s past
// the kill plus a lease runs exactly once, but for the killed node's run in
// flight at the kill, which its claim may lose; no instant runs twice; the
// killed node runs nothing after the kill; the fires left by the dead owner
// run late on the node that takes over, within the late fires' deadline
// (a lock TTL and two heartbeats); and the shared ledger has each fire
// once, in order of fire and token. On Redis in make test; on PostgreSQL
// and etcd too in make chaos.
func TestOwnerKilledLosesNoFire(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 25s on each store")
	}
	eachStore(t, *failoverAll, ownerKilledLosesNoFire)
}

func ownerKilledLosesNoFire(t *testing.T, storeFlag, url string, l ledger) {
	p := startCluster(t, storeFlag, url, failoverTTL)
	fires := p.WaitFires(closed, "", 10, 40*time.Second)
	last := p.Runs(closed, fires[len(fires)-1])[fires[len(fires)-1]][0]
	killedAt := time.Now()
	p.Signal(last.Proc, syscall.SIGKILL)
	_ = p.WaitExit(last.Proc, 10*time.Second)
	t.Logf("killed %s, which ran fire %s", last.Proc, last.Fire)

	end := nodetest.ParseFire(t, last.Fire).Add(failoverTTL + 8*time.Second)
	p.WaitFires(closed, nodetest.FireString(end), 1, 60*time.Second)
	// The killed node's clock is at most 300ms ahead: it started no run
	// of a later instant than inFlight.
	inFlight := nodetest.FireString(killedAt.Add(300 * time.Millisecond))
	lost := checkInstants(t, p, nodetest.ParseFire(t, fires[0]), end)
	if len(lost) > 1 || len(lost) == 1 && (lost[0] <= last.Fire || lost[0] > inFlight) {
		t.Errorf("fires lost: %v; want at most one, the killed node's run in flight at the kill (after %s, at most %s)",
			lost, last.Fire, inFlight)
	}
	for _, r := range p.Runs(closed, inFlight) {
		for _, run := range r {
			if run.Proc == last.Proc && run.Fire > inFlight {
				t.Errorf("killed node %s ran fire %s", last.Proc, run.Fire)
			}
		}
	}
	var late []time.Duration
	for _, ln := range p.All() {
		if ln.Msg == lateMsg {
			late = append(late, ln.Lateness)
			if ln.Lateness >= lateDeadline {
				t.Errorf("%s ran a fire late by %v, want less than %v: %+v", ln.Proc, ln.Lateness, lateDeadline, ln)
			}
		}
	}
	t.Logf("%d fires ran late after the takeover, lateness %v (deadline %v); the latest run of all came %v after its instant",
		len(late), late, lateDeadline, maxLateness(t, p))
	checkLedger(t, l, p.Runs(closed, ""), 20)
}

// Three nodes run an @every 1s fire while each in turn, twice round, is
// stopped (SIGTERM; it exits with code 0), started again with the same
// name and arguments once another node ran a fire, and seen to rejoin (its
// view lists every node, and a fire runs after) before the next: every
// instant from the first stop to the end runs exactly once (a stopped node
// runs its fires until it has handed them over), and the shared ledger has
// each fire once, in order of fire and token. On Redis in make test; on
// PostgreSQL and etcd too in make chaos.
func TestRollingRestartLosesNoFire(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts three processes for about a minute on each store")
	}
	eachStore(t, *failoverAll, rollingRestartLosesNoFire)
}

func rollingRestartLosesNoFire(t *testing.T, storeFlag, url string, l ledger) {
	p := startCluster(t, storeFlag, url, failoverTTL)
	fires := p.WaitFires(closed, "", 5, 40*time.Second)
	for range 2 {
		for _, n := range cluster {
			stopped := time.Now()
			p.Signal(n.name, syscall.SIGTERM)
			if err := p.WaitExit(n.name, 30*time.Second); err != nil {
				t.Fatalf("%s exited with %v after SIGTERM, want code 0", n.name, err)
			}
			exited := time.Since(stopped)
			// The others run a fire without it: its fires do not wait for it.
			p.WaitFires(closed, nodetest.FireString(time.Now().Add(time.Second)), 1, 30*time.Second)
			skip := len(p.All())
			startNode(p, n.name, storeFlag, url, failoverTTL)
			p.WaitLine(n.name+"'s view of every node", skip, 30*time.Second, func(ln nodetest.Line) bool {
				return ln.Proc == n.name && ln.Msg == "membership changed" && ln.Members == len(cluster)
			})
			// and the cluster runs fires with it
			p.WaitFires(closed, nodetest.FireString(time.Now().Add(time.Second)), 1, 30*time.Second)
			t.Logf("restarted %s, which exited %v after SIGTERM", n.name, exited)
		}
	}
	end := time.Now().Add(3 * time.Second).Truncate(time.Second)
	p.WaitFires(closed, nodetest.FireString(end), 1, 30*time.Second)
	if lost := checkInstants(t, p, nodetest.ParseFire(t, fires[len(fires)-1]), end); len(lost) > 0 {
		t.Errorf("fires lost: %v", lost)
	}
	t.Logf("the latest run came %v after its instant", maxLateness(t, p))
	checkLedger(t, l, p.Runs(closed, ""), 15)
}

// checkInstants fails t for each instant of the @every 1s schedule in
// [from, to] that ran more than once, and returns those that did not run.
func checkInstants(t *testing.T, p *nodetest.Procs, from, to time.Time) (lost []string) {
	t.Helper()
	runs := p.Runs(closed, "")
	for at := from; !at.After(to); at = at.Add(time.Second) {
		f := nodetest.FireString(at)
		switch r := runs[f]; len(r) {
		case 0:
			lost = append(lost, f)
		case 1:
		default:
			t.Errorf("fire %s ran %d times: %+v", f, len(r), r)
		}
	}
	return lost
}

// maxLateness returns the longest a run logged its close after its
// instant, by the clock of its node.
func maxLateness(t *testing.T, p *nodetest.Procs) time.Duration {
	var longest time.Duration
	for _, r := range p.Runs(closed, "") {
		for _, run := range r {
			for _, n := range cluster {
				if n.name == run.Proc {
					longest = max(longest, run.Time.Add(n.offset).Sub(nodetest.ParseFire(t, run.Fire)))
				}
			}
		}
	}
	return longest
}
