// These tests drive the cluster-wide task control on real payroll
// processes sharing one Redis, through the ndigo CLI and the web console in
// chromium.

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// The names of this file stay clear of control_test.go's, which the
// control API's branch adds to this package.
const (
	clientsToken = "e2e-admin-token"
	clientsTask  = "PayrollController.CloseBooks"
	clientsRun   = "payroll closed"
)

// clientsNodes starts payroll nodes on one Redis with admin endpoints and
// the admin token, and returns them with each node's admin address.
func clientsNodes(t *testing.T, names ...string) (*nodetest.Procs, map[string]string) {
	t.Helper()
	t.Setenv("PAYROLL_ADMIN_TOKEN", clientsToken)
	srv := redistest.Start(t)
	p := nodetest.New(t)
	admins := map[string]string{}
	for _, n := range names {
		p.StartPayroll(n, srv.Addr(), "control", "3s", "--admin-addr", "127.0.0.1:0")
		l, _ := p.WaitLine(n+"'s admin address", 0, time.Minute, func(l nodetest.Line) bool {
			return l.Proc == n && l.Msg == "admin endpoints serving"
		})
		admins[n] = l.Addr
	}
	p.WaitFires(clientsRun, "", 2, 40*time.Second)
	return p, admins
}

// buildCLI builds the ndigo command and returns a func that runs it against a
// node's admin address with the admin token, failing the test unless it
// exits 0.
func buildCLI(t *testing.T, admins map[string]string, token string) func(node string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ndigo")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ndigo/ndigo/cmd/ndigo").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/ndigo: %v\n%s", err, out)
	}
	return func(node string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cmd.Environ(), "NDIGO_ADMIN="+admins[node], "NDIGO_ADMIN_TOKEN="+token)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("ndigo %s on %s: %v: %s", strings.Join(args, " "), node, err, stderr)
		}
		return string(out)
	}
}

// clientsFire returns the fire of a log line; zero if it has none.
func clientsFire(l nodetest.Line) time.Time {
	f, _ := time.Parse(time.RFC3339Nano, l.Fire)
	return f
}

// clientsPassFires waits until a node's last fire of the task, run or
// skipped, is at or after at, as the nodes' task lists say.
func clientsPassFires(t *testing.T, admins map[string]string, nodes []string, at time.Time) {
	t.Helper()
	var lists []string
	for _, n := range nodes {
		lists = append(lists, "http://"+admins[n]+"/scheduledtasks")
	}
	waitLastFire(t, lists, clientsTask, at, "")
}

// clientsRunsAfter returns the payroll runs logged after line index mark.
func clientsRunsAfter(p *nodetest.Procs, mark int) []nodetest.Line {
	var out []nodetest.Line
	for _, l := range p.All()[mark:] {
		if l.Msg == clientsRun {
			out = append(out, l)
		}
	}
	return out
}

