package chaos

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// ledgerEntries returns the fenced ledger's entries as fields: what, fire,
// node, token.
func ledgerEntries(t *testing.T, c *redis.Client) [][]string {
	t.Helper()
	raw, err := c.LRange(context.Background(), ledgerKeys[0], 0, -1).Result()
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	var out [][]string
	for _, e := range raw {
		out = append(out, strings.Fields(e))
	}
	return out
}

// hasEntry reports whether the ledger has the entry what for fire by node.
func hasEntry(entries [][]string, what, fire, node string) bool {
	for _, e := range entries {
		if e[0] == what && e[1] == fire && e[2] == node {
			return true
		}
	}
	return false
}

func isRun(msg string) func(nodetest.Line) bool {
	return func(l nodetest.Line) bool { return l.Msg == msg }
}

// A node SIGKILLed in the middle of a run holds the lock until its lease
// ends; its fires are late, not lost: the node that takes its task over
// runs the next fire once the lease ends, and from the killed run on every
// fire runs exactly once, or is recorded skipped because the run before it
// (a late one catching up) was still going. The killed run is not run
// again.
func TestHolderKilledMidRun(t *testing.T) {
	srv := redistest.Start(t)
	p := nodetest.New(t)
	for _, n := range []string{"n0", "n1", "n2"} {
		startNode(p, n, srv.Addr(), "CHAOS_TTL=2s", "CHAOS_WORK=600ms")
	}
	_, i := p.WaitLine("second completed run", 0, 30*time.Second, isRun("run end"))
	_, i = p.WaitLine("another completed run", i+1, 10*time.Second, isRun("run end"))
	victim, _ := p.WaitLine("a run starting", i+1, 10*time.Second, isRun("run start"))
	p.Signal(victim.Proc, syscall.SIGKILL)
	t.Logf("killed %s in its run of fire %s (token %d)", victim.Proc, victim.Fire, victim.Token)

	victimFire := nodetest.ParseFire(t, victim.Fire)
	takeover, _ := p.WaitLine("a survivor's run", 0, 15*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run start" && l.Fire > victim.Fire
	})
	if takeover.Proc == victim.Proc {
		t.Fatalf("the killed node ran fire %s", takeover.Fire)
	}
	if next := nodetest.FireString(victimFire.Add(time.Second)); takeover.Fire != next {
		t.Errorf("the first run after the killed one is of fire %s, want the next fire %s", takeover.Fire, next)
	}
	if takeover.Token <= victim.Token {
		t.Errorf("takeover token %d not above the killed holder's %d", takeover.Token, victim.Token)
	}
	fires := p.WaitFires("run end", takeover.Fire, 5, 20*time.Second)
	skipped := map[string]bool{}
	for _, l := range p.All() {
		if l.Msg == "previous run still going; fire skipped" {
			at, err := time.Parse(time.RFC3339Nano, l.Fire)
			if err != nil {
				t.Fatalf("a skip's fire %q: %v", l.Fire, err)
			}
			skipped[nodetest.FireString(at)] = true
		}
	}
	starts, ends := p.Runs("run start", ""), p.Runs("run end", "")
	if n := len(starts[victim.Fire]); n != 1 {
		t.Errorf("the killed run's fire %s started %d times, want once: %+v", victim.Fire, n, starts[victim.Fire])
	}
	for at := victimFire.Add(time.Second); !at.After(nodetest.ParseFire(t, fires[len(fires)-1])); at = at.Add(time.Second) {
		f := nodetest.FireString(at)
		switch n := len(starts[f]); {
		case n > 1:
			t.Errorf("fire %s ran %d times: %+v", f, n, starts[f])
		case n == 0 && !skipped[f]:
			t.Errorf("fire %s lost: neither run nor skipped", f)
		case n == 1 && len(ends[f]) != 1:
			t.Errorf("fire %s started once and ended %d times", f, len(ends[f]))
		}
	}

	entries := ledgerEntries(t, srv.Client())
	if !hasEntry(entries, "start", victim.Fire, victim.Proc) || hasEntry(entries, "end", victim.Fire, victim.Proc) {
		t.Errorf("ledger should have the killed run's start and not its end: %v", entries)
	}
	for _, f := range fires {
		if !hasEntry(entries, "end", f, ends[f][0].Proc) {
			t.Errorf("ledger lacks the end of fire %s", f)
		}
	}
}

