package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/internal/admintest"
)

// httptestJSON serves body as JSON at every path.
func httptestJSON(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Names travel path-escaped, so that the server's {name} is the whole name.
func TestNamesAreEscaped(t *testing.T) {
	c, srv := serve(t, testToken)
	env := map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	for _, tc := range []struct{ name, path string }{
		{"Payroll.Close", "/scheduledtasks/Payroll.Close/pause"},
		{"reports daily", "/scheduledtasks/reports%20daily/pause"},
		{"billing/export", "/scheduledtasks/billing%2Fexport/pause"},
	} {
		if res := ndigo(t, env, "pause", tc.name); res.code != 0 {
			t.Fatalf("pause %q: exit %d: %s", tc.name, res.code, res.stderr)
		}
		reqs := c.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != tc.path || last.Task != tc.name {
			t.Errorf("pause %q: sent %s, the server read %q; want %s", tc.name, last.Path, last.Task, tc.path)
		}
		if task, _ := c.Task(tc.name); !task.Paused {
			t.Errorf("pause %q: the task is not paused", tc.name)
		}
		if res := ndigo(t, env, "runs", tc.name); res.code != 0 {
			t.Errorf("runs %q: exit %d: %s", tc.name, res.code, res.stderr)
		}
	}
	// After "--" a name that starts with a dash is not a flag.
	if res := ndigo(t, env, "pause", "--", "-dash"); res.code != 0 {
		t.Fatalf("pause -- -dash: exit %d: %s", res.code, res.stderr)
	}
	if task, _ := c.Task("-dash"); !task.Paused {
		t.Error("pause -- -dash: the task is not paused")
	}
}

// The token goes with run, pause and resume, and never with a GET.
func TestTokenOnMutationsOnly(t *testing.T) {
	c, srv := serve(t, testToken)
	env := map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	for _, args := range [][]string{{"tasks"}, {"runs", "Payroll.Close"}, {"run", "Payroll.Close"},
		{"pause", "Payroll.Close"}, {"resume", "Payroll.Close"}} {
		if res := ndigo(t, env, args...); res.code != 0 {
			t.Fatalf("%q: exit %d: %s", args, res.code, res.stderr)
		}
	}
	reqs := c.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		want := ""
		if r.Method == http.MethodPost {
			want = "Bearer " + testToken
		}
		if r.Authorization != want {
			t.Errorf("%s %s: Authorization %q, want %q", r.Method, r.Path, r.Authorization, want)
		}
	}
}

func TestRefusals(t *testing.T) {
	_, withToken := serve(t, testToken)
	_, noToken := serve(t, "")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	old := httptest.NewServer(http.NotFoundHandler()) // a handler without the control API
	t.Cleanup(old.Close)
	for _, tc := range []struct {
		name  string
		admin string
		token string
		args  []string
		want  []string // in stderr
	}{
		{"no token", withToken.URL, "", []string{"pause", "Payroll.Close"},
			[]string{"401 Unauthorized: " + admintest.WrongTokenMessage + " (set NDIGO_ADMIN_TOKEN"}},
		{"wrong token", withToken.URL, "guess-" + testToken, []string{"run", "Payroll.Close"},
			[]string{"401 Unauthorized: " + admintest.WrongTokenMessage + " (the node refused the token in NDIGO_ADMIN_TOKEN)"}},
		{"no token configured", noToken.URL, testToken, []string{"resume", "Payroll.Close"},
			[]string{"403 Forbidden: " + admintest.NoTokenMessage, "the node has no admin token configured"}},
		{"unknown task", withToken.URL, testToken, []string{"pause", "Payroll.Open"},
			[]string{"404 Not Found: unknown task \"Payroll.Open\""}},
		{"unknown task's runs", withToken.URL, "", []string{"runs", "Payroll.Open"},
			[]string{"GET " + withToken.URL + "/scheduledtasks/Payroll.Open/runs: 404 Not Found: unknown task"}},
		{"connection refused", closed.URL, "", []string{"tasks"},
			[]string{"cannot reach the admin endpoints at " + closed.URL + ": connection refused", "--admin or NDIGO_ADMIN"}},
		{"no control API", old.URL, testToken, []string{"pause", "Payroll.Close"},
			[]string{"404 Not Found: 404 page not found (the node serves no such endpoint: is its ndigo a version without the control API?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ndigo(t, map[string]string{"NDIGO_ADMIN_TOKEN": tc.token}, append([]string{"--admin", tc.admin}, tc.args...)...)
			if res.code != exitFailure || res.stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", res.code, res.stdout, exitFailure)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q does not say %q", res.stderr, w)
				}
			}
			if strings.Contains(res.stderr, testToken) {
				t.Errorf("stderr shows the token: %q", res.stderr)
			}
		})
	}
}

