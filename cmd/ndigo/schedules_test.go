package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// scheduleNode is a real admin handler with the token testToken on a real
// scheduler, node-a on a fake clock at epoch, with the code task "nightly"
// and the handler "tenant-report" registered, and every request's method,
// path and Authorization header as the server got them.
type scheduleNode struct {
	*fakenode.Node
	store taskstate.Store
	url   string
	env   map[string]string // NDIGO_ADMIN and NDIGO_ADMIN_TOKEN

	mu   sync.Mutex // protects seen
	seen []string   // "METHOD escaped-path Authorization"
}

func startScheduleNode(t *testing.T, token admin.Token) *scheduleNode {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	n := &scheduleNode{Node: fakenode.New(t, clockwork.NewFakeClockAt(epoch), scheduling.Config{Node: "node-a", State: store}), store: store}
	n.Start(t, scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@daily"), scheduling.Lock("k"), scheduling.Name("nightly")))
	if err := n.S.Handle("tenant-report", func(context.Context, json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	h, err := admin.New(admin.Options{Scheduler: n.S, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, strings.TrimSpace(r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Authorization")))
		n.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	n.url = srv.URL
	n.env = map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	return n
}

// stored returns the store's schedules by name.
func (n *scheduleNode) stored(t *testing.T) map[string]taskstate.Schedule {
	t.Helper()
	scs, err := n.store.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]taskstate.Schedule{}
	for _, sc := range scs {
		out[sc.Name] = sc
	}
	return out
}

// requests returns the requests seen since the last call.
func (n *scheduleNode) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.seen
	n.seen = nil
	return out
}

// taskHandlers returns the node's tasks, each with its stored schedule's
// handler ("" for one declared in code).
func taskHandlers(s *scheduling.Scheduler) map[string]string {
	out := map[string]string{}
	for _, ti := range s.Tasks() {
		out[ti.Name] = ""
		if ti.Schedule != nil {
			out[ti.Name] = ti.Schedule.Handler
		}
	}
	return out
}

// create, list, update and delete a stored schedule through the CLI: each
// says in one line what it did and when the nodes take it up; the list
// shows the options sorted, the arguments compact and cut, and a schedule
// the node cannot run with its problem, warned of on stderr; the tasks
// table marks the task that runs a stored schedule with its handler. The
// token goes with the changes only.
func TestScheduleCommands(t *testing.T) {
	n := startScheduleNode(t, testToken)
	if res := ndigo(t, n.env, "schedules"); res.code != 0 || res.stdout != "no stored schedules\n" || res.stderr != "" {
		t.Fatalf("schedules with none: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	res := ndigo(t, n.env, "schedule", "create", "report-acme", "--handler", "tenant-report", "--cron", "0 2 * * *", "--lock", "report:acme",
		"--option", "overlap=skip", "--option", "lockTtl=5m", "--args", `{"tenant": "acme", "regions": ["eu-west-1", "us-east-1", "ap-south-1"]}`)
	want := `schedule "report-acme" created (handler "tenant-report", cron "0 2 * * *", lock "report:acme", options lockTtl=5m,overlap=skip): ` +
		"it runs from its next fire, on node-a now and on the other nodes from their next poll, within about a second\n"
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Fatalf("schedule create: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	sc := n.stored(t)["report-acme"]
	if sc.Handler != "tenant-report" || sc.Cron != "0 2 * * *" || sc.Lock != "report:acme" || !sameMap(sc.Options, map[string]string{"lockTtl": "5m", "overlap": "skip"}) ||
		string(sc.Args) != `{"tenant":"acme","regions":["eu-west-1","us-east-1","ap-south-1"]}` || sc.Node != "node-a" {
		t.Errorf("stored %+v; want the schedule as given, its args compacted, by node-a", sc)
	}
	if got := taskHandlers(n.S); got["report-acme"] != "tenant-report" {
		t.Errorf("the node's tasks %q: want report-acme run by tenant-report at once", got)
	}

	// Another build's schedule: this node lacks its handler.
	if err := n.store.CreateSchedule(context.Background(), taskstate.Schedule{Name: "export-acme", Handler: "tenant-export", Cron: "@hourly",
		Node: "node-b", Updated: epoch}); err != nil {
		t.Fatal(err)
	}
	res = ndigo(t, n.env, "schedules")
	if res.code != 0 {
		t.Fatalf("schedules: exit %d: %s", res.code, res.stderr)
	}
	rs := rows(t, res.stdout)
	for i, want := range [][]string{
		{"NAME", "HANDLER", "CRON", "LOCK", "OPTIONS", "ARGS", "UPDATED", "BY", "PROBLEM HERE"},
		{"export-acme", "tenant-export", "@hourly", "-", "-", "-", "2026-01-01T00:00:00Z", "node-b",
			`scheduling: unknown handler: schedule "export-acme" names handler "tenant-export", which this node has not registered (Scheduler.Handle)`},
		{"report-acme", "tenant-report", "0 2 * * *", "report:acme", "lockTtl=5m,overlap=skip", `{"tenant":"acme","regions":["eu-west-...`,
			"2026-01-01T00:00:00Z", "node-a", "-"},
	} {
		if i >= len(rs) || !slices.Equal(rs[i], want) {
			t.Errorf("schedules line %d: %q, want %q\n%s", i, rs[min(i, len(rs)-1)], want, res.stdout)
		}
	}
	if len(rs) != 3 {
		t.Errorf("schedules: %d lines, want a header and 2 schedules:\n%s", len(rs), res.stdout)
	}
	if want := `ndigo: warning: node-a does not run 1 of the 2 stored schedules ("export-acme"): PROBLEM HERE says why` + "\n"; res.stderr != want {
		t.Errorf("schedules: stderr %q, want %q", res.stderr, want)
	}
	res = ndigo(t, n.env, "--json", "schedules")
	if body := fetch(t, http.MethodGet, n.url+"/schedules", ""); res.code != 0 || !bytes.Equal([]byte(res.stdout), body) || res.stderr != "" {
		t.Errorf("--json schedules: exit %d, stderr %q, printed\n%s\nthe node answers\n%s", res.code, res.stderr, res.stdout, body)
	}

	rs = rows(t, ndigo(t, n.env, "tasks").stdout)
	if h := slices.Index(rs[0], "HANDLER"); h != 15 || row(t, rs, "report-acme")[h] != "tenant-report" || row(t, rs, "nightly")[h] != "-" {
		t.Errorf("tasks: %q; want HANDLER last, tenant-report for report-acme, - for nightly (declared in code)", rs)
	}

	// An update changes what its flags give and keeps the rest: a cron
	// alone keeps the lock (before, it dropped it, and every node then ran
	// each fire), the options and the arguments.
	res = ndigo(t, n.env, "schedule", "update", "report-acme", "--cron", "0 3 * * *")
	sc = n.stored(t)["report-acme"]
	want = `schedule "report-acme" updated (handler "tenant-report", cron "0 3 * * *", lock "report:acme", options lockTtl=5m,overlap=skip): ` +
		"every node runs it from " + sc.From.UTC().Format(time.RFC3339Nano) + " on, the old spec's fires before; a run of the old in flight finishes\n"
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Fatalf("schedule update: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	if sc.Cron != "0 3 * * *" || sc.Handler != "tenant-report" || sc.Lock != "report:acme" || !sameMap(sc.Options, map[string]string{"lockTtl": "5m", "overlap": "skip"}) ||
		string(sc.Args) != `{"tenant":"acme","regions":["eu-west-1","us-east-1","ap-south-1"]}` || !sc.From.After(sc.Updated) {
		t.Errorf("stored after the update %+v; want the new cron, the rest kept, in force after the change", sc)
	}
	// --unlocked drops the lock; --option KEY= drops an option, KEY=VALUE sets one.
	res = ndigo(t, n.env, "--json", "schedule", "update", "report-acme", "--unlocked", "--option", "lockTtl=", "--option", "overlap=", "--option", "jitter=1m", "--args", "[1, 2]")
	var got schedule
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.code != 0 || got.Cron != "0 3 * * *" || got.Lock != "" ||
		!sameMap(got.Options, map[string]string{"jitter": "1m"}) || argsCell(got.Args) != "[1,2]" {
		t.Errorf("--json schedule update --unlocked: exit %d, stdout %q, stderr %q (%v); want unlocked, jitter=1m alone, args [1,2]", res.code, res.stdout, res.stderr, err)
	}

	res = ndigo(t, n.env, "schedule", "delete", "report-acme")
	want = `schedule "report-acme" deleted: the node answering fires it no more, the other nodes from their next poll, within about a second; a run of it in flight finishes` + "\n"
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Fatalf("schedule delete: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	if _, ok := n.stored(t)["report-acme"]; ok {
		t.Error("report-acme is stored after its delete")
	}
	if got := taskHandlers(n.S); len(got) != 1 || got["nightly"] != "" {
		t.Errorf("the node's tasks after the delete %q, want nightly alone", got)
	}

	for _, r := range n.requests() {
		method, _, _ := strings.Cut(r, " ")
		if auth := strings.HasSuffix(r, " Bearer "+testToken); auth != (method != http.MethodGet) {
			t.Errorf("request %q: want the token with a change only", r)
		}
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Malformed flags are usage errors (exit 2) that name the flag, the value
// and the rule, and send nothing; what only the node checks fails with
// its message as it came (exit 1), the token missing or refused with what
// to do about it.
func TestScheduleRefusals(t *testing.T) {
	n := startScheduleNode(t, testToken)
	create := []string{"schedule", "create", "report-acme", "--handler", "tenant-report", "--cron", "@daily"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(create, "--option", "lockTtl"), `ndigo: schedule create: --option "lockTtl": must be KEY=VALUE, a key of the Scheduled tag's, such as --option lockTtl=5m`},
		{append(create, "--option", "=5m"), `ndigo: schedule create: --option "=5m": the key before '=' is empty`},
		{append(create, "--option", "lockTtl=5m", "--option", "lockTtl=10m"), `ndigo: schedule create: --option "lockTtl=10m": lockTtl is given twice (lockTtl=5m before)`},
		{append(create, "--args", "{tenant: acme}"), `ndigo: schedule create: --args "{tenant: acme}": must be one JSON value, such as --args '{"tenant": "acme"}'`},
		{append(create, "--args", ""), `ndigo: schedule create: --args "": must be one JSON value`},
		{[]string{"schedule", "update", "report-acme"}, "ndigo: schedule update: nothing to change: give --handler, --cron, --lock or --unlocked, --option or --args"},
		{[]string{"schedule", "update", "report-acme", "--lock", "k", "--unlocked"}, "ndigo: schedule update: --lock and --unlocked: give one"},
		{[]string{"schedule", "update", "report-acme", "--lock", ""}, "ndigo: schedule update: --lock is empty: give a key, or --unlocked"},
		{[]string{"schedule", "update", "report-acme", "--cron", ""}, "ndigo: schedule update: --cron is empty"},
		{append(create, "--unlocked"), "ndigo: --unlocked is a flag of schedule update, not of schedule create"},
		{[]string{"schedule", "create", "report-acme", "--handler", "tenant-report"}, `ndigo: schedule create: --cron is required: the cron expression, such as "0 2 * * *"`},
		{[]string{"schedule", "create", "--handler", "tenant-report", "--cron", "@daily"}, "ndigo: schedule create takes one argument, the schedule's name, got 0"},
		{[]string{"schedule", "delete", ""}, "ndigo: schedule delete: the schedule name is empty"},
		{[]string{"schedule", "delete", ".."}, `ndigo: schedule delete: the name ".." cannot be a stored schedule's: /schedules/.. is a dot segment`},
		{[]string{"schedule", "create", ".", "--handler", "tenant-report", "--cron", "@daily"}, `ndigo: schedule create: the name "." cannot be a stored schedule's`},
		{[]string{"schedule"}, "ndigo: schedule takes a verb, create, update or delete, and the schedule's name"},
		{[]string{"schedule", "rename", "report-acme"}, `ndigo: unknown command "schedule rename": the verbs of schedule are create, update or delete`},
		{[]string{"schedule", "delete", "report-acme", "--cron", "@daily"}, "ndigo: --cron is a flag of calendar create, calendar update, schedule create and schedule update, not of schedule delete"},
		{append(create, "--cron", "@hourly"), "ndigo: schedule create: --cron is given 2 times (@daily, @hourly): a schedule has one cron expression"},
		{append(create, "--weekday", "sat"), "ndigo: --weekday is a flag of calendar create and calendar update, not of schedule create"},
		{[]string{"schedules", "--option", "a=b"}, "ndigo: --option is a flag of schedule create and schedule update, not of schedules"},
		{append(create, "--from", "2026-01-01T00:00:00Z"), "ndigo: --from is a flag of backfill, not of schedule create"},
		{[]string{"schedules", "report-acme"}, "ndigo: schedules takes no argument, got 1"},
	} {
		res := ndigo(t, n.env, c.args...)
		if res.code != exitUsage || !strings.HasPrefix(res.stderr, c.want) || !strings.HasSuffix(res.stderr, "\n"+usageHint+"\n") || strings.Count(res.stderr, "\n") != 2 {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q, then the usage", c.args, res.code, res.stderr, exitUsage, c.want)
		}
	}
	if got := n.requests(); len(got) != 0 {
		t.Errorf("usage errors sent %q", got)
	}

	if res := ndigo(t, n.env, create...); res.code != 0 {
		t.Fatalf("schedule create: exit %d: %s", res.code, res.stderr)
	}
	noToken := map[string]string{"NDIGO_ADMIN": n.url}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{n.env, []string{"schedule", "create", "x", "--handler", "tenant-report", "--cron", "@daily", "--lock", "k2", "--option", "lockTtl=-1s"},
			"POST " + n.url + "/schedules: 400 Bad Request: scheduling: invalid task spec: 1 problem\n\ttask \"x\": option lockTtl = \"-1s\": must be positive\n"},
		{n.env, []string{"schedule", "create", "x", "--handler", "tenant-report", "--cron", "@daily", "--option", "jiter=5s"},
			`task "x": option jiter = "5s": unknown key; did you mean "jitter"?`},
		{n.env, []string{"schedule", "create", "x", "--handler", "tenant-report", "--cron", "every 5m"}, `400 Bad Request: `},
		{n.env, []string{"schedule", "create", "x", "--handler", "export", "--cron", "@daily"},
			`400 Bad Request: scheduling: unknown handler: schedule "x" names handler "export", which this node has not registered (Scheduler.Handle)`},
		{n.env, create, `409 Conflict: taskstate: a schedule of that name exists`},
		{n.env, []string{"schedule", "create", "nightly", "--handler", "tenant-report", "--cron", "@daily"}, `409 Conflict: scheduling: the task is declared in code`},
		{n.env, []string{"schedule", "update", "report-beta", "--handler", "tenant-report", "--cron", "@daily"},
			`schedule update: no stored schedule is named "report-beta" (ndigo schedules lists them): create it first`},
		{n.env, []string{"schedule", "delete", "report-beta"}, "DELETE " + n.url + `/schedules/report-beta: 404 Not Found: scheduling: unknown schedule: "report-beta"`},
		{n.env, []string{"schedule", "delete", "nightly"}, `409 Conflict: scheduling: the task is declared in code: task "nightly" cannot be deleted at runtime: remove it from the code and deploy`},
		{noToken, []string{"schedule", "delete", "report-acme"}, "401 Unauthorized: " + admintest.WrongTokenMessage + " (set NDIGO_ADMIN_TOKEN to the node's admin token)"},
		{noToken, create, "401 Unauthorized"},
		{map[string]string{"NDIGO_ADMIN": n.url, "NDIGO_ADMIN_TOKEN": "guess"}, []string{"schedule", "update", "report-acme", "--handler", "tenant-report", "--cron", "@daily"},
			"401 Unauthorized: " + admintest.WrongTokenMessage + " (the node refused the token in NDIGO_ADMIN_TOKEN)"},
	} {
		res := ndigo(t, c.env, c.args...)
		if res.code != exitFailure || res.stdout != "" || !strings.Contains(res.stderr, c.want) || strings.Contains(res.stderr, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and %q", c.args, res.code, res.stdout, res.stderr, exitFailure, c.want)
		}
	}
	if sc := n.stored(t); len(sc) != 1 || sc["report-acme"].Cron != "@daily" {
		t.Errorf("stored after the refusals %+v; want report-acme as created", sc)
	}

	// A node without an admin token refuses every change; one that
	// predates stored schedules serves no such endpoint.
	locked := startScheduleNode(t, "")
	if res := ndigo(t, map[string]string{"NDIGO_ADMIN": locked.url, "NDIGO_ADMIN_TOKEN": testToken}, create...); res.code != exitFailure ||
		!strings.Contains(res.stderr, "403 Forbidden") || !strings.Contains(res.stderr, "the node has no admin token configured, so it refuses every change") {
		t.Errorf("create on a node without a token: exit %d, stderr %q; want the 403", res.code, res.stderr)
	}
	old := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(old.Close)
	for _, args := range [][]string{{"schedules"}, {"schedule", "delete", "report-acme"}} {
		res := ndigo(t, map[string]string{"NDIGO_ADMIN": old.URL, "NDIGO_ADMIN_TOKEN": testToken}, args...)
		if res.code != exitFailure || !strings.Contains(res.stderr, "404 Not Found: 404 page not found (the node serves no such endpoint: is its ndigo a version without stored schedules?)") {
			t.Errorf("%q on a node without stored schedules: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}
}

// The ARGS cell: compact JSON, cut at argsWidth characters (not bytes),
// none for null or none.
func TestArgsCell(t *testing.T) {
	long := `{"city": "Zürich", "tenants": ["acme", "globex", "initech", "umbrella"]}`
	for _, c := range []struct{ in, want string }{
		{"", "-"},
		{"null", "-"},
		{" null ", "-"},
		{`{ "tenant" : "acme" }`, `{"tenant":"acme"}`},
		{"\"tab\\there\"", `"tab\there"`},
		{long, `{"city":"Zürich","tenants":["acme","g...`},
	} {
		if got := argsCell(json.RawMessage(c.in)); got != c.want {
			t.Errorf("argsCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
