package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

// retryBackoff is the nodes' payroll.retry-backoff: the retry of a failed
// run is due within it. Long enough that the failing node almost never
// has the retry due before the test kills it (tens of milliseconds after
// the failure is stored), short enough for a quick test: the retry waits
// anyway for the dead node's membership to lapse (about 3s) so that
// another node owns the task.
const retryBackoff = 6 * time.Second

// Three payroll nodes on one Redis. The ledger's fencing key is made to
// hold a hash, so that the next CloseBooks run's write gets WRONGTYPE and
// the run fails; as soon as that failure is in the shared history, the
// node that failed it is SIGKILLed and the ledger repaired. Another, live
// node then runs the retry: attempt 2 of the same fire, exactly once (in
// the history, the log and the ledger), under a fencing token above the
// failed attempt's; no attempt of any fire is run twice, and the schedule
// goes on after it.
func TestRetryRunsOnAnotherNodeAfterTheFailingNodeDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 15s")
	}
	const ns = "retry"
	t.Setenv("PAYROLL_RETRY", "3")
	t.Setenv("PAYROLL_RETRY_BACKOFF", retryBackoff.String())
	srv := redistest.Start(t)
	p := nodetest.New(t)
	nodes := []string{"r0", "r1", "r2"}
	for _, n := range nodes {
		p.StartPayroll(n, srv.Addr(), ns, "3s")
	}
	// Two fires: the ledger has its fencing key, and the nodes their
	// views of one another.
	p.WaitFires(closed, "", 2, 40*time.Second)

	client := srv.Client()
	l := newRedisLedger(client, ns)
	store, err := redislocks.NewStore(redislocks.StoreOptions{Client: client, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}

	breakLedger(t, client, l)
	failed := waitRun(t, store, "a failed run of "+closeTask, 15*time.Second, func(r taskstate.Run) bool {
		return r.Outcome == "error"
	})
	p.Signal(failed.Node, syscall.SIGKILL)
	killed := time.Now()
	repairLedger(t, client, l)
	fire := nodetest.FireString(failed.Fire)
	t.Logf("%s failed fire %s (token %d): %s; killed it %v after the failure ended",
		failed.Node, fire, failed.Token, failed.Error, killed.Sub(failed.Start.Add(failed.Duration)).Round(time.Millisecond))
	if err := p.WaitExit(failed.Node, 10*time.Second); !isKilled(err) {
		t.Fatalf("%s: exit %v, want killed by SIGKILL", failed.Node, err)
	}
	if failed.Attempt > 1 || !strings.Contains(failed.Error, "WRONGTYPE") {
		t.Fatalf("the failed run %+v: want the fire's first attempt, failed by the ledger's WRONGTYPE", failed)
	}
	checkRetryPending(t, store, failed)

	// The retry: after the dead node's membership lapses, the new owner of
	// the task takes it at its first poll once it is due.
	retry := waitRun(t, store, "attempt 2 of fire "+fire, 30*time.Second, func(r taskstate.Run) bool {
		return r.Fire.Equal(failed.Fire) && r.Attempt == 2 && r.Outcome != taskstate.OutcomeTaken
	})
	t.Logf("%s ran attempt 2 of fire %s (token %d, %s) %v after the kill", retry.Node, fire, retry.Token, retry.Outcome,
		retry.Start.Sub(killed).Round(time.Millisecond))
	// Settle: no retry is pending, and the schedule is back (two later
	// fires ran): every live node has polled the store since, so that a
	// second run of the retry, or a third attempt, would be there by now.
	settle(t, p, store, nodetest.FireString(retry.Start))

	switch {
	case retry.Outcome != "ok":
		t.Errorf("attempt 2 %+v: outcome %q, want ok (the ledger was repaired before it)", retry, retry.Outcome)
	case retry.Node == failed.Node || !slices.Contains(nodes, retry.Node) || !p.Running(retry.Node):
		t.Errorf("attempt 2 ran on %q, want another live node than %s, which failed attempt 1 and was killed", retry.Node, failed.Node)
	case retry.Token <= failed.Token:
		t.Errorf("attempt 2's token %d is not above the failed attempt's %d", retry.Token, failed.Token)
	}

	// The history: the fire's two attempts, each once; no attempt of any
	// fire run twice.
	runs, err := store.Runs(context.Background(), closeTask, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ofFire []string
	ran := map[string]int{} // runs that started, by fire and attempt
	for _, r := range runs {
		if r.Fire.Equal(failed.Fire) {
			ofFire = append(ofFire, fmt.Sprintf("attempt %d on %s: %s", max(r.Attempt, 1), r.Node, r.Outcome))
		}
		if !r.Start.IsZero() || r.Outcome == taskstate.OutcomeTaken {
			ran[fmt.Sprintf("fire %s attempt %d", nodetest.FireString(r.Fire), max(r.Attempt, 1))]++
		}
	}
	slices.Reverse(ofFire) // oldest first
	if want := []string{"attempt 1 on " + failed.Node + ": error", "attempt 2 on " + retry.Node + ": ok"}; !slices.Equal(ofFire, want) {
		t.Errorf("the history of fire %s: %q, want %q", fire, ofFire, want)
	}
	for k, n := range ran {
		if n > 1 {
			t.Errorf("%s ran %d times", k, n)
		}
	}

	// The log: one retry started, by the node that the history names; one
	// "payroll closed" for the fire, none on the killed node.
	var retried []string
	for _, ln := range p.All() {
		if ln.Msg == "retrying a failed run" && ln.Task == closeTask {
			retried = append(retried, ln.Proc)
		}
	}
	if len(retried) != 1 || retried[0] != retry.Node {
		t.Errorf("nodes that logged a retry of %s: %q, want only %s", closeTask, retried, retry.Node)
	}
	closes := p.Runs(closed, fire)[fire]
	if len(closes) != 1 || closes[0].Proc != retry.Node || closes[0].Token != retry.Token {
		t.Errorf("fire %s closed %+v, want once, by %s with token %d", fire, closes, retry.Node, retry.Token)
	}

	// The ledger: the fire once, written by the retry under its token (the
	// failed attempt wrote nothing), and fires and tokens increasing.
	entries, err := l.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var written []entry
	for _, e := range entries {
		if e.Fire.Equal(failed.Fire) {
			written = append(written, e)
		}
	}
	if len(written) != 1 || written[0].Node != retry.Node || written[0].Token != retry.Token {
		t.Errorf("the ledger has fire %s as %v, want once, by %s with token %d", fire, written, retry.Node, retry.Token)
	}
	checkLedger(t, l, p.Runs(closed, ""), 5)
}

// breakLedger makes the ledger's fencing key hold a hash (keeping its value
// aside), so that the next write's GET of it fails with WRONGTYPE and the
// run that makes it returns that error, recording nothing. One MULTI: no
// write falls between the two steps.
func breakLedger(t *testing.T, c *redis.Client, l *redisLedger) {
	t.Helper()
	ctx := context.Background()
	_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Rename(ctx, l.high, l.high+":saved")
		pipe.HSet(ctx, l.high, "broken", "by the test")
		return nil
	})
	if err != nil {
		t.Fatalf("breaking the ledger: %v", err)
	}
}

