package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// closeBooks is the payroll example's task the walk-through audits.
const closeBooks = "PayrollController.CloseBooks"

// TestClusterWalkThrough runs CLUSTER.md's walk-through, "Three nodes on a
// local Redis", as the page writes it, on Redis, and with the node commands
// of "The payroll example on PostgreSQL" and "The payroll example on etcd"
// on those stores: it reads the page's shell blocks and runs each command,
// and compares the output blocks that follow with what the commands print.
// The test maps what the page cannot know: the servers are its own, on free
// ports (the page's store URL and admin addresses stand for them), the nodes
// log in JSON for the test to read, and the node the page kills is the one
// that runs the task, between two of its runs. On the way it checks the log
// lines the page quotes, that each fire ran once before the kill, and after
// it what the page promises: the node that takes the task over runs the
// fires the killed one left, late; a survivor's audit covers the kill, and
// its missed count is the instants of the schedule that no record of the
// shared history covers (the run history, read through the API; the nodes'
// logs agree), which is none; the metric ndigo_task_missed_fires equals it,
// the console's task page shows it, and ndigo-rules.yml's missed-fires and audit rules stay
// quiet. (Before late fires, 30 were missed here.) About two minutes, most of it
// waiting for the audit's horizon (the lease and a minute) to pass the
// kill; the three stores run at once.
func TestClusterWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three clusters of three processes for about two minutes")
	}
	page := readPage(t, "CLUSTER.md")
	redisSteps := pageSection(t, page, "### Three nodes on a local Redis")
	var wg sync.WaitGroup
	for _, c := range []struct {
		store string
		steps string // the section whose commands start the nodes
		start func(t *testing.T, w *walk)
	}{
		{"redis", redisSteps, func(t *testing.T, w *walk) {
			w.storeURL = "redis://" + redistest.Start(t).Addr()
		}},
		{"postgres", pageSection(t, page, "### The payroll example on PostgreSQL"), func(t *testing.T, w *walk) {
			srv := pgtest.Start(t)
			w.storeURL = srv.URL()
			pool := srv.Pool()
			w.psql = func(sql string) (int, error) {
				rows, err := pool.Query(context.Background(), sql)
				if err != nil {
					return 0, err
				}
				n := 0
				for rows.Next() {
					n++
				}
				return n, rows.Err()
			}
		}},
		{"etcd", pageSection(t, page, "### The payroll example on etcd"), func(t *testing.T, w *walk) {
			w.storeURL = strings.Join(etcdtest.StartCluster(t, 1).Endpoints(), ",")
		}},
	} {
		// At once, whatever -parallel says: each waits on its nodes rather
		// than computes.
		wg.Go(func() {
			t.Run(c.store, func(t *testing.T) {
				w := &walk{t: t, p: nodetest.New(t), store: "--" + c.store, bins: map[string]string{},
					addrs: map[string]string{}, nodeAddr: map[string]string{}}
				c.start(t, w)
				steps := blocks(c.steps)
				if c.store != "redis" {
					// The store's own section starts the nodes; the rest is the
					// walk-through on Redis from its first ndigo command on.
					rest := blocks(redisSteps)
					i := slices.IndexFunc(rest, func(b block) bool { return b.shell && strings.Contains(b.text, "./cmd/ndigo") })
					if i < 0 {
						t.Fatal("CLUSTER.md's walk-through on Redis builds no ndigo (go build -o ... ./cmd/ndigo)")
					}
					steps = append(steps, rest[i:]...)
				}
				w.run(steps)
				w.checkAfterTheKill()
			})
		})
	}
	wg.Wait()
}

// The log messages the walk-through quotes; the test checks that the page
// quotes each and that the nodes log it where the page says.
const (
	msgJoined    = "membership changed"
	msgClosed    = "payroll closed"
	msgTakesOver = "taking over the tasks of a node that left"
	msgLate      = "running a fire late after a takeover"
)

