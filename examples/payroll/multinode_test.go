package main

import (
	"context"
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
// by its script's token check, on PostgreSQL by pglocks.Guard.
func TestMultiNodeExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 15s on each store")
	}
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		multiNodeExactlyOnce(t, "--redis", "redis://"+srv.Addr(), newRedisLedger(srv.Client(), "e2e"))
	})
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t)
		multiNodeExactlyOnce(t, "--postgres", srv.URL(), newPGLedger(srv.Pool(), "e2e"))
	})
}

// multiNodeExactlyOnce is TestMultiNodeExactlyOnce on the store that
// storeFlag names at url, whose ledger l reads.
func multiNodeExactlyOnce(t *testing.T, storeFlag, url string, l ledger) {
	p := nodetest.New(t)
	// A node killed while it holds the lock blocks the others for a lease.
	for _, n := range []struct{ name, offset string }{{"n0", "0s"}, {"n1", "300ms"}, {"n2", "-300ms"}} {
		p.StartPayrollOn(n.name, storeFlag, url, "e2e", "3s", "--clock-offset", n.offset)
	}

	const closed = "payroll closed"
	fires := p.WaitFires(closed, "", 10, 40*time.Second)
	p.CheckEveryFireOnce(closed, fires, time.Second)
	lastFire := fires[len(fires)-1]
	last := p.Runs(closed, lastFire)[lastFire][0]

	p.Signal(last.Proc, syscall.SIGKILL)
	t.Logf("killed %s, which ran fire %s", last.Proc, last.Fire)
	next := nodetest.FireString(nodetest.ParseFire(t, last.Fire).Add(time.Second))
	// The node was most likely killed between its run and its release
	// (the test kills it on seeing the run's log line), so the lock stays
	// held until its 3s lease expires: a gap there is expected, and none
	// after it.
	after := p.WaitFires(closed, next, 5, 30*time.Second)
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
func checkLedger(t *testing.T, l ledger, runs map[string][]nodetest.Line, minFires int) {
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