// --json prints the server's body as it came.
func TestJSON(t *testing.T) {
	_, srv := serve(t, testToken)
	env := map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	for _, tc := range []struct {
		args   []string
		method string
		path   string
	}{
		{[]string{"--json", "tasks"}, http.MethodGet, "/scheduledtasks"},
		{[]string{"runs", "Payroll.Close", "--json"}, http.MethodGet, "/scheduledtasks/Payroll.Close/runs"},
		{[]string{"pause", "--json", "billing/export"}, http.MethodPost, "/scheduledtasks/billing%2Fexport/pause"},
	} {
		res := ndigo(t, env, tc.args...)
		if res.code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, res.code, res.stderr)
		}
		want := fetch(t, tc.method, srv.URL+tc.path, testToken)
		if !bytes.Equal([]byte(res.stdout), want) {
			t.Errorf("%q printed\n%s\nthe server answers\n%s", tc.args, res.stdout, want)
		}
		var v any
		if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
			t.Errorf("%q: not JSON: %v", tc.args, err)
		}
	}
}

func TestAdminAddress(t *testing.T) {
	_, srv := serve(t, testToken)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", admintest.NewCluster(testToken, fixtureTasks()...).Node("a")))
	prefixed := httptest.NewServer(mux)
	t.Cleanup(prefixed.Close)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"env", map[string]string{"NDIGO_ADMIN": srv.URL}, []string{"tasks"}},
		{"flag over env", map[string]string{"NDIGO_ADMIN": closed.URL}, []string{"--admin", srv.URL, "tasks"}},
		{"host:port", nil, []string{"--admin", strings.TrimPrefix(srv.URL, "http://"), "tasks"}},
		{"path prefix", nil, []string{"--admin", prefixed.URL + "/ops/", "runs", "billing/export"}},
	} {
		if res := ndigo(t, tc.env, tc.args...); res.code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, res.code, res.stderr)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"tasks", "-h"}} {
		res := ndigo(t, nil, args...)
		if res.code != 0 || !strings.HasPrefix(res.stdout, "Usage: ndigo") || res.stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "ndigo: no command given"},
		{nil, []string{"list"}, `ndigo: unknown command "list": the commands are tasks, runs, audit, next, run, pause, resume, backfill, schedules, schedule create, schedule update, schedule delete, ` +
			`calendars, calendar create, calendar update, calendar delete, events and help`},
		{nil, []string{"runs"}, "ndigo: runs takes one argument, the task's name, got 0"},
		{nil, []string{"tasks", "Payroll.Close"}, "ndigo: tasks takes no argument, got 1"},
		{nil, []string{"pause", ""}, "ndigo: pause: the task name is empty"},
		{nil, []string{"--verbose", "tasks"}, "ndigo: flag provided but not defined: -verbose"},
		{nil, []string{"--timeout", "0s", "tasks"}, "ndigo: --timeout 0s: must be positive"},
		{nil, []string{"--admin", "ftp://node:8081", "tasks"}, `ndigo: --admin "ftp://node:8081": must be an http:// or https:// URL`},
		{map[string]string{"NDIGO_ADMIN": "http://"}, []string{"tasks"}, `ndigo: NDIGO_ADMIN "http://": must be an http:// or https:// URL`},
	} {
		res := ndigo(t, tc.env, tc.args...)
		if res.code != exitUsage || !strings.HasPrefix(res.stderr, tc.want) || !strings.HasSuffix(res.stderr, "\n"+usageHint+"\n") || strings.Count(res.stderr, "\n") != 2 {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q, then the usage", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

// The commands table and the usage text name the same commands.
func TestUsageNamesEveryCommand(t *testing.T) {
	for name := range commands {
		if !strings.Contains(usage, "\n  "+name+" ") {
			t.Errorf("the usage does not describe %q", name)
		}
		if !strings.Contains(unknownCommand, " "+name+",") && !strings.Contains(unknownCommand, " "+name+" ") {
			t.Errorf("the unknown-command message does not name %q", name)
		}
	}
}