// A holder paused (SIGSTOP, as a long GC pause would) past its lease while
// it renews: a successor takes the lock and writes; the resumed holder's run
// context is cancelled with ErrLeaseLost, its Extend and Release return
// ErrLeaseLost, and its fenced ledger write is rejected. Nothing the
// successor wrote is lost.
//
// On PostgreSQL the ledger write is guarded (pglocks.Guard) instead of
// fenced, and refused with ErrLeaseLost.
func TestPausedHolderIsFenced(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { pausedHolderIsFenced(t, st) })
	}
}

func pausedHolderIsFenced(t *testing.T, st store) {
	p := nodetest.New(t)
	ledger := st.start(t, p, []string{"n0", "n1"}, "CHAOS_TTL=1500ms", "CHAOS_WORK=4s", "CHAOS_RENEW=1")
	victim, _ := p.WaitLine("a run starting", 0, 30*time.Second, isRun("run start"))
	p.Signal(victim.Proc, syscall.SIGSTOP)
	succ, _ := p.WaitLine("a successor's run", 0, 15*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run start" && l.Proc != victim.Proc
	})
	p.Signal(victim.Proc, syscall.SIGCONT)
	t.Logf("%s paused in fire %s (token %d); %s took fire %s (token %d)", victim.Proc, victim.Fire, victim.Token, succ.Proc, succ.Fire, succ.Token)
	if succ.Token <= victim.Token {
		t.Fatalf("successor token %d not above the paused holder's %d", succ.Token, victim.Token)
	}
	stale, _ := p.WaitLine("the resumed holder's run end", 0, 15*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run end" && l.Proc == victim.Proc && l.Fire == victim.Fire
	})
	for what, got := range map[string]string{"run context cause": stale.Cause, "Extend": stale.Extend} {
		if !strings.Contains(got, "locks: lease lost") {
			t.Errorf("resumed holder: %s = %q, want ErrLeaseLost", what, got)
		}
	}
	if !strings.Contains(stale.Ledger, st.stale) {
		t.Errorf("resumed holder's ledger write = %q, want it rejected with %q", stale.Ledger, st.stale)
	}
	p.WaitLine("the resumed holder's failed release", 0, 10*time.Second, func(l nodetest.Line) bool {
		return l.Proc == victim.Proc && l.Msg == "lease release failed" && strings.Contains(l.Err, "locks: lease lost")
	})
	done, _ := p.WaitLine("the successor's run end", 0, 15*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run end" && l.Proc == succ.Proc && l.Fire == succ.Fire
	})
	if succ.StartLedger != "" || done.Cause != "" || done.Extend != "" || done.Ledger != "" {
		t.Errorf("the successor's run was disturbed: %+v", done)
	}
	entries := ledger()
	if !hasEntry(entries, "start", succ.Fire, succ.Proc) || !hasEntry(entries, "end", succ.Fire, succ.Proc) {
		t.Errorf("ledger lost what the successor wrote: %v", entries)
	}
	if hasEntry(entries, "end", victim.Fire, victim.Proc) {
		t.Errorf("ledger accepted the stale holder's end entry: %v", entries)
	}
}

// SIGTERM during a run: the node finishes the run, hands its task over
// (it may run the fires of its two heartbeats of handover), releases the
// lease and exits 0; a peer runs a fire right after its last run, long
// before the 30s lease could have expired.
func TestGracefulStopHandsOver(t *testing.T) {
	srv := redistest.Start(t)
	p := nodetest.New(t)
	for _, n := range []string{"n0", "n1"} {
		startNode(p, n, srv.Addr(), "CHAOS_TTL=30s", "CHAOS_WORK=1500ms")
	}
	victim, _ := p.WaitLine("a run starting", 0, 30*time.Second, isRun("run start"))
	p.Signal(victim.Proc, syscall.SIGTERM)
	if err := p.WaitExit(victim.Proc, 20*time.Second); err != nil {
		t.Fatalf("%s exited with %v after SIGTERM, want 0", victim.Proc, err)
	}
	end, _ := p.WaitLine("the stopped node's run end", 0, time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run end" && l.Proc == victim.Proc && l.Fire == victim.Fire
	})
	if end.Cause != "" || end.Ledger != "" {
		t.Errorf("the run cut short by the graceful stop: %+v", end)
	}
	for _, l := range p.All() {
		if l.Proc == victim.Proc && l.Level != "INFO" {
			t.Errorf("%s logged %s %q: %s", victim.Proc, l.Level, l.Msg, l.Err)
		}
	}
	last := victim.Fire // the stopped node's last run: it runs fires while it hands over
	for _, l := range p.All() {
		if l.Msg == "run start" && l.Proc == victim.Proc && l.Fire > last {
			last = l.Fire
		}
	}
	peer, _ := p.WaitLine("the peer's run", 0, 10*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run start" && l.Proc != victim.Proc && l.Fire > last
	})
	// A run works 1.5s; the peer's fire at most one period after the
	// release, far from the 30s a lease left behind would block.
	if limit := nodetest.ParseFire(t, last).Add(1500*time.Millisecond + 2*time.Second); nodetest.ParseFire(t, peer.Fire).After(limit) {
		t.Errorf("peer took fire %s, more than a period after the stopped node's last run (fire %s) ended", peer.Fire, last)
	}
	if limit := nodetest.ParseFire(t, victim.Fire).Add(4 * time.Second); nodetest.ParseFire(t, last).After(limit) {
		t.Errorf("the stopped node ran fire %s, past its two heartbeats of handover after fire %s", last, victim.Fire)
	}
}

