package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

const (
	closed    = "payroll closed"
	closeTask = "PayrollController.CloseBooks"
)

// call sends method url with the bearer token ("" for none) and decodes
// the JSON body into out.
func call(t *testing.T, method, u, token string, out any) int {
	t.Helper()
	code, body := admintest.Send(t, method, u, token)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return code
}

// adminURL waits for node's admin endpoints and returns their base URL
// with the close-books task's path.
func adminURL(p *nodetest.Procs, node string) string {
	l, _ := p.WaitLine(node+"'s admin address", 0, 30*time.Second, func(l nodetest.Line) bool {
		return l.Proc == node && l.Msg == "admin endpoints serving"
	})
	return "http://" + l.Addr + "/scheduledtasks/" + url.PathEscape(closeTask)
}

// waitLastFire waits until a node's last fire of task, as the task lists
// at lists (GET /scheduledtasks of each node) say, is one at or after from,
// with outcome unless that is "". The nodes spread their tasks, so the
// task's owner takes each fire; a paused task logs only the first of a
// pause, so lines cannot tell when the fires went by.
func waitLastFire(t *testing.T, lists []string, task string, from time.Time, outcome string) {
	t.Helper()
	waitTask(t, lists, task, fmt.Sprintf("a last fire at or after %s (outcome %q)", from.Format(time.RFC3339), outcome), func(tk listedTask) bool {
		f := tk.LastFire
		return f != nil && !f.Fire.Before(from) && (outcome == "" || f.Outcome == outcome)
	})
}

// listedTask is what the waits read of a task in GET /scheduledtasks.
type listedTask struct {
	Name     string `json:"name"`
	Failures int    `json:"failures"`
	LastFire *struct {
		Fire    time.Time `json:"fire"`
		Outcome string    `json:"outcome"`
	} `json:"lastFire"`
}

// waitTask waits until some node's task list at lists shows task as ok
// says, for 30s at most.
func waitTask(t *testing.T, lists []string, task, what string, ok func(listedTask) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, u := range lists {
			var body struct {
				Tasks []listedTask `json:"tasks"`
			}
			if call(t, http.MethodGet, u, "", &body) != http.StatusOK {
				continue
			}
			for _, tk := range body.Tasks {
				if tk.Name == task && ok(tk) {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // the nodes' lists are polled, not pushed
	}
	t.Fatalf("no node's list showed %s of %s within 30s", what, task)
}

// waitPausedFire waits until a node skipped a paused fire of the
// close-books task at or after from; base holds each node's task URL.
func waitPausedFire(t *testing.T, base map[string]string, from time.Time) {
	t.Helper()
	var lists []string
	for _, u := range base {
		lists = append(lists, strings.TrimSuffix(u, "/"+url.PathEscape(closeTask)))
	}
	waitLastFire(t, lists, closeTask, from, "skipped: paused")
}

type runsBody struct {
	Task string `json:"task"`
	Runs []struct {
		Fire    time.Time `json:"fire"`
		Manual  bool      `json:"manual"`
		Node    string    `json:"node"`
		Token   uint64    `json:"token"`
		Outcome string    `json:"outcome"`
	} `json:"runs"`
}

// Three payroll nodes on one Redis, controlled over HTTP: a pause on one
// node stops every node's runs within one period; a manual run asked of
// another runs exactly once in the cluster, fenced with a fresh token, while
// the task stays paused; every node lists the same history; a resume brings
// the schedule back.
func TestControlAcrossThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about 20s")
	}
	srv := redistest.Start(t)
	p := nodetest.New(t)
	const token, period = "e2e-token", 2 * time.Second
	nodes := []string{"n0", "n1", "n2"}
	base := map[string]string{}
	for _, n := range nodes {
		p.StartPayroll(n, srv.Addr(), "control", "5s", "--cron", "@every 2s", "--admin-addr", "127.0.0.1:0", "--admin-token", token)
		base[n] = adminURL(p, n)
	}
	p.WaitFires(closed, "", 2, 30*time.Second)

	var refused map[string]string
	if code := call(t, http.MethodPost, base["n1"]+"/pause", "", &refused); code != http.StatusUnauthorized {
		t.Fatalf("pause without the token: %d %v, want 401", code, refused)
	}
	var action map[string]any
	if code := call(t, http.MethodPost, base["n1"]+"/pause", token, &action); code != http.StatusOK || action["paused"] != true {
		t.Fatalf("pause: %d %v", code, action)
	}
	paused := time.Now()
	mark := len(p.All())
	waitPausedFire(t, base, paused.Add(2*period))
	limit := nodetest.FireString(paused.Add(period))
	var maxToken uint64
	for _, l := range p.All() {
		if l.Msg == closed && l.Fire > limit {
			t.Errorf("%s ran fire %s, more than a period after the pause at %s", l.Proc, l.Fire, nodetest.FireString(paused))
		}
		if l.Msg == closed {
			maxToken = max(maxToken, l.Token)
		}
	}

	if code := call(t, http.MethodPost, base["n2"]+"/run", token, &action); code != http.StatusAccepted || action["status"] != "requested" {
		t.Fatalf("run: %d %v", code, action)
	}
	manual, _ := p.WaitLine("manual run", mark, 30*time.Second, func(l nodetest.Line) bool { return l.Msg == closed && l.Manual })
	// Every node polls the requests at least twice in two more periods.
	waitPausedFire(t, base, time.Now().Add(2*period))
	var manuals []nodetest.Line
	for _, l := range p.All() {
		if l.Msg == closed && l.Manual {
			manuals = append(manuals, l)
		}
	}
	if len(manuals) != 1 || manual.Token <= maxToken {
		t.Fatalf("manual runs %+v, want exactly one, with a token above every earlier run's (%d)", manuals, maxToken)
	}

	var first runsBody
	for i, n := range nodes {
		var got runsBody
		if code := call(t, http.MethodGet, base[n]+"/runs", "", &got); code != http.StatusOK {
			t.Fatalf("runs from %s: %d", n, code)
		}
		if i == 0 {
			first = got
			continue
		}
		if !reflect.DeepEqual(got, first) {
			t.Errorf("runs from %s differ from n0's:\n%+v\n%+v", n, got, first)
		}
	}
	// The paused fires are recorded too (by the node that claimed each):
	// among the runs, the manual one is the newest.
	var ran []int
	for i, r := range first.Runs {
		if r.Outcome != "skipped: paused" {
			ran = append(ran, i)
		}
	}
	if len(ran) < 3 || len(ran) == len(first.Runs) || first.Task != closeTask {
		t.Fatalf("runs %+v: want the scheduled runs, the paused fires and the manual run", first)
	}
	if newest := first.Runs[ran[0]]; !newest.Manual || newest.Token != manual.Token || newest.Node != manual.Node {
		t.Fatalf("runs %+v: want the manual run (token %d on %s) the newest run, after the scheduled ones", first, manual.Token, manual.Node)
	}

	if code := call(t, http.MethodPost, base["n0"]+"/resume", token, &action); code != http.StatusOK || action["paused"] != false {
		t.Fatalf("resume: %d %v", code, action)
	}
	resumed := nodetest.FireString(time.Now())
	p.WaitFires(closed, resumed, 2, 30*time.Second)
}

