package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// Three nodes on one Redis with clocks 300ms apart run every fire of an
// @every 1s schedule exactly once; after the node that ran last is killed,
// the others go on running every fire exactly once.
func TestMultiNodeExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 15s")
	}
	srv := redistest.Start(t)
	p := nodetest.New(t)
	// A node killed while it holds the lock blocks the others for a lease.
	p.StartPayroll("n0", srv.Addr(), "e2e", "3s", "--clock-offset", "0s")
	p.StartPayroll("n1", srv.Addr(), "e2e", "3s", "--clock-offset", "300ms")
	p.StartPayroll("n2", srv.Addr(), "e2e", "3s", "--clock-offset", "-300ms")

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