// ndigo pause stops every node's runs within one period, ndigo run then
// runs the task once in the cluster with a newer fencing token, ndigo
// runs lists the same history from every node, and ndigo resume brings
// the runs back.
func TestCLIControlsTheCluster(t *testing.T) {
	nodes := []string{"n0", "n1", "n2"}
	p, admins := clientsNodes(t, nodes...)
	ndigo := buildCLI(t, admins, clientsToken)

	ndigo("n0", "pause", clientsTask)
	pausedAt := time.Now().UTC()
	for _, n := range nodes {
		var res struct {
			Tasks []struct {
				Name   string `json:"name"`
				Paused bool   `json:"paused"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal([]byte(ndigo(n, "--json", "tasks")), &res); err != nil {
			t.Fatal(err)
		}
		for _, task := range res.Tasks {
			if task.Name == clientsTask && !task.Paused {
				t.Errorf("%s does not show %s paused", n, clientsTask)
			}
		}
	}
	// The fire in flight at the pause may still run; none after it.
	quiet := pausedAt.Truncate(time.Second).Add(2 * time.Second)
	clientsPassFires(t, admins, nodes, quiet.Add(3*time.Second))
	for _, l := range p.All() {
		if l.Msg == clientsRun && !clientsFire(l).Before(quiet) {
			t.Errorf("%s ran fire %s while paused", l.Proc, l.Fire)
		}
	}

	var maxToken uint64
	for _, l := range p.All() {
		if l.Msg == clientsRun {
			maxToken = max(maxToken, l.Token)
		}
	}
	mark := len(p.All())
	ndigo("n1", "run", clientsTask) // paused, yet run by hand
	manual, _ := p.WaitLine("the manual run", mark, 30*time.Second, func(l nodetest.Line) bool { return l.Msg == clientsRun && l.Manual })
	clientsPassFires(t, admins, nodes, time.Now().UTC().Truncate(time.Second).Add(3*time.Second))
	if runs := clientsRunsAfter(p, mark); len(runs) != 1 {
		t.Errorf("run now ran %d times: %+v", len(runs), runs)
	}
	if manual.Token <= maxToken {
		t.Errorf("the manual run's token %d is not newer than %d", manual.Token, maxToken)
	}

	var first []map[string]any
	for i, n := range nodes {
		var res struct {
			Runs []map[string]any `json:"runs"`
		}
		if err := json.Unmarshal([]byte(ndigo(n, "--json", "runs", clientsTask)), &res); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Runs
			// The paused fires are recorded too; the newest run is the
			// manual one.
			var newest map[string]any
			for _, r := range first {
				if r["start"] != nil {
					newest = r
					break
				}
			}
			if newest == nil || newest["manual"] != true || newest["node"] != manual.Proc || newest["token"] != float64(manual.Token) {
				t.Errorf("the newest run is not the manual run on %s with token %d: %v", manual.Proc, manual.Token, first)
			}
			continue
		}
		if !reflect.DeepEqual(res.Runs, first) {
			t.Errorf("%s lists another history than %s:\n%v\n%v", n, nodes[0], res.Runs, first)
		}
	}

	mark = len(p.All())
	ndigo("n2", "resume", clientsTask)
	p.WaitLine("a run after resume", mark, 30*time.Second, func(l nodetest.Line) bool { return l.Msg == clientsRun })
}

// A pause clicked on one node's console shows on another node's console.
func TestConsolePauseAcrossNodes(t *testing.T) {
	_, admins := clientsNodes(t, "n0", "n1")
	browser := browsertest.New(t)
	page0 := browsertest.OpenConsole(t, browser, "http://"+admins["n0"]+"/")
	page1 := browsertest.OpenConsole(t, browsertest.Tab(t, browser), "http://"+admins["n1"]+"/")
	page1.WaitCell("n1's page showing the task running", clientsTask, browsertest.ColPaused, "no")

	page0.Act(clientsTask, "pause", "wrong")
	if _, isError := page0.Message("pause " + clientsTask + ": 401 Unauthorized: "); !isError {
		t.Error("a wrong token's refusal is not shown as an error")
	}
	page0.Act(clientsTask, "pause", clientsToken)
	page1.WaitCell("n1's page showing the pause made on n0", clientsTask, browsertest.ColPaused, "paused")
	page1.Act(clientsTask, "resume", clientsToken)
	page0.WaitCell("n0's page showing the resume made on n1", clientsTask, browsertest.ColPaused, "no")
}

// The stored-schedule commands of docs/OPERATIONS.md work against the
// example as written there: every node has the tenant-report handler they
// name, so none lists a problem; an update to a cron that fires every
// second runs the report once per fire in the cluster; a delete stops it.
func TestDocumentedScheduleCommandsRunOnPayroll(t *testing.T) {
	nodes := []string{"n0", "n1"}
	p, admins := clientsNodes(t, nodes...)
	ndigo := buildCLI(t, admins, clientsToken)

	create := documentedCommand(t, "../../docs/OPERATIONS.md", "ndigo schedule create report-acme ")
	ndigo("n0", create...)
	for _, n := range nodes {
		var res struct {
			Schedules []struct {
				Name    string `json:"name"`
				Handler string `json:"handler"`
				Problem string `json:"problem"`
			} `json:"schedules"`
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := json.Unmarshal([]byte(ndigo(n, "--json", "schedules")), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Schedules) == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(res.Schedules) != 1 || res.Schedules[0].Name != "report-acme" || res.Schedules[0].Handler != "tenant-report" ||
			res.Schedules[0].Problem != "" {
			t.Fatalf("%s's stored schedules after %q: %+v", n, strings.Join(create, " "), res.Schedules)
		}
	}

	mark := len(p.All())
	ndigo("n1", "schedule", "update", "report-acme", "--cron", "@every 1s")
	var fires []time.Time
	p.WaitLine("three tenant reports", mark, time.Minute, func(l nodetest.Line) bool {
		if l.Msg == "tenant report sent" {
			if l.Tenant != "acme" || l.Task != "report-acme" {
				t.Errorf("a tenant report of %q as %q, want acme as report-acme", l.Tenant, l.Task)
			}
			fires = append(fires, clientsFire(l))
		}
		return len(fires) == 3
	})
	ndigo("n0", "schedule", "delete", "report-acme")
	deleted := time.Now()
	seen := map[time.Time]string{}
	for _, l := range p.All()[mark:] {
		if l.Msg != "tenant report sent" {
			continue
		}
		f := clientsFire(l)
		if prev, ok := seen[f]; ok {
			t.Errorf("fire %s of report-acme ran on %s and %s", l.Fire, prev, l.Proc)
		}
		seen[f] = l.Proc
	}
	// No fire after the delete reached the nodes' next poll.
	clientsPassFires(t, admins, nodes, deleted.Add(3*time.Second))
	for _, l := range p.All()[mark:] {
		if l.Msg == "tenant report sent" && clientsFire(l).After(deleted.Add(2*time.Second)) {
			t.Errorf("%s ran report-acme's fire %s after its delete at %s", l.Proc, l.Fire, deleted.Format(time.RFC3339Nano))
		}
	}
}

// documentedCommand returns the arguments of the ndigo command in the page
// at path whose line starts with prefix, joined with its continuation
// lines, its shell quoting undone and its comment dropped.
func documentedCommand(t *testing.T, path, prefix string) []string {
	t.Helper()
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmd string
	lines := strings.Split(string(page), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		for cmd = l; strings.HasSuffix(strings.TrimSpace(cmd), `\`) && i+1 < len(lines); i++ {
			cmd = strings.TrimSuffix(strings.TrimSpace(cmd), `\`) + " " + strings.TrimSpace(lines[i+1])
		}
		break
	}
	if cmd == "" {
		t.Fatalf("%s has no line that starts with %q", path, prefix)
	}
	var args []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range strings.TrimPrefix(cmd, "ndigo ") {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			return args
		case r == ' ':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		args = append(args, cur.String())
	}
	return args
}