// Redis restarts without persistence in the middle of a run. Tokens after
// the restart are above every token before it; the nodes recover by
// themselves and every later fire that finds the lock free runs once. The window: the run in flight
// keeps going while a node takes the next fire (two runs at once), and its
// late ledger write is rejected by the fence, which lives on another Redis.
func TestRedisRestartMidRun(t *testing.T) {
	locksSrv, ledgerSrv := redistest.Start(t), redistest.Start(t)
	p := nodetest.New(t)
	for _, n := range []string{"n0", "n1", "n2"} {
		// Every node tries every fire: with spreading, the restart wipes the
		// memberships too, and whether another node than the busy owner
		// tries the next fire depends on which heartbeat lands first.
		startNode(p, n, locksSrv.Addr(), "CHAOS_TTL=3s", "CHAOS_WORK=1500ms", "CHAOS_LEDGER="+ledgerSrv.Addr(), "CHAOS_SPREAD=off")
	}
	_, i := p.WaitLine("a completed run", 0, 30*time.Second, isRun("run end"))
	inflight, i := p.WaitLine("a run starting", i+1, 10*time.Second, isRun("run start"))
	locksSrv.Restart()
	t.Logf("restarted Redis during %s's run of fire %s (token %d)", inflight.Proc, inflight.Fire, inflight.Token)
	var before uint64
	for _, l := range p.All()[:i+1] {
		before = max(before, l.Token)
	}
	after := p.WaitFires("run end", inflight.Fire, 5, 30*time.Second)[1:]
	for _, l := range p.All()[i+1:] {
		if l.Msg == "run start" && l.Token <= before {
			t.Errorf("token %d of fire %s after the restart is not above %d, the highest before", l.Token, l.Fire, before)
		}
	}
	// Runs of 1.5s every 1s: each run makes the nodes skip the next fire, so
	// a run every 2s is every fire that could run.
	p.CheckEveryFireOnce("run start", after, 2*time.Second)
	if n := len(p.Runs("run start", inflight.Fire)[inflight.Fire]); n > 2 {
		t.Errorf("the fire in flight at the restart ran %d times", n)
	}
	stale, _ := p.WaitLine("the in-flight run's end", 0, 10*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "run end" && l.Proc == inflight.Proc && l.Fire == inflight.Fire
	})
	// A node took the next fire at most 1s after the in-flight run began,
	// and wrote its start entry before that run's end at 1.5s.
	if !strings.Contains(stale.Extend, "locks: lease lost") || !strings.Contains(stale.Ledger, errStale.Error()) {
		t.Errorf("the run in flight at the restart: Extend %q, ledger %q; want lease lost and a stale rejection", stale.Extend, stale.Ledger)
	}
	// Only that run overlapped another one.
	ends := map[string]nodetest.Line{}
	for _, l := range p.All() {
		if l.Msg == "run end" {
			ends[l.Proc+l.Fire] = l
		}
	}
	var open []nodetest.Line
	for _, l := range p.All() {
		switch l.Msg {
		case "run start":
			for _, o := range open {
				if o.Fire != inflight.Fire {
					t.Errorf("run of fire %s on %s overlaps the run of fire %s on %s", l.Fire, l.Proc, o.Fire, o.Proc)
				}
			}
			open = append(open, l)
		case "run end":
			for k, o := range open {
				if o.Proc == l.Proc && o.Fire == l.Fire {
					open = append(open[:k], open[k+1:]...)
					break
				}
			}
		}
	}
}