// All nodes stopped across a fire and restarted within the catch-up
// window: that fire runs exactly once. With skip, it does not run.
func TestCatchUpOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for about 40s")
	}
	srv := redistest.Start(t)
	for _, tc := range []struct {
		policy string
		want   int
	}{{"4s", 1}, {"skip", 0}} {
		t.Run(tc.policy, func(t *testing.T) {
			const period = 6 * time.Second
			p := nodetest.New(t)
			args := []string{"--cron", "@every 6s", "--catch-up", tc.policy}
			ns := "catchup-" + tc.policy
			p.StartPayroll("a0", srv.Addr(), ns, "5s", args...)
			p.StartPayroll("a1", srv.Addr(), ns, "5s", args...)
			for _, n := range []string{"a0", "a1"} {
				p.WaitLine(n+" started", 0, 30*time.Second, func(l nodetest.Line) bool { return l.Proc == n && l.Msg == "scheduler started" })
			}
			// A scheduled fire, not the catch-up of the start: by then
			// both nodes handle SIGTERM (installed just after the start).
			fires := p.WaitFires(closed, nodetest.FireString(time.Now().Add(time.Second)), 1, 30*time.Second)
			next := nodetest.ParseFire(t, fires[len(fires)-1]).Add(period)
			for _, n := range []string{"a0", "a1"} {
				p.Signal(n, syscall.SIGTERM)
				if err := p.WaitExit(n, 20*time.Second); err != nil {
					t.Fatalf("%s: %v", n, err)
				}
			}
			if time.Now().After(next) {
				t.Fatalf("the nodes took until %v to stop, after the fire at %v that they were to miss", time.Now(), next)
			}
			// Wall-clock time must pass the fire with no node up.
			time.Sleep(time.Until(next) + 300*time.Millisecond)
			p.StartPayroll("b0", srv.Addr(), ns, "5s", args...)
			p.StartPayroll("b1", srv.Addr(), ns, "5s", args...)
			after := nodetest.FireString(next.Add(period))
			p.WaitFires(closed, after, 1, 30*time.Second)
			if got := p.Runs(closed, nodetest.FireString(next))[nodetest.FireString(next)]; len(got) != tc.want {
				t.Fatalf("catch-up %s: the fire missed at %s ran %d times (%+v), want %d",
					tc.policy, nodetest.FireString(next), len(got), got, tc.want)
			}
		})
	}
}
