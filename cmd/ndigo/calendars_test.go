package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// calendarsOf returns the node's calendars by name.
func calendarsOf(t *testing.T, n *scheduleNode) map[string]scheduling.CalendarInfo {
	t.Helper()
	cals, err := n.S.Calendars(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scheduling.CalendarInfo{}
	for _, c := range cals {
		out[c.Name] = c
	}
	return out
}

// create, list, update and delete a calendar through the CLI, from flags
// and from a file: each says in one line what it did; the list shows the
// rules, what names the calendar and when its rules came in force; a
// delete of a calendar in use fails naming its users. The token goes with
// the changes only.
func TestCalendarCommands(t *testing.T) {
	n := startScheduleNode(t, testToken)
	if res := ndigo(t, n.env, "calendars"); res.code != 0 || res.stdout != "no calendars\n" || res.stderr != "" {
		t.Fatalf("calendars with none: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	res := ndigo(t, n.env, "calendar", "create", "eu-holidays", "--date", "2026-12-25", "--date", "2026-12-26", "--weekday", "sat",
		"--window", "22:00-06:00", "--cron", "0 12 * * *", "--note", "closed")
	want := `calendar "eu-holidays" created (dates 2026-12-25,2026-12-26; weekdays sat; windows 22:00-06:00; cron 0 12 * * *): ` +
		"the tasks that name it (option calendar) skip the fires it excludes, on node-a now and on the other nodes from their next poll, within about a second\n"
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Fatalf("calendar create: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	c := calendarsOf(t, n)["eu-holidays"]
	if !slices.Equal(c.Dates, []string{"2026-12-25", "2026-12-26"}) || !slices.Equal(c.Weekdays, []string{"sat"}) || !slices.Equal(c.Windows, []string{"22:00-06:00"}) ||
		!slices.Equal(c.Cron, []string{"0 12 * * *"}) || c.Note != "closed" || c.Node != "node-a" {
		t.Errorf("stored %+v; want the calendar as given, by node-a", c)
	}

	// From a file, including the first; a stored schedule names it.
	file := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(file, []byte(`{"weekdays": ["sun"], "include": ["eu-holidays"], "note": "no Sundays"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := ndigo(t, n.env, "calendar", "create", "fr-closed", "--file", file); res.code != 0 ||
		!strings.HasPrefix(res.stdout, `calendar "fr-closed" created (weekdays sun; include eu-holidays): `) {
		t.Fatalf("calendar create --file: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if res := ndigo(t, n.env, "schedule", "create", "report", "--handler", "tenant-report", "--cron", "0 2 * * *", "--lock", "r",
		"--option", "calendar=fr-closed"); res.code != 0 {
		t.Fatalf("schedule create naming the calendar: exit %d: %s", res.code, res.stderr)
	}

	res = ndigo(t, n.env, "calendars")
	rs := rows(t, res.stdout)
	for i, want := range [][]string{
		{"NAME", "RULES", "USED BY", "FROM", "NOTE"},
		{"eu-holidays", "dates 2026-12-25,2026-12-26; weekdays sat; windows 22:00-...", "calendar fr-closed", "2026-01-01T00:00:00Z", "closed"},
		{"fr-closed", "weekdays sun; include eu-holidays", "task report", "2026-01-01T00:00:00Z", "no Sundays"},
	} {
		if i >= len(rs) || !slices.Equal(rs[i], want) {
			t.Errorf("calendars line %d: %q, want %q\n%s", i, rs[min(i, len(rs)-1)], want, res.stdout)
		}
	}
	if res.code != 0 || len(rs) != 3 || res.stderr != "" {
		t.Errorf("calendars: exit %d, stderr %q, %d lines, want a header and 2 calendars:\n%s", res.code, res.stderr, len(rs), res.stdout)
	}
	res = ndigo(t, n.env, "--json", "calendars")
	if body := fetch(t, http.MethodGet, n.url+"/calendars", ""); res.code != 0 || res.stdout != string(body) {
		t.Errorf("--json calendars: exit %d, printed\n%s\nthe node answers\n%s", res.code, res.stdout, body)
	}

	// An update replaces the whole calendar.
	res = ndigo(t, n.env, "calendar", "update", "eu-holidays", "--date", "2027-01-01")
	c = calendarsOf(t, n)["eu-holidays"]
	want = `calendar "eu-holidays" updated (dates 2027-01-01): every node judges the fires from ` + c.From.UTC().Format(time.RFC3339Nano) +
		" on by these rules, those before by the old\n"
	if res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Fatalf("calendar update: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	if !slices.Equal(c.Dates, []string{"2027-01-01"}) || len(c.Weekdays) != 0 || len(c.Windows) != 0 || len(c.Cron) != 0 || c.Note != "" {
		t.Errorf("stored after the update %+v; want the one date alone", c)
	}

	res = ndigo(t, n.env, "calendar", "delete", "eu-holidays")
	if res.code != exitFailure || !strings.Contains(res.stderr, `409 Conflict: scheduling: the calendar is in use: calendar "eu-holidays" is named by calendar fr-closed`) {
		t.Errorf("calendar delete of one in use: exit %d, stderr %q", res.code, res.stderr)
	}
	for _, args := range [][]string{{"schedule", "delete", "report"}, {"calendar", "delete", "fr-closed"}} {
		if res := ndigo(t, n.env, args...); res.code != 0 {
			t.Fatalf("%q: exit %d: %s", args, res.code, res.stderr)
		}
	}
	res = ndigo(t, n.env, "calendar", "delete", "eu-holidays")
	if want := `calendar "eu-holidays" deleted: no task named it` + "\n"; res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Errorf("calendar delete: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	if len(calendarsOf(t, n)) != 0 {
		t.Errorf("calendars left: %v", calendarsOf(t, n))
	}
	for _, r := range n.requests() {
		method, _, _ := strings.Cut(r, " ")
		if auth := strings.HasSuffix(r, " Bearer "+testToken); auth != (method != http.MethodGet) {
			t.Errorf("request %q: want the token with a change only", r)
		}
	}
}

// Malformed calendar flags are usage errors that send nothing; the node's
// refusals come through with its message naming the field, the value and
// the rule.
func TestCalendarRefusals(t *testing.T) {
	n := startScheduleNode(t, testToken)
	file := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(file, []byte(`{"name": "other", "dates": ["2026-12-25"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"date": ["2026-12-25"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calendar"}, "ndigo: calendar takes a verb, create, update or delete, and the calendar's name"},
		{[]string{"calendar", "rename", "x"}, `ndigo: unknown command "calendar rename": the verbs of calendar are create, update or delete`},
		{[]string{"calendar", "create", "--date", "2026-12-25"}, "ndigo: calendar create takes one argument, the calendar's name, got 0"},
		{[]string{"calendar", "delete", ""}, "ndigo: calendar delete: the calendar name is empty"},
		{[]string{"calendar", "create", "..", "--date", "2026-12-25"}, `ndigo: calendar create: the name ".." cannot be a calendar's`},
		{[]string{"calendar", "update", "x"}, "ndigo: calendar update: nothing given: the update replaces the whole calendar"},
		{[]string{"calendar", "create", "x", "--date", ""}, `ndigo: calendar create: --date "": must not be empty`},
		{[]string{"calendar", "create", "x", "--file", file, "--date", "2026-12-25"}, "ndigo: calendar create: --file and --date: give the whole calendar in the file, or its rules with the flags"},
		{[]string{"calendar", "create", "x", "--file", file}, `names the calendar "other", not "x"`},
		{[]string{"calendar", "create", "x", "--file", bad}, `unknown field "date"`},
		{[]string{"calendar", "create", "x", "--file", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
		{[]string{"calendar", "delete", "x", "--note", "y"}, "ndigo: --note is a flag of calendar create, calendar update, pause and resume, not of calendar delete"},
		{[]string{"calendar", "create", "x", "--handler", "h"}, "ndigo: --handler is a flag of schedule create and schedule update, not of calendar create"},
		{[]string{"next", "nightly", "-n", "0"}, "ndigo: next: -n 0: must be at least 1"},
		{[]string{"next", "nightly", "-n", "ten"}, `ndigo: invalid value "ten" for flag -n`},
		{[]string{"tasks", "-n", "3"}, "ndigo: --n is a flag of events and next, not of tasks"},
		{[]string{"calendars", "x"}, "ndigo: calendars takes no argument, got 1"},
	} {
		res := ndigo(t, n.env, c.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, c.want) || !strings.HasSuffix(res.stderr, "\n"+usageHint+"\n") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q, then the usage", c.args, res.code, res.stderr, exitUsage, c.want)
		}
	}
	if got := n.requests(); len(got) != 0 {
		t.Errorf("usage errors sent %q", got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calendar", "create", "x", "--weekday", "sat", "--weekday", "sundy"}, `POST ` + n.url + `/calendars: 400 Bad Request: `},
		{[]string{"calendar", "create", "x", "--weekday", "sundy"}, `weekdays[0] "sundy"`},
		{[]string{"calendar", "create", "x", "--include", "nope"}, `400 Bad Request: scheduling: unknown calendar: calendar "x": include[0] "nope" is not defined; create it first`},
		{[]string{"calendar", "update", "nope", "--date", "2026-12-25"}, `PUT ` + n.url + `/calendars/nope: 404 Not Found: scheduling: unknown calendar: "nope": create it first`},
		{[]string{"calendar", "delete", "nope"}, `404 Not Found: scheduling: unknown calendar: "nope"`},
		{[]string{"next", "nope"}, `404 Not Found: scheduling: unknown task: "nope"`},
		{[]string{"next", "nightly", "-n", "1001"}, `400 Bad Request: query: n "1001" must be an integer from 1 to 1000 (scheduling.MaxNextFires)`},
	} {
		res := ndigo(t, n.env, c.args...)
		if res.code != exitFailure || res.stdout != "" || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and %q", c.args, res.code, res.stdout, res.stderr, exitFailure, c.want)
		}
	}
	if res := ndigo(t, map[string]string{"NDIGO_ADMIN": n.url}, "calendar", "create", "x", "--date", "2026-12-25"); res.code != exitFailure ||
		!strings.Contains(res.stderr, "401 Unauthorized") || !strings.Contains(res.stderr, "set NDIGO_ADMIN_TOKEN") {
		t.Errorf("calendar create without a token: exit %d, stderr %q", res.code, res.stderr)
	}
}

// next lists the task's next instants, the ones a calendar excludes
// marked; -n bounds them. A task's fires a calendar excluded read
// "excluded: calendar NAME" in runs and audit, which counts them apart
// from the missed; a completed task says so in tasks and next.
func TestNextAndExcludedInTheTables(t *testing.T) {
	n := startScheduleNode(t, testToken)
	if err := n.S.CreateCalendar(context.Background(), taskstate.Calendar{Name: "maintenance",
		CalendarRules: taskstate.CalendarRules{Windows: []string{"00:02-00:04"}}}); err != nil {
		t.Fatal(err)
	}
	// Stored schedules: tasks the started node takes at once.
	if err := n.S.CreateSchedule(context.Background(), taskstate.Schedule{Name: "sweep", Handler: "tenant-report", Cron: "@every 1m", Lock: "sweep",
		Options: map[string]string{"calendar": "maintenance"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.S.CreateSchedule(context.Background(), taskstate.Schedule{Name: "once", Handler: "tenant-report", Cron: "@at 2026-01-01T00:00:30Z"}); err != nil {
		t.Fatal(err)
	}
	res := ndigo(t, n.env, "next", "sweep", "-n", "4")
	rs := rows(t, res.stdout)
	for i, want := range [][]string{
		{"FIRE", "START", "SKIP", "DST"},
		{"2026-01-01T00:01:00Z", "2026-01-01T00:01:00Z", "-", "-"},
		{"2026-01-01T00:02:00Z", "2026-01-01T00:02:00Z", "excluded: calendar maintenance", "-"},
		{"2026-01-01T00:03:00Z", "2026-01-01T00:03:00Z", "excluded: calendar maintenance", "-"},
		{"2026-01-01T00:04:00Z", "2026-01-01T00:04:00Z", "-", "-"},
	} {
		if i >= len(rs) || !slices.Equal(rs[i], want) {
			t.Errorf("next line %d: %q, want %q\n%s", i, rs[min(i, len(rs)-1)], want, res.stdout)
		}
	}
	if res.code != 0 || len(rs) != 5 {
		t.Errorf("next -n 4: exit %d, %d lines: %s%s", res.code, len(rs), res.stdout, res.stderr)
	}
	if rs := rows(t, ndigo(t, n.env, "next", "sweep").stdout); len(rs) != 11 {
		t.Errorf("next without -n: %d lines, want a header and 10", len(rs))
	}

	n.StepTo(t, 8*time.Minute)
	res = ndigo(t, n.env, "runs", "sweep")
	var excluded []string
	for _, r := range rows(t, res.stdout)[1:] {
		if strings.HasPrefix(r[7], "excluded") {
			excluded = append(excluded, r[0]+" "+r[7]+" "+r[8])
		}
	}
	if slices.Sort(excluded); !slices.Equal(excluded, []string{"2026-01-01T00:02:00Z excluded: calendar maintenance -",
		"2026-01-01T00:03:00Z excluded: calendar maintenance -"}) {
		t.Errorf("runs: the excluded fires %q\n%s", excluded, res.stdout)
	}
	res = ndigo(t, n.env, "audit", "sweep")
	lines := strings.Split(res.stdout, "\n")
	if res.code != 0 || !strings.HasSuffix(lines[0], ", 0 missed, 2 excluded") {
		t.Errorf("audit: exit %d, first line %q; want 2 excluded and none missed\n%s", res.code, lines[0], res.stderr)
	}
	excluded = nil
	for _, r := range rows(t, res.stdout)[2:] {
		if r[1] == "excluded" {
			excluded = append(excluded, strings.Join(r, "|"))
		}
	}
	if slices.Sort(excluded); !slices.Equal(excluded, []string{"2026-01-01T00:02:00Z|excluded|excluded: calendar maintenance|node-a|-",
		"2026-01-01T00:03:00Z|excluded|excluded: calendar maintenance|node-a|-"}) {
		t.Errorf("audit: the excluded instants %q\n%s", excluded, res.stdout)
	}

	rs = rows(t, ndigo(t, n.env, "tasks").stdout)
	if next := slices.Index(rs[0], "NEXT"); row(t, rs, "once")[next] != "completed" || row(t, rs, "sweep")[next] != "2026-01-01T00:09:00Z" {
		t.Errorf("tasks: %q; want once completed, sweep's next fire", rs)
	}
	if res := ndigo(t, n.env, "next", "once"); res.code != 0 || res.stdout != `"once" fires no more: it is completed (past its endAt, its one-off instant or its maxRuns)`+"\n" {
		t.Errorf("next of a completed task: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// pause and resume send their --note and who sent them, which the task
// keeps with its flag.
func TestPauseNote(t *testing.T) {
	n := startScheduleNode(t, testToken)
	env := map[string]string{"USER": "ops"}
	for k, v := range n.env {
		env[k] = v
	}
	if res := ndigo(t, env, "pause", "nightly", "--note", "ledger migration"); res.code != 0 {
		t.Fatalf("pause --note: exit %d: %s", res.code, res.stderr)
	}
	infos, err := n.S.ClusterTasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p := infos[0].PauseNote; !p.Paused || p.Note != "ledger migration" || p.By != "admin: ndigo CLI (ops)" {
		t.Fatalf("pause %+v, want paused with the note, by admin (the token's holder): ndigo CLI (ops)", p)
	}
	if res := ndigo(t, env, "resume", "nightly", "--note", "bad\x01"); res.code == 0 || !strings.Contains(res.stderr, "pause note") {
		t.Fatalf("resume with a control character in the note: exit %d, stderr %q; want the note refused", res.code, res.stderr)
	}
}
