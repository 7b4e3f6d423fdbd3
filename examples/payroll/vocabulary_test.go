package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// vocabularyToken is the admin token of the vocabulary test's nodes.
const vocabularyToken = "e2e-vocabulary-token"

// Three payroll nodes on Redis and on PostgreSQL, driven through the ndigo
// CLI as an operator would, run a calendar, bounds and a one-off:
//
//   - a calendar edited through one node stops a stored schedule's fires
//     on every node from the instant the edit comes in force (two polls
//     after it, the rule of every change to the stored state), and the
//     history shows them as excluded by that calendar;
//   - a one-off (@at) due just after its owner is killed runs exactly
//     once, late, on the node that takes over;
//   - a task with maxRuns 100 @every 1s, whose owner is killed mid-way,
//     runs exactly 100 times in the cluster, each fire once, and every
//     node lists it completed.
func TestCalendarsBoundsAndOneOffsOnThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes for about two minutes on each store")
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		vocabularyOnThreeNodes(t, "--redis", "redis://"+srv.Addr())
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		srv := pgtest.Start(t)
		vocabularyOnThreeNodes(t, "--postgres", srv.URL())
	})
}

func vocabularyOnThreeNodes(t *testing.T, storeFlag, url string) {
	p := nodetest.New(t)
	admins := map[string]string{}
	start := func(n string) {
		for _, c := range cluster {
			if c.name == n {
				p.StartPayrollOn(n, storeFlag, url, "e2e", failoverTTL.String(), "--clock-offset", c.offset.String(),
					"--admin-addr", "127.0.0.1:0", "--admin-token", vocabularyToken)
			}
		}
		skip := len(p.All())
		l, _ := p.WaitLine(n+"'s admin address", skip, time.Minute, func(l nodetest.Line) bool {
			return l.Proc == n && l.Msg == "admin endpoints serving"
		})
		admins[n] = l.Addr
	}
	for _, c := range cluster {
		start(c.name)
	}
	p.WaitFires(closed, "", 2, 40*time.Second)
	ndigo := buildCLI(t, admins, vocabularyToken)

	ndigo("n0", "calendar", "create", "quiet", "--date", "2099-01-01", "--note", "nothing yet")
	ndigo("n1", "schedule", "create", "cal-report", "--handler", "tenant-report", "--cron", "@every 1s", "--lock", "cal",
		"--args", `{"tenant": "cal"}`, "--option", "calendar=quiet")
	ndigo("n2", "schedule", "create", "limited", "--handler", "tenant-report", "--cron", "@every 1s", "--lock", "limited",
		"--args", `{"tenant": "limited"}`, "--option", "maxRuns=100", "--option", "lockTtl="+failoverTTL.String())
	at := time.Now().Add(12 * time.Second).Truncate(time.Second)
	ndigo("n0", "schedule", "create", "once", "--handler", "tenant-report", "--cron", "@at "+at.UTC().Format(time.RFC3339),
		"--lock", "once", "--args", `{"tenant": "once"}`)

	// The one-off: its owner is killed a second before its instant.
	time.Sleep(time.Until(at.Add(-1500 * time.Millisecond))) // a wall-clock instant of the cluster's, not a margin
	owner := vocabularyOwner(t, ndigo, "n1", "once")
	p.Signal(owner, syscall.SIGKILL)
	_ = p.WaitExit(owner, 10*time.Second)
	l, _ := p.WaitLine("the one-off's run", 0, failoverTTL+30*time.Second, func(l nodetest.Line) bool {
		return l.Msg == "tenant report sent" && l.Task == "once"
	})
	t.Logf("one-off at %s (owner %s killed) ran on %s", at.UTC().Format(time.RFC3339), owner, l.Proc)
	start(owner)

	// The calendar: from now on, every instant.
	ndigo("n2", "calendar", "update", "quiet", "--cron", "* * * * *", "--note", "freeze")
	edited := time.Now()
	// The edit comes in force two polls (1s each) after it, on every node;
	// the clocks are 300ms apart.
	inForce := edited.Add(2*time.Second + 300*time.Millisecond)

	// maxRuns: kill the owner of limited once it ran about half. (WaitLine
	// holds the lines' lock while it asks ok: count in ok, not with All.)
	limited := map[string]bool{}
	ranLimited := func(n int) func(nodetest.Line) bool {
		return func(l nodetest.Line) bool {
			if l.Msg == "tenant report sent" && l.Task == "limited" {
				limited[l.Fire] = true
			}
			return len(limited) >= n
		}
	}
	half, mark := p.WaitLine("limited's 50th run", 0, 90*time.Second, ranLimited(50))
	p.Signal(half.Proc, syscall.SIGKILL)
	_ = p.WaitExit(half.Proc, 10*time.Second)
	t.Logf("killed %s after limited's run of %s", half.Proc, half.Fire)
	p.WaitLine("limited's 100th run", mark+1, 3*time.Minute, ranLimited(100))
	time.Sleep(3 * time.Second) // any 101st run would show by now: the task fires every second
	seen := map[string]string{}
	for _, l := range p.All() {
		if l.Msg != "tenant report sent" {
			continue
		}
		key := l.Task + " " + l.Fire
		if prev, ok := seen[key]; ok {
			t.Errorf("%s ran on %s and %s", key, prev, l.Proc)
		}
		seen[key] = l.Proc
		if l.Task == "cal-report" && nodetest.ParseFire(t, l.Fire).After(inForce) {
			t.Errorf("%s ran cal-report's fire %s, after the calendar excluded every instant from %s", l.Proc, l.Fire,
				inForce.UTC().Format(time.RFC3339Nano))
		}
	}
	if n := vocabularyCount(p, "limited"); n != 100 {
		t.Errorf("limited ran %d times, want exactly 100 (maxRuns)", n)
	}
	if n := vocabularyCount(p, "once"); n != 1 {
		t.Errorf("the one-off ran %d times, want 1", n)
	}
	for _, c := range cluster {
		if !p.Running(c.name) {
			continue
		}
		out := ndigo(c.name, "--json", "tasks")
		var res struct {
			Tasks []struct {
				Name      string `json:"name"`
				Completed bool   `json:"completed"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("ndigo --json tasks on %s: %v: %s", c.name, err, out)
		}
		for _, tk := range res.Tasks {
			if (tk.Name == "limited" || tk.Name == "once") && !tk.Completed {
				t.Errorf("%s lists %s as not completed: %s", c.name, tk.Name, out)
			}
		}
	}
	var live string
	for _, c := range cluster {
		if p.Running(c.name) {
			live = c.name
		}
	}
	runs := ndigo(live, "runs", "cal-report")
	if !strings.Contains(runs, "excluded: calendar quiet") {
		t.Errorf("ndigo runs cal-report shows no fire excluded by the calendar:\n%s", runs)
	}
}

// vocabularyCount returns how many fires of task ran, by the nodes' lines.
func vocabularyCount(p *nodetest.Procs, task string) int {
	fires := map[string]bool{}
	for _, l := range p.All() {
		if l.Msg == "tenant report sent" && l.Task == task {
			fires[l.Fire] = true
		}
	}
	return len(fires)
}

// vocabularyOwner returns the node that node's task list says owns task.
func vocabularyOwner(t *testing.T, ndigo func(string, ...string) string, node, task string) string {
	t.Helper()
	var res struct {
		Tasks []struct {
			Name  string `json:"name"`
			Owner string `json:"owner"`
		} `json:"tasks"`
	}
	out := ndigo(node, "--json", "tasks")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("ndigo --json tasks: %v: %s", err, out)
	}
	for _, tk := range res.Tasks {
		if tk.Name == task && tk.Owner != "" {
			return tk.Owner
		}
	}
	t.Fatalf("%s lists no owner of %s: %s", node, task, out)
	return ""
}