// repairLedger puts back the fencing key that breakLedger set aside.
func repairLedger(t *testing.T, c *redis.Client, l *redisLedger) {
	t.Helper()
	ctx := context.Background()
	_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, l.high)
		pipe.Rename(ctx, l.high+":saved", l.high)
		return nil
	})
	if err != nil {
		t.Fatalf("repairing the ledger: %v", err)
	}
}

// waitRun polls the shared history of the close-books task every 10ms
// until a run satisfies ok, and returns the newest such run; it fails the
// test after within, saying that what did not come.
func waitRun(t *testing.T, store taskstate.Store, what string, within time.Duration, ok func(taskstate.Run) bool) taskstate.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		runs, err := store.Runs(ctx, closeTask, 0)
		cancel()
		if err == nil {
			for _, r := range runs {
				if ok(r) {
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the history within %v (last read: %v); runs, newest first: %+v", what, within, err, runs)
		}
		time.Sleep(10 * time.Millisecond) // the history is polled: the test kills a node at once on its failure
	}
}

// checkRetryPending fails the test unless the retry of failed's fire is
// pending in the store, its attempt 2 taken by no node, right after the
// kill of the node that failed it. The retry's jitter may make it due at
// once, and that node's poll may then take it before the kill: the test
// says so, rather than that the retry was lost.
func checkRetryPending(t *testing.T, store taskstate.Store, failed taskstate.Run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	poll, err := store.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end := failed.Start.Add(failed.Duration)
	if r, ok := poll.Retries[closeTask]; ok && r.Fire.Equal(failed.Fire) && r.Attempt == 2 {
		t.Logf("attempt 2 pending, due %v after the failure", r.Due.Sub(end).Round(time.Millisecond))
		return
	}
	runs, err := store.Runs(ctx, closeTask, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Fire.Equal(failed.Fire) && r.Attempt == 2 && r.Node == failed.Node {
			t.Fatalf("%s took attempt 2 of its failed fire before the test killed it (%s, %v after the failure): "+
				"the retry's jitter made it due before the kill, the test's own race, not a lost retry", failed.Node, r.Outcome, r.Start.Sub(end))
		}
	}
	t.Fatalf("right after the kill of %s, no retry of its failed fire is pending (pending: %+v); runs, newest first: %+v",
		failed.Node, poll.Retries, runs)
}

// settle waits, for 20s at most, until no retry of the close-books task
// is pending and two fires from fire from on closed; after that, it
// reports (without stopping the test, whose checks say more) what did not
// come.
func settle(t *testing.T, p *nodetest.Procs, store taskstate.Store, from string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		poll, err := store.Poll(ctx)
		cancel()
		r, pending := poll.Retries[closeTask]
		fires := len(p.Runs(closed, from))
		if err == nil && !pending && fires >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("after 20s, %d fires from %s on closed (want 2), and a retry of %s pending: %v %+v (poll: %v)",
				fires, from, closeTask, pending, r, err)
			return
		}
		time.Sleep(50 * time.Millisecond) // polled, as the nodes do
	}
}

// isKilled reports whether err is the exit of a process killed by SIGKILL.
func isKilled(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
