package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rows splits a table into its lines' cells: columns are two or more
// spaces apart, and no cell holds two spaces in a row.
func rows(t *testing.T, table string) [][]string {
	t.Helper()
	var out [][]string
	for line := range strings.Lines(strings.TrimRight(table, "\n")) {
		out = append(out, regexp.MustCompile(` {2,}`).Split(strings.TrimRight(line, " \n"), -1))
	}
	return out
}

// row returns the row whose first cell is first.
func row(t *testing.T, rs [][]string, first string) []string {
	t.Helper()
	for _, r := range rs {
		if r[0] == first {
			return r
		}
	}
	t.Fatalf("no row %q in %q", first, rs)
	return nil
}

func TestTasksTable(t *testing.T) {
	_, srv := serve(t, testToken)
	res := ndigo(t, nil, "--admin", srv.URL, "tasks")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	rs := rows(t, res.stdout)
	if want := []string{"NAME", "CRON", "LOCK", "NEXT", "PAUSED", "HEALTH", "LAST FIRE (CLUSTER)", "OUTCOME", "ATTEMPT", "NODE", "TOKEN", "LAST FIRE HERE", "RETRY DUE", "FAILURES HERE", "BACKFILL", "HANDLER"}; !slices.Equal(rs[0], want) {
		t.Fatalf("header %q, want %q", rs[0], want)
	}
	for _, want := range [][]string{
		// The cluster's last run is node b's, though this is node a, whose
		// own last fire is its manual run's error.
		// A node that does not report attempts: none.
		{"Payroll.Close", "@every 1s", "payroll-window", "2026-01-01T00:00:01Z", "no", "ok", "2026-01-01T00:00:00Z", "ok", "-", "b", "7", "error", "-", "0", "-", "-"},
		{"reports daily", "0 2 * * *", "-", "-", "no", "ok", "-", "-", "-", "-", "-", "-", "-", "0", "-", "-"},
		{"billing/export", "@hourly", "export", "-", "yes", "paused", "-", "-", "-", "-", "-", "-", "-", "0", "-", "-"},
	} {
		if got := row(t, rs, want[0]); !slices.Equal(got, want) {
			t.Errorf("row %q, want %q", got, want)
		}
	}
	if len(rs) != 5 {
		t.Errorf("%d lines, want a header and 4 tasks:\n%s", len(rs), res.stdout)
	}
}

// A handler without the control API has no paused field: the table says
// so instead of "no".
func TestTasksTablePausedUnknown(t *testing.T) {
	old := `{"tasks":[{"name":"Payroll.Close","cron":"@every 1s","lock":"","next":null,"lastRun":null}]}`
	srv := httptestJSON(t, old)
	res := ndigo(t, nil, "--admin", srv.URL, "tasks")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if got, want := row(t, rows(t, res.stdout), "Payroll.Close"), []string{"Payroll.Close", "@every 1s", "-", "-", "unknown", "-", "-", "-", "-", "-", "-", "-", "-", "0", "-", "-"}; !slices.Equal(got, want) {
		t.Errorf("row %q, want %q", got, want)
	}
}

func TestRunsTable(t *testing.T) {
	_, srv := serve(t, testToken)
	res := ndigo(t, nil, "--admin", srv.URL, "runs", "Payroll.Close")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := [][]string{
		{"FIRE", "KIND", "ATTEMPT", "NODE", "TOKEN", "START", "DURATION", "OUTCOME", "ERROR"},
		{"2026-01-01T00:00:00Z", "scheduled", "-", "b", "7", "2026-01-01T00:00:00.002Z", "1.5s", "ok", "-"},
		// The error's tab and newline would break the columns.
		{"2025-12-31T23:59:59Z", "manual", "-", "a", "6", "2025-12-31T23:59:59Z", "1ms", "error", "books do not balance"},
	}
	got := rows(t, res.stdout)
	if len(got) != len(want) {
		t.Fatalf("table:\n%s\nwant %d lines", res.stdout, len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestRunsNone(t *testing.T) {
	_, srv := serve(t, testToken)
	res := ndigo(t, nil, "--admin", srv.URL, "runs", "reports daily")
	if res.code != 0 || res.stdout != "no runs of \"reports daily\" recorded\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

func TestActionMessages(t *testing.T) {
	c, srv := serve(t, testToken)
	env := map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	for _, tc := range []struct {
		verb, want string
		paused     bool
	}{
		{"pause", `"Payroll.Close" paused: every node skips its fires until it is resumed`, true},
		{"run", `run of "Payroll.Close" requested: one node runs it as soon as it can, under its lock`, true},
		{"resume", `"Payroll.Close" resumed: it runs again from its next fire`, false},
	} {
		res := ndigo(t, env, tc.verb, "Payroll.Close")
		if res.code != 0 || res.stdout != tc.want+"\n" || res.stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", tc.verb, res.code, res.stdout, res.stderr, tc.want)
		}
		if task, _ := c.Task("Payroll.Close"); task.Paused != tc.paused {
			t.Errorf("after %s: paused %v, want %v", tc.verb, task.Paused, tc.paused)
		}
	}
	if n := c.RunRequests("Payroll.Close"); n != 1 {
		t.Errorf("%d run requests, want 1", n)
	}
}
