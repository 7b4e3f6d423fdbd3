package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
)

// postBackfill asks the node at base (a task's URL) for a backfill of
// [from, to] and returns the status and the body.
func postBackfill(t *testing.T, base, token string, from, to time.Time) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"from": from, "to": to})
	req, err := http.NewRequest(http.MethodPost, base+"/backfill", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// waitBackfill polls the store until the close-books task's backfill
// satisfies ok, and returns it; it fails the test after within.
func waitBackfill(t *testing.T, store taskstate.Store, what string, within time.Duration, ok func(taskstate.Backfill) bool) taskstate.Backfill {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p, err := store.Poll(ctx)
		cancel()
		b, found := p.Backfills[closeTask]
		if err == nil && found && ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backfill %s within %v (last read %+v, %v)", what, within, b, err)
		}
		time.Sleep(5 * time.Millisecond) // polled: the test kills the driving node part-way
	}
}

// Three payroll nodes on one Redis. A backfill of 1,000 past instants of
// the close-books task, asked of one node over HTTP, runs on the node that
// owns the task; part-way, the test SIGKILLs the node running it, and
// another node goes on from the stored cursor. Every instant is taken
// once; each is written to the fenced ledger once, but for at most the one
// whose run the kill cut, which the history shows taken by the dead node.
// A second backfill of the range refuses every instant.
func TestBackfillSurvivesTheDeathOfItsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 20s")
	}
	const ns, token, n = "backfill", "bf-token", 1000
	t.Setenv("PAYROLL_REDIS_HISTORY", "1000") // the history keeps every instant's run, and the cut one's placeholder
	srv := redistest.Start(t)
	p := nodetest.New(t)
	nodes := []string{"b0", "b1", "b2"}
	base := map[string]string{}
	for _, name := range nodes {
		p.StartPayroll(name, srv.Addr(), ns, "3s", "--admin-addr", "127.0.0.1:0", "--admin-token", token)
		base[name] = adminURL(p, name)
	}
	p.WaitFires(closed, "", 2, 40*time.Second)
	store, err := redislocks.NewStore(redislocks.StoreOptions{Client: srv.Client(), Namespace: ns, History: taskstate.MaxHistory})
	if err != nil {
		t.Fatal(err)
	}

	from := time.Now().UTC().Truncate(time.Second).Add(-2 * n * time.Second)
	to := from.Add((n - 1) * time.Second)
	code, body := postBackfill(t, base["b1"], token, from, to)
	if code != http.StatusAccepted {
		t.Fatalf("POST backfill: %d %s, want 202", code, body)
	}
	b := waitBackfill(t, store, "a third of the way", 60*time.Second, func(b taskstate.Backfill) bool { return b.Taken >= n/3 })
	if b.Total != n {
		t.Fatalf("backfill %+v: want %d instants", b, n)
	}
	runs, err := store.Runs(context.Background(), closeTask, 1)
	if err != nil || len(runs) != 1 || !runs[0].Backfill {
		t.Fatalf("newest run %+v, %v: want a backfill run", runs, err)
	}
	driver := runs[0].Node
	p.Signal(driver, syscall.SIGKILL)
	if err := p.WaitExit(driver, 10*time.Second); !isKilled(err) {
		t.Fatalf("%s: exit %v, want killed by SIGKILL", driver, err)
	}
	at := waitBackfill(t, store, "after the kill", time.Second, func(taskstate.Backfill) bool { return true })
	t.Logf("killed %s, which drove the backfill, at %d of %d instants", driver, at.Taken, n)
	done := waitBackfill(t, store, "done", 90*time.Second, func(b taskstate.Backfill) bool { return b.State == taskstate.BackfillDone })
	if done.Taken != n || done.Refused != 0 || at.Taken >= n {
		t.Fatalf("backfill %+v (at the kill: %d taken): want all %d taken, none refused, some after the kill", done, at.Taken, n)
	}

	// The ledger: each instant once, but for the one the kill may have cut.
	entries, err := newRedisLedger(srv.Client(), ns).Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	written := map[time.Time][]entry{}
	for _, e := range entries {
		if !e.Fire.Before(from) && !e.Fire.After(to) {
			written[e.Fire.UTC()] = append(written[e.Fire.UTC()], e)
		}
	}
	var missing []time.Time
	after := map[string]bool{}
	for i := range n {
		fire := from.Add(time.Duration(i) * time.Second)
		switch w := written[fire]; {
		case len(w) > 1:
			t.Errorf("instant %s written %d times: %v", nodetest.FireString(fire), len(w), w)
		case len(w) == 0:
			missing = append(missing, fire)
		case i >= at.Taken:
			after[w[0].Node] = true
		}
	}
	if len(missing) > 1 {
		t.Fatalf("%d instants never written (%v...), want at most the one the kill cut", len(missing), missing[0])
	}
	if after[driver] || len(after) == 0 {
		t.Errorf("instants after the kill written by %v, want only live nodes, not %s", after, driver)
	}
	if len(missing) == 1 {
		hist, err := store.Runs(context.Background(), closeTask, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range hist {
			found = found || (r.Backfill && r.Fire.Equal(missing[0]) && r.Node == driver && r.Outcome == taskstate.OutcomeTaken)
		}
		if !found {
			t.Errorf("instant %s was not written and the history does not show it taken by %s", nodetest.FireString(missing[0]), driver)
		}
		t.Logf("instant %s was cut by the kill: taken by %s, not run again", nodetest.FireString(missing[0]), driver)
	}

	// A second backfill of the range refuses every instant.
	live := nodes[0]
	if live == driver {
		live = nodes[2]
	}
	if code, body := postBackfill(t, base[live], token, from, to); code != http.StatusAccepted {
		t.Fatalf("second POST backfill: %d %s, want 202", code, body)
	}
	again := waitBackfill(t, store, "second, done", 60*time.Second, func(b taskstate.Backfill) bool {
		return b.ID != done.ID && b.State == taskstate.BackfillDone
	})
	if again.Refused != n || again.Taken != 0 {
		t.Errorf("second backfill %+v: want all %d refused as already run", again, n)
	}
}