// A walk runs one store's walk-through.
type walk struct {
	t        *testing.T
	p        *nodetest.Procs
	store    string // the nodes' store flag: --redis, --postgres, --etcd
	storeURL string // the test's server
	psql     func(sql string) (rows int, err error)

	bins     map[string]string // the page's binary paths: the test's builds
	addrs    map[string]string // a node's admin address on the page: its real one
	nodeAddr map[string]string // a node's real admin address, by name
	nodes    []string          // in the order started
	output   []string          // what the last command printed, for the block after it

	killed     string    // the node killed, once it is
	killedLast string    // the last fire it logged as run
	killedAt   time.Time // when
}

// run runs the blocks in order: each shell line, and each output block
// checked against what the command before it printed.
func (w *walk) run(steps []block) {
	t := w.t
	t.Helper()
	for _, b := range steps {
		if !b.shell {
			checkSample(t, b.text, w.output, keyColumns)
			continue
		}
		for line := range strings.SplitSeq(strings.TrimSpace(b.text), "\n") {
			if strings.HasSuffix(line, "\\") {
				t.Fatalf("%q: the test runs one command a line, without continued lines", line)
			}
			w.command(line, shellWords(t, line))
		}
	}
	if w.killed == "" {
		t.Fatal("the walk-through kills no node (pkill -KILL -f -- '--node NAME ')")
	}
}

// command runs one line of the page, split into words.
func (w *walk) command(line string, words []string) {
	t := w.t
	t.Helper()
	if len(words) == 0 {
		return
	}
	prog, args := words[0], words[1:]
	switch {
	case prog == "sudo": // installing a server: the test's own is running
	case prog == "redis-server" || prog == "etcd":
		if (prog == "etcd") != (w.store == "--etcd") || (prog == "redis-server") != (w.store == "--redis") {
			t.Fatalf("%q: a %s server in the walk-through on %s", line, prog, w.store)
		}
		if prog == "redis-server" && !(strings.Contains(line, "--save ''") && strings.Contains(line, "--appendonly no")) {
			t.Errorf("%q: the walk-through's Redis should keep nothing on disk, as the test's does", line)
		}
	case prog == "go" && len(args) > 0 && args[0] == "build":
		w.build(line, args[1:])
	case w.bins[prog] == "payroll":
		w.startNode(line, args)
	case w.bins[prog] == "ndigo":
		w.ndigo(line, args)
	case prog == "pkill":
		w.kill(line, args)
	case prog == "curl":
		w.curl(line, args)
	case prog == "psql":
		w.runPsql(line, args)
	case prog == "xdg-open":
		w.openConsole(line, args)
	default:
		t.Fatalf("%q: the test does not know how to run %s", line, prog)
	}
}

// build maps the binary the page builds to the test's build of it.
func (w *walk) build(line string, args []string) {
	t := w.t
	var out, pkg string
	tags := false
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-o":
			i++
			out = args[i]
		case "-tags":
			i++
			tags = args[i] == "etcd"
		default:
			pkg = args[i]
		}
	}
	switch pkg {
	case "./examples/payroll":
		if w.store == "--etcd" && !tags {
			t.Errorf("%q: the payroll example takes --etcd only built with -tags etcd", line)
		}
		nodetest.BuildPayroll(t)
		w.bins[out] = "payroll"
	case "./cmd/ndigo":
		w.bins[out] = "ndigo"
	default:
		t.Fatalf("%q: the test builds ./examples/payroll and ./cmd/ndigo, not %s", line, pkg)
	}
}

// startNode starts a payroll node with the page's flags, on the test's
// server and a free admin port, and waits until it serves.
func (w *walk) startNode(line string, args []string) {
	t := w.t
	if len(args) == 0 || args[len(args)-1] != "&" {
		t.Fatalf("%q: a node runs in the background (&)", line)
	}
	args = slices.Clone(args[:len(args)-1])
	var name, addr string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--node":
			name = args[i+1]
		case "--admin-addr":
			addr, args[i+1] = args[i+1], "127.0.0.1:0"
		case "--redis", "--postgres", "--etcd":
			if args[i] != w.store {
				t.Fatalf("%q: a node on %s in the walk-through on %s", line, args[i], w.store)
			}
			args[i+1] = w.storeURL
		}
	}
	if name == "" || addr == "" || !slices.Contains(args, "--metrics") {
		t.Fatalf("%q: the walk-through's nodes are named (--node) and serve the admin endpoints with metrics (--admin-addr, --metrics)", line)
	}
	cmd := exec.Command(nodetest.BuildPayroll(t), append(args, "--log-format", "json", "--for", "10m")...)
	w.p.Start(name, cmd)
	serving, _ := w.p.WaitLine(name+"'s admin address", 0, time.Minute, func(l nodetest.Line) bool {
		return l.Proc == name && l.Msg == "admin endpoints serving"
	})
	w.addrs[addr], w.nodeAddr[name] = serving.Addr, serving.Addr
	w.nodes = append(w.nodes, name)
}

