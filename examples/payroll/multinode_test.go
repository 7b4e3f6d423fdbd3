package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// Three nodes on one lock store with clocks 300ms apart run every fire of
// an @every 1s schedule exactly once; after the node that ran last is
// killed, the others go on running every fire exactly once; and the ledger
// they share shows no stale holder's write. On Redis the ledger is fenced
// by its script's token check, on PostgreSQL by pglocks.Guard, on etcd by
// etcdlocks.Guard.
func TestMultiNodeExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 15s on each store")
	}
	eachStore(t, true, multiNodeExactlyOnce)
}

// eachStore runs f as a subtest on each lock store, on a private server
// whose ledger l reads (namespace e2e): on Redis, and with all on
// PostgreSQL and on etcd too (etcd in a build with -tags etcd, as make test
// builds it).
func eachStore(t *testing.T, all bool, f func(t *testing.T, storeFlag, url string, l ledger)) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, "--redis", "redis://"+srv.Addr(), newRedisLedger(srv.Client(), "e2e"))
	})
	t.Run("postgres", func(t *testing.T) {
		if !all {
			t.Skip("runs in make chaos (-failover.all)")
		}
		srv := pgtest.Start(t)
		f(t, "--postgres", srv.URL(), newPGLedger(srv.Pool(), "e2e"))
	})
	t.Run("etcd", func(t *testing.T) {
		switch {
		case !all:
			t.Skip("runs in make chaos (-failover.all)")
		case startEtcd == nil:
			t.Skip("the etcd case is built with -tags etcd, as make test builds it")
		}
		url, l := startEtcd(t)
		f(t, "--etcd", url, l)
	})
}

// cluster is the nodes of the multi-node tests, with their clocks' offsets.
var cluster = []struct {
	name   string
	offset time.Duration
}{{"n0", 0}, {"n1", 300 * time.Millisecond}, {"n2", -300 * time.Millisecond}}

// startNode starts the node of cluster named name on the store that
// storeFlag names at url, in namespace e2e, with the lock TTL ttl.
func startNode(p *nodetest.Procs, name, storeFlag, url string, ttl time.Duration) {
	for _, n := range cluster {
		if n.name == name {
			p.StartPayrollOn(name, storeFlag, url, "e2e", ttl.String(), "--clock-offset", n.offset.String())
		}
	}
}

// startCluster starts every node of cluster (startNode).
func startCluster(t *testing.T, storeFlag, url string, ttl time.Duration) *nodetest.Procs {
	p := nodetest.New(t)
	for _, n := range cluster {
		startNode(p, n.name, storeFlag, url, ttl)
	}
	return p
}

// startEtcd starts a private etcd and returns its endpoints and the ledger
// on it (namespace e2e), in a build with -tags etcd (etcd_test.go).
var startEtcd func(t *testing.T) (url string, l ledger)

// multiNodeExactlyOnce is TestMultiNodeExactlyOnce on the store that
// storeFlag names at url, whose ledger l reads.
func multiNodeExactlyOnce(t *testing.T, storeFlag, url string, l ledger) {
	// A node killed while it holds the lock blocks the others for a lease.
	p := startCluster(t, storeFlag, url, 3*time.Second)

	fires := p.WaitFires(closed, "", 10, 40*time.Second)
	p.CheckEveryFireOnce(closed, fires, time.Second)
	lastFire := fires[len(fires)-1]
	last := p.Runs(closed, lastFire)[lastFire][0]

	p.Signal(last.Proc, syscall.SIGKILL)
	t.Logf("killed %s, which ran fire %s", last.Proc, last.Fire)
	killedAt := nodetest.ParseFire(t, last.Fire)
	next := nodetest.FireString(killedAt.Add(time.Second))
	// The node was killed around its run (the test kills it on seeing the
	// run's log line): before its release, its lock stays held until its
	// 3s lease expires; after the release but before the run's record, the
	// shared state shows its run going until then, and a fire that finds
	// it is skipped (overlap skip). Fires of that window may be lost,
	// whichever node owns them; none after it. The window ends at the
	// second in which the lease expires.
	settled := nodetest.FireString(killedAt.Add(4 * time.Second))
	after := p.WaitFires(closed, settled, 5, 30*time.Second)
	for _, r := range p.Runs(closed, next) {
		if r[0].Proc == last.Proc {
			t.Errorf("killed node %s ran fire %s", last.Proc, r[0].Fire)
		}
	}
	p.CheckEveryFireOnce(closed, after, time.Second)
	checkLedger(t, l, p.Runs(closed, ""), 15)
}

// checkLedger fails t unless l has at least minFires entries, written in
// strictly increasing order of fire and of token, and every fire that runs
// shows run once was written by the node and with the token of that run.
// So each fire is in the ledger once, and no holder wrote after its
// successor: its token would be lower than the successor's.
func checkLedger(t testing.TB, l ledger, runs map[string][]nodetest.Line, minFires int) {
	t.Helper()
	entries, err := l.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < minFires {
		t.Errorf("ledger has %d fires, want at least %d", len(entries), minFires)
	}
	for i, e := range entries {
		if i > 0 {
			if prev := entries[i-1]; !e.Fire.After(prev.Fire) || e.Token <= prev.Token {
				t.Errorf("ledger entry %d %q follows %q: fires and tokens must both increase", i, e, prev)
			}
		}
		fire := nodetest.FireString(e.Fire)
		if r := runs[fire]; len(r) == 1 && (r[0].Node != e.Node || r[0].Token != e.Token) {
			t.Errorf("ledger entry %q, but node %s logged fire %s with token %d", e, r[0].Node, fire, r[0].Token)
		}
	}
}

// failures is a testing.TB that records Errorf, to test checkLedger.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Helper() {}

func (f *failures) Errorf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// checkLedger fails on each way a ledger can show a fire run twice or a
// stale holder's write, and passes a ledger that shows neither.
func TestCheckLedgerFindsStaleWrites(t *testing.T) {
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	fire := func(s int) time.Time { return at.Add(time.Duration(s) * time.Second) }
	runs := map[string][]nodetest.Line{
		nodetest.FireString(fire(0)): {{Node: "a", Token: 1}},
		nodetest.FireString(fire(1)): {{Node: "b", Token: 2}},
	}
	good := []entry{{fire(0), "a", 1}, {fire(1), "b", 2}, {fire(2), "a", 3}}
	for _, c := range []struct {
		name    string
		entries []entry
		want    string // in the first failure; empty: none
	}{
		{"good", good, ""},
		{"a fire twice", []entry{good[0], good[1], {fire(1), "c", 3}}, "must both increase"},
		{"a stale holder after its successor", []entry{good[0], good[1], {fire(2), "a", 1}}, "must both increase"},
		{"an earlier fire written late", []entry{good[0], good[2], {fire(1), "b", 4}}, "must both increase"},
		{"another node than the run's", []entry{good[0], {fire(1), "c", 2}, good[2]}, "node b logged fire"},
		{"another token than the run's", []entry{good[0], {fire(1), "b", 3}, {fire(2), "a", 4}}, "with token 2"},
		{"too few", good[:2], "want at least 3"},
	} {
		f := &failures{TB: t}
		checkLedger(f, &memoryLedger{entries: c.entries}, runs, 3)
		switch {
		case c.want == "" && len(f.msgs) != 0:
			t.Errorf("%s: failures %q, want none", c.name, f.msgs)
		case c.want != "" && (len(f.msgs) == 0 || !strings.Contains(f.msgs[0], c.want)):
			t.Errorf("%s: failures %q, want the first with %q", c.name, f.msgs, c.want)
		}
	}
}