// ndigo runs the CLI as the page does, on the node whose address the page
// names (a survivor's for a killed node's), once the cluster is where the
// page runs it: the task running, or, after the kill, the audit past it.
func (w *walk) ndigo(line string, args []string) {
	t := w.t
	args = slices.Clone(args)
	echo := false
	if n := len(args); n >= 3 && args[n-3] == ";" && args[n-2] == "echo" && args[n-1] == "exit $?" {
		args, echo = args[:n-3], true
	}
	i := slices.Index(args, "--admin")
	if i < 0 || i+1 == len(args) {
		t.Fatalf("%q: the walk-through names the node it asks (--admin ADDR), which the test maps to the node's real address", line)
	}
	args[i+1] = w.real(line, args[i+1])
	if w.killed == "" {
		w.waitRunning()
	} else {
		w.waitJudged(w.survivorAddr())
	}
	cmd := exec.Command(buildNdigo(t), args...)
	cmd.Env = append(os.Environ(), "NDIGO_ADMIN=", "NDIGO_ADMIN_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	w.output = append(lines(stdout.String()), lines(stderr.String())...)
	if slices.Contains(args, "tasks") {
		// OPERATIONS.md's sample of the table, of another cluster: its
		// columns.
		sec := pageSection(t, readPage(t, "OPERATIONS.md"), "### CLI (`cmd/ndigo`)")
		i := slices.IndexFunc(blocks(sec), func(b block) bool { return !b.shell && strings.HasPrefix(b.text, "NAME ") })
		if i < 0 {
			t.Fatal("OPERATIONS.md's CLI section shows no ndigo tasks table")
		}
		checkSample(t, blocks(sec)[i].text, w.output, nil)
	}
	if echo {
		w.output = append(w.output, "exit "+strconv.Itoa(code))
	} else if code != 0 {
		t.Fatalf("%q: exit %d: %s", line, code, stderr.String())
	}
}

// real returns the node's real address for the page's address addr, a
// survivor's if that node was killed.
func (w *walk) real(line, addr string) string {
	w.t.Helper()
	r, ok := w.addrs[addr]
	if !ok {
		w.t.Fatalf("%q: no node serves %s on the page", line, addr)
	}
	if w.killed != "" && r == w.nodeAddr[w.killed] {
		return w.survivorAddr()
	}
	return r
}

// survivorAddr returns the admin address of the first node not killed.
func (w *walk) survivorAddr() string {
	for _, n := range w.nodes {
		if n != w.killed {
			return w.nodeAddr[n]
		}
	}
	w.t.Fatal("no node survives")
	return ""
}

// waitRunning waits, as the page's reader does, until every node joined
// and the task ran a few fires, and checks the lines the page says the
// nodes write then: each joins, and every fire runs once.
func (w *walk) waitRunning() {
	t := w.t
	for _, n := range w.nodes {
		w.p.WaitLine(n+"'s "+msgJoined, 0, time.Minute, func(l nodetest.Line) bool {
			return l.Proc == n && l.Msg == msgJoined
		})
	}
	for _, l := range w.p.All() {
		if strings.HasPrefix(l.Msg, "the shared history keeps too few runs") {
			t.Fatalf("%s: %q: the walk-through's history cannot cover the kill", l.Proc, l.Msg)
		}
	}
	fires := w.p.WaitFires(msgClosed, "", 5, time.Minute)
	w.p.CheckEveryFireOnce(msgClosed, fires[len(fires)-3:], time.Second)
	if t.Failed() {
		t.FailNow()
	}
}

// kill kills the node that runs the task, whichever the page names.
func (w *walk) kill(line string, args []string) {
	t := w.t
	if len(args) != 4 || args[0] != "-KILL" || args[1] != "-f" || args[2] != "--" || !regexp.MustCompile(`^--node \w+ $`).MatchString(args[3]) {
		t.Fatalf("%q: the test kills a node named as in pkill -KILL -f -- '--node NAME '", line)
	}
	w.waitRunning()
	// Between two runs, as the page's reader would: the node's last run
	// recorded, the next not begun. A node stopped (SIGSTOP) more than
	// 400ms before its next fire (its clock is at most 300ms ahead) has
	// not begun it; else it goes on, and the next fire is tried.
	deadline := time.Now().Add(time.Minute)
	for skip := 0; ; {
		fires := w.p.WaitFires(msgClosed, "", skip+1, time.Minute)
		skip = len(fires)
		last := w.p.Runs(msgClosed, fires[len(fires)-1])[fires[len(fires)-1]][0]
		fire := nodetest.ParseFire(t, last.Fire)
		w.waitRecorded(last, fire)
		w.p.Signal(last.Proc, syscall.SIGSTOP)
		if time.Until(fire.Add(time.Second)) > 400*time.Millisecond {
			w.p.Signal(last.Proc, syscall.SIGKILL)
			w.killed, w.killedLast, w.killedAt = last.Proc, last.Fire, time.Now()
			break
		}
		w.p.Signal(last.Proc, syscall.SIGCONT)
		if time.Now().After(deadline) {
			t.Fatal("no moment to kill the node between two runs within a minute")
		}
	}
	t.Logf("killed %s, which ran fire %s", w.killed, w.killedLast)
	w.p.WaitExit(w.killed, 10*time.Second)
}

// waitRecorded waits until the shared history, read through another
// node, has the run of fire that l logged.
func (w *walk) waitRecorded(l nodetest.Line, fire time.Time) {
	t := w.t
	var other string
	for _, n := range w.nodes {
		if n != l.Proc {
			other = w.nodeAddr[n]
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res struct{ Runs []runJSON }
		if err := json.Unmarshal([]byte(get(t, "http://"+other+"/scheduledtasks/"+closeBooks+"/runs")), &res); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Runs, func(r runJSON) bool { return r.Fire.Equal(fire) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of %s by %s is not in the history 30s on", fire, l.Proc)
		}
		time.Sleep(10 * time.Millisecond) // polls the history; no result depends on the delay
	}
}

// curl fetches the URL, mapped to the node's real address, and keeps the
// lines that match grep's pattern.
func (w *walk) curl(line string, args []string) {
	t := w.t
	if len(args) != 5 || args[0] != "-s" || args[2] != "|" || args[3] != "grep" {
		t.Fatalf("%q: the test runs curl -s URL | grep PATTERN", line)
	}
	host, path, _ := strings.Cut(args[1], "/")
	u := "http://" + w.real(line, host) + "/" + path
	pattern := regexp.MustCompile(args[4])
	if path == "metrics" && w.killed != "" {
		// The metric is the audit's, each node's at most a minute old.
		w.waitMetricIsAudit(u)
	}
	w.output = nil
	for _, l := range lines(get(t, u)) {
		if pattern.MatchString(l) {
			w.output = append(w.output, l)
		}
	}
}

// openConsole opens the console at the URL, mapped to the node's real
// address, in a headless chromium, and reads the audit it shows: the
// summary, the output compared with the page, and a row for each missed
// instant (the newest 50).
func (w *walk) openConsole(line string, args []string) {
	t := w.t
	if len(args) != 1 || !strings.Contains(args[0], "#task=") {
		t.Fatalf("%q: the test opens a task's page of the console, xdg-open http://ADDR/#task=NAME", line)
	}
	host, path, _ := strings.Cut(strings.TrimPrefix(args[0], "http://"), "/")
	addr := w.real(line, host)
	w.waitJudged(addr)
	missed := w.audit(addr).Missed
	page := browsertest.OpenConsole(t, browsertest.New(t), "http://"+addr+"/"+path)
	page.WaitFor("the audit's "+strconv.Itoa(missed)+" missed", `document.getElementById("audit-summary").innerText.includes(" `+strconv.Itoa(missed)+` missed")`)
	w.output = []string{browsertest.Eval[string](page, `document.getElementById("audit-summary").innerText`)}
	if rows := browsertest.Eval[int](page, `document.querySelectorAll("#audit tbody tr.audit-missed").length`); rows != min(missed, 50) {
		t.Errorf("the console lists %d missed instants; the audit has %d", rows, missed)
	}
	// Missed instants are red in the audit's strip and its rows, as the
	// page says, not pale.
	red := `getComputedStyle(document.documentElement).getPropertyValue("--bad").trim()`
	if got := browsertest.Eval[string](page, `(() => { const bad = `+red+`; const probe = document.createElement("span"); probe.style.color = bad;
		document.body.append(probe); const want = getComputedStyle(probe).color; probe.remove();
		const rects = [...document.querySelectorAll("#audit-strip svg rect.s-missed")];
		const cells = [...document.querySelectorAll("#audit tbody tr.audit-missed td:nth-child(2)")];
		return rects.length > 0 && rects.every(r => getComputedStyle(r).fill === want) && cells.every(c => getComputedStyle(c).color === want) ? "red" : "not red: " + rects.length + " squares" })()`); missed > 0 && got != "red" {
		t.Errorf("the missed instants in the console's audit are %s", got)
	}
}

// runPsql runs the page's query on the test's database.
func (w *walk) runPsql(line string, args []string) {
	t := w.t
	if w.psql == nil || len(args) != 3 || args[1] != "-c" {
		t.Fatalf("%q: the test runs psql URL -c QUERY on PostgreSQL", line)
	}
	w.p.WaitFires(msgClosed, "", 3, time.Minute)
	n, err := w.psql(args[2])
	if err != nil || n == 0 {
		t.Errorf("%q: %d rows, %v; want the payrolls closed", line, n, err)
	}
	w.output = nil
}

// auditJSON is the part of GET /scheduledtasks/{name}/audit the test reads.
type auditJSON struct {
	From   *time.Time `json:"from"`
	To     time.Time  `json:"to"`
	Missed int        `json:"missed"`
	Fires  []struct {
		Fire   time.Time `json:"fire"`
		Status string    `json:"status"`
	} `json:"fires"`
}

func (w *walk) audit(addr string) auditJSON {
	var a auditJSON
	if err := json.Unmarshal([]byte(get(w.t, "http://"+addr+"/scheduledtasks/"+closeBooks+"/audit")), &a); err != nil {
		w.t.Fatal(err)
	}
	return a
}

// recovered returns the first fire that a survivor ran after the kill,
// waiting for it.
func (w *walk) recovered() time.Time {
	l, _ := w.p.WaitLine("a run on a survivor after the kill", 0, 2*time.Minute, func(l nodetest.Line) bool {
		return l.Msg == msgClosed && l.Proc != w.killed && l.At.After(w.killedAt) && l.Fire > w.killedLast
	})
	return nodetest.ParseFire(w.t, l.Fire)
}

// waitJudged waits until the audit of the node at addr judges the first
// fire run after the kill, and so every instant the kill cost: the lease,
// and the audit's horizon (the lease and a minute) after it.
func (w *walk) waitJudged(addr string) {
	t := w.t
	back := w.recovered()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		a := w.audit(addr)
		if !a.To.Before(back) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit of %s judges up to %s, 4 minutes on still before %s, the first run after the kill", addr, a.To, back)
		}
		time.Sleep(time.Second)
	}
}

// waitMetricIsAudit waits until the metrics at u show the audit's missed
// count of the task: the collector audits each task at most once a minute.
func (w *walk) waitMetricIsAudit(u string) {
	t := w.t
	deadline := time.Now().Add(3 * time.Minute)
	re := regexp.MustCompile(`(?m)^ndigo_task_missed_fires\{task="` + regexp.QuoteMeta(closeBooks) + `"\} (\d+)$`)
	for {
		want := w.audit(strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/metrics")).Missed
		scrape := get(t, u)
		if !strings.Contains(scrape, "\nndigo_task_missed_fires{") {
			t.Fatalf("%s has no ndigo_task_missed_fires", u)
		}
		m := re.FindStringSubmatch(scrape)
		if m != nil && m[1] == strconv.Itoa(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ndigo_task_missed_fires at %s: %q, the audit's missed count %d", u, m, want)
		}
		time.Sleep(2 * time.Second)
	}
}

// runJSON is the part of a run of GET /scheduledtasks/{name}/runs the test
// reads.
type runJSON struct {
	Fire            time.Time  `json:"fire"`
	Manual          bool       `json:"manual"`
	Node            string     `json:"node"`
	Outcome         string     `json:"outcome"`
	Start           *time.Time `json:"start"`
	DurationSeconds float64    `json:"durationSeconds"`
}

// checkAfterTheKill checks what the page says of the survivors: the lines
// they log, that a survivor's audit covers the kill, that its missed count
// is the instants of the schedule that no record covers, and that the
// metric and OPERATIONS.md's alerts say so.
func (w *walk) checkAfterTheKill() {
	t := w.t
	addr := w.survivorAddr()
	back := w.recovered()
	w.waitJudged(addr)
	a := w.audit(addr)
	var res struct{ Runs []runJSON }
	if err := json.Unmarshal([]byte(get(t, "http://"+addr+"/scheduledtasks/"+closeBooks+"/runs")), &res); err != nil {
		t.Fatal(err)
	}
	last := nodetest.ParseFire(t, w.killedLast)
	if a.From == nil || a.From.After(last) || a.To.Before(back) {
		t.Fatalf("the audit covers %v to %s; want the kill: %s (the killed node's last run) to %s (the first after)", a.From, a.To, last, back)
	}

	recorded := map[int64]bool{} // by fire, in ms
	var spans [][2]time.Time     // the recorded runs' starts and ends
	for _, r := range res.Runs {
		if !r.Manual {
			recorded[r.Fire.UnixMilli()] = true
		}
		if r.Start != nil {
			spans = append(spans, [2]time.Time{*r.Start, r.Start.Add(time.Duration(r.DurationSeconds * float64(time.Second)))})
		}
	}
	// A fire due while a recorded run was going is skipped as still running
	// (the task's default overlap): on a loaded machine a run can outlast
	// the 1 s period.
	going := func(at time.Time) bool {
		return slices.ContainsFunc(spans, func(s [2]time.Time) bool { return s[0].Before(at) && s[1].After(at) })
	}
	logged := w.p.Runs(msgClosed, "")
	var uncovered []time.Time
	for at := *a.From; !at.After(a.To); at = at.Add(time.Second) {
		if recorded[at.UnixMilli()] || going(at) {
			continue
		}
		uncovered = append(uncovered, at)
		// The run the node was in may be logged and never recorded.
		if runs := logged[nodetest.FireString(at)]; len(runs) > 0 && !(runs[0].Proc == w.killed && !at.Before(last)) {
			t.Errorf("fire %s: logged as run by %s, and missing from the history", at, runs[0].Proc)
		}
		if at.Before(last) || !at.Before(back) {
			t.Errorf("fire %s ran nowhere, outside the kill (%s to %s)", at, last, back)
		}
	}
	var missed []time.Time
	for _, f := range a.Fires {
		if f.Status == "missed" {
			missed = append(missed, f.Fire)
		}
	}
	slices.Reverse(missed)
	t.Logf("the audit of %s: %d missed from %s to %s; the first run after the kill at %s", addr, a.Missed, a.From, a.To, back)
	if a.Missed != len(uncovered) || !slices.Equal(missed, uncovered) {
		t.Errorf("the audit finds %d missed (%v); the instants no record covers, from %s to %s: %v", a.Missed, missed, a.From, a.To, uncovered)
	}
	if a.Missed != 0 {
		t.Errorf("the audit finds %d missed; the page promises none: the fires the killed node left run late", a.Missed)
	}

	w.checkLogsAfterTheKill()
	u := "http://" + addr + "/metrics"
	w.waitMetricIsAudit(u)
	checkAlerts(t, get(t, u), map[string]bool{"NdigoMissedFires": false, "NdigoAuditDown": false})
}

// checkLogsAfterTheKill checks the lines the page says the survivors log
// after the kill: a membership change; the node that runs the task next
// takes it over, and is the only one to find its lock held, at fires
// within the killed node's lease (30s from the kill, and a little more for
// the store to expire it).
func (w *walk) checkLogsAfterTheKill() {
	t := w.t
	sec := pageSection(t, readPage(t, "CLUSTER.md"), "### Three nodes on a local Redis")
	for _, m := range []string{msgJoined, msgClosed, msgTakesOver, msgLate} {
		if !strings.Contains(sec, "`"+m+"`") {
			t.Errorf("CLUSTER.md's walk-through no longer quotes `%s`, which the test checks", m)
		}
	}
	after := func(l nodetest.Line) bool { return l.At.After(w.killedAt) && l.Proc != w.killed }
	w.p.WaitLine(msgJoined+" without "+w.killed, 0, time.Minute, func(l nodetest.Line) bool { return after(l) && l.Msg == msgJoined })
	runner, _ := w.p.WaitLine("a run after the kill", 0, time.Minute, func(l nodetest.Line) bool {
		return after(l) && l.Msg == msgClosed && l.Fire > w.killedLast
	})
	w.p.WaitLine(runner.Proc+"'s "+msgTakesOver, 0, time.Minute, func(l nodetest.Line) bool {
		return after(l) && l.Proc == runner.Proc && l.Msg == msgTakesOver
	})
	w.p.WaitLine(runner.Proc+"'s "+msgLate, 0, time.Minute, func(l nodetest.Line) bool {
		return after(l) && l.Proc == runner.Proc && l.Msg == msgLate && l.Fire > w.killedLast
	})
}

// checkAlerts evaluates the shipped alert rules named in want (ndigo-rules.yml,
// which OPERATIONS.md shows) on a scrape of /metrics, and fails t unless
// each fires as want says. A rule named there must be one metric compared
// with a number; TestAlertRules checks every rule with promtool.
func checkAlerts(t *testing.T, scrape string, want map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			w, ok := want[r.Alert]
			if !ok {
				continue
			}
			seen[r.Alert] = true
			e := regexp.MustCompile(`^(\w+) (>|==) (\d+)$`).FindStringSubmatch(strings.TrimSpace(r.Expr))
			if e == nil {
				t.Errorf("alert %s: expr %q is not METRIC > N or METRIC == N", r.Alert, r.Expr)
				continue
			}
			fires, found := false, false
			for _, s := range regexp.MustCompile(`(?m)^`+e[1]+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(scrape, -1) {
				found = true
				v, _ := strconv.ParseFloat(s[1], 64)
				n, _ := strconv.ParseFloat(e[3], 64)
				fires = fires || (e[2] == ">" && v > n) || (e[2] == "==" && v == n)
			}
			if !found {
				t.Errorf("alert %s: no %s in /metrics", r.Alert, e[1])
			}
			if w != fires {
				t.Errorf("alert %s (%s) fires: %v, want %v", r.Alert, r.Expr, fires, w)
			}
		}
	}
	for a := range want {
		if !seen[a] {
			t.Errorf("%s has no alert %s", rulesFile, a)
		}
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s, %v", u, resp.Status, b, err)
	}
	return string(b)
}

// ndigoBuild is the CLI built once per test process.
var ndigoBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildNdigo builds cmd/ndigo once per test process and returns the
// binary's path; TestMain removes it.
func buildNdigo(t *testing.T) string {
	t.Helper()
	b := &ndigoBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "ndigo-cli-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "ndigo")
		if out, err := exec.Command("go", "build", "-o", b.bin, "github.com/ndigo/ndigo/cmd/ndigo").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build cmd/ndigo: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}
