package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/admin"
	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/internal/fakenode"
	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/taskstate"
)

// backfillNode is the backfill tests' scenario (fakenode.Backfilling:
// node-a at epoch, "report" locked with its first run blocked at the gate
// and instant 0 already run, "plain" unlocked), and a real admin handler
// on it with the token testToken, served at env's NDIGO_ADMIN.
type backfillNode struct {
	*fakenode.Backfilling
	env map[string]string
}

func startBackfillNode(t *testing.T) *backfillNode {
	t.Helper()
	b := &backfillNode{Backfilling: fakenode.StartBackfilling(t, epoch)}
	h, err := admin.New(admin.Options{Scheduler: b.S, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.env = map[string]string{"NDIGO_ADMIN": srv.URL, "NDIGO_ADMIN_TOKEN": testToken}
	return b
}

// stored returns the store's last backfill of report.
func (b *backfillNode) stored(t *testing.T) taskstate.Backfill {
	t.Helper()
	p, err := b.Store.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.Backfills["report"]
}

// rfc formats an instant as the flags take it.
func rfc(at time.Time) string { return at.Format(time.RFC3339) }

// aRun is the command going in the background, its output so far, and
// its result once it ended.
type aRun struct {
	stdout, stderr *syncbuf.Buffer
	done           chan int // the exit status
}

// ndigoAsync starts the command with args and the environment env, and
// returns at once.
func ndigoAsync(env map[string]string, args ...string) *aRun {
	r := &aRun{stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	go func() {
		r.done <- run(context.Background(), args, func(k string) string { return env[k] }, r.stdout, r.stderr)
	}()
	return r
}

// waitStderr waits until the command's stderr holds want.
func (r *aRun) waitStderr(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(r.stderr.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q, want %q in it", r.stderr, want)
		}
	}
}

// exit waits for the command to end and returns its result.
func (r *aRun) exit(t *testing.T) result {
	t.Helper()
	select {
	case code := <-r.done:
		return result{code, r.stdout.String(), r.stderr.String()}
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not end; stdout %q, stderr %q", r.stdout, r.stderr)
		return result{}
	}
}

// progressLines checks that each line of stderr is a progress line whose
// count of instants does not go down, and returns them.
func progressLines(t *testing.T, stderr string) []string {
	t.Helper()
	re := regexp.MustCompile(`^\[[#.]{20}\] (\d+)/10 \(\d+ refused\) (running|done|cancelled)$`)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	last := 0
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("stderr line %q is no progress line; stderr:\n%s", l, stderr)
		}
		n, _ := strconv.Atoi(m[1])
		if n < last {
			t.Errorf("the progress went from %d to %d instants; stderr:\n%s", last, n, stderr)
		}
		last = n
	}
	return lines
}

// ndigo backfill --wait, on stderr not a terminal, draws one progress line
// per change, from the backfill as started to the backfill done, and exits
// 0; stdout has a line as it started and one as it ended. The tasks table
// shows its progress in BACKFILL; runs marks its runs.
func TestBackfillWait(t *testing.T) {
	b := startBackfillNode(t)
	in := b.Instants
	r := ndigoAsync(b.env, "backfill", "report", "--from", rfc(in[0]), "--to", rfc(in[9]), "--wait", "--poll", "5ms")
	r.waitStderr(t, "[....................] 0/10 (0 refused) running\n")
	// The first instant ran already (node-b's run): refused; the second's
	// run blocks.
	b.StepTo(t, 3*time.Second)
	r.waitStderr(t, "[####................] 2/10 (1 refused) running\n")
	res := ndigo(t, b.env, "tasks")
	if got := row(t, rows(t, res.stdout), "report"); res.code != 0 || got[14] != "running 2/10" {
		t.Errorf("tasks while the backfill runs: exit %d, row %q; want BACKFILL running 2/10 (%s)", res.code, got, res.stderr)
	}
	if got := row(t, rows(t, res.stdout), "plain"); got[14] != "-" {
		t.Errorf("tasks: plain %q, want no backfill", got)
	}

	b.Gate.Open()
	b.StepTo(t, 6*time.Second)
	res = r.exit(t)
	id := b.stored(t).ID
	want := `backfill ` + id + ` of "report" started: 10 instants from 2025-12-31T14:00:00Z to 2025-12-31T23:00:00Z` + "\n" +
		`backfill ` + id + ` of "report" done: 10 of 10 instants, 9 taken to run, 1 refused as already run` + "\n"
	if res.code != 0 || res.stdout != want {
		t.Fatalf("backfill --wait: exit %d, stdout\n%s\nwant 0 and\n%s(stderr %q)", res.code, res.stdout, want, res.stderr)
	}
	lines := progressLines(t, res.stderr)
	if lines[0] != "[....................] 0/10 (0 refused) running" || lines[len(lines)-1] != "[####################] 10/10 (1 refused) done" ||
		!slices.Contains(lines, "[####................] 2/10 (1 refused) running") {
		t.Errorf("stderr:\n%s\nwant 0/10 running, 2/10 running, ..., 10/10 done", res.stderr)
	}

	res = ndigo(t, b.env, "tasks")
	if got := row(t, rows(t, res.stdout), "report"); got[14] != "done 10/10" || got[7] != "ok" || got[5] != "ok" {
		t.Errorf("tasks once the backfill is done: %q; want BACKFILL done 10/10", got)
	}
	res = ndigo(t, b.env, "runs", "report")
	rs := rows(t, res.stdout)
	if len(rs) != 11 || !slices.Equal(rs[1][:5], []string{"2025-12-31T23:00:00Z", "backfill", "-", "node-a", "10"}) ||
		!slices.Equal(rs[10][:4], []string{"2025-12-31T14:00:00Z", "scheduled", "-", "node-b"}) {
		t.Errorf("runs after the backfill:\n%s\nwant its 9 runs as backfill, then node-b's scheduled run", res.stdout)
	}
}

// A backfill cancelled while ndigo backfill --wait waits for it: the wait
// ends with the backfill as it stopped, on stdout and stderr, and exits 4;
// ndigo backfill --cancel cancels it in the store, and a second --cancel
// fails with the node's 409.
func TestBackfillWaitCancelled(t *testing.T) {
	b := startBackfillNode(t)
	in := b.Instants
	r := ndigoAsync(b.env, "backfill", "report", "--from", rfc(in[0]), "--to", rfc(in[9]), "--wait", "--poll", "5ms")
	r.waitStderr(t, "0/10 (0 refused) running\n")
	b.StepTo(t, 3*time.Second)
	r.waitStderr(t, "2/10 (1 refused) running\n")

	res := ndigo(t, b.env, "backfill", "report", "--cancel")
	if want := "backfill of \"report\" cancelled: no node takes its next instant; a run of it in flight finishes\n"; res.code != 0 || res.stdout != want {
		t.Fatalf("backfill --cancel: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	stored := b.stored(t)
	if stored.State != taskstate.BackfillCancelled {
		t.Fatalf("the store's backfill %+v after --cancel, want it cancelled", stored)
	}
	res = ndigo(t, b.env, "backfill", "report", "--cancel")
	if res.code != exitFailure || !strings.Contains(res.stderr, `/scheduledtasks/report/cancel-backfill: 409 Conflict: scheduling: no backfill running: task "report"`) {
		t.Errorf("a second --cancel: exit %d, stderr %q; want 1 and the 409", res.code, res.stderr)
	}

	b.Gate.Open() // the run in flight finishes; the node's next poll reads the cancel
	b.StepTo(t, 6*time.Second)
	res = r.exit(t)
	if want := `backfill ` + stored.ID + ` of "report" cancelled: 2 of 10 instants, 1 taken to run, 1 refused as already run` + "\n"; res.code != exitCancelled ||
		!strings.HasSuffix(res.stdout, want) {
		t.Errorf("backfill --wait of a cancelled backfill: exit %d, stdout %q; want %d and %q", res.code, res.stdout, exitCancelled, want)
	}
	if want := "[####................] 2/10 (1 refused) cancelled\nndigo: backfill cancelled: backfill " + stored.ID +
		` of "report": 8 of its 10 instants were not run` + "\n"; !strings.HasSuffix(res.stderr, want) {
		t.Errorf("stderr %q, want it to end with %q", res.stderr, want)
	}
	res = ndigo(t, b.env, "tasks")
	if got := row(t, rows(t, res.stdout), "report"); got[14] != "cancelled 2/10" {
		t.Errorf("tasks once cancelled: %q; want BACKFILL cancelled 2/10", got)
	}
}

// Without --wait, ndigo backfill says it started and returns; with --json
// it prints the node's answer; --json --wait prints the backfill as it
// ended. --force and --overlap go to the node, which shows them.
func TestBackfillStartAndJSON(t *testing.T) {
	b := startBackfillNode(t)
	in := b.Instants
	b.Gate.Open()
	res := ndigo(t, b.env, "backfill", "report", "--from", rfc(in[0]), "--to", rfc(in[1]), "--force", "--overlap", "skip")
	id := b.stored(t).ID
	if want := `backfill ` + id + ` of "report" started: 2 instants from 2025-12-31T14:00:00Z to 2025-12-31T15:00:00Z (force, overlap skip)` + "\n"; res.code != 0 ||
		res.stdout != want || res.stderr != "" {
		t.Fatalf("backfill: exit %d, stdout %q, stderr %q; want %q", res.code, res.stdout, res.stderr, want)
	}
	b.StepTo(t, 3*time.Second)
	if got := b.stored(t); got.State != taskstate.BackfillDone || got.Taken != 2 || !got.Force || got.Overlap != "skip" {
		t.Fatalf("the store's backfill %+v, want done, both instants taken (forced), overlap skip", got)
	}

	res = ndigo(t, b.env, "--json", "backfill", "report", "--from", rfc(in[2]), "--to", rfc(in[3]))
	if res.code != 0 || !strings.Contains(res.stdout, `"total": 2,`) || !strings.Contains(res.stdout, `"state": "running",`) ||
		!strings.Contains(res.stdout, `"id": "`+b.stored(t).ID+`",`) {
		t.Errorf("--json backfill: exit %d, stdout %s; want the node's answer", res.code, res.stdout)
	}
	b.StepTo(t, 6*time.Second)

	r := ndigoAsync(b.env, "backfill", "report", "--from", rfc(in[4]), "--to", rfc(in[6]), "--wait", "--poll", "5ms", "--json")
	r.waitStderr(t, "0/3 (0 refused) running\n")
	b.StepTo(t, 9*time.Second)
	res = r.exit(t)
	if res.code != 0 || !strings.HasPrefix(res.stdout, "{\n  \"id\": \""+b.stored(t).ID+"\",") || !strings.Contains(res.stdout, `"state": "done",`) ||
		!strings.Contains(res.stdout, `"cursor": "2025-12-31T20:00:00Z",`) {
		t.Errorf("--json backfill --wait: exit %d, stdout %s; want the backfill as it ended, alone", res.code, res.stdout)
	}
}

// Bad flags are usage errors (exit 2) that name the flag, the value and
// the rule; what only the node can check fails with its message (exit 1).
func TestBackfillRefusals(t *testing.T) {
	b := startBackfillNode(t)
	from, to := rfc(b.Instants[0]), rfc(b.Instants[9])
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backfill", "report"}, "ndigo: backfill: --from is required: the range's first instant, RFC 3339 such as 2026-01-01T00:00:00Z (or --cancel"},
		{[]string{"backfill", "report", "--from", from}, "ndigo: backfill: --to is required: the range's last instant, included"},
		{[]string{"backfill", "report", "--from", "yesterday", "--to", to}, `ndigo: backfill: --from "yesterday": must be an RFC 3339 time such as 2026-01-01T00:00:00Z`},
		{[]string{"backfill", "report", "--from", from, "--to", "2026-01-01"}, `ndigo: backfill: --to "2026-01-01": must be an RFC 3339 time`},
		{[]string{"backfill", "report", "--from", to, "--to", from}, "ndigo: backfill: --to 2025-12-31T14:00:00Z is before --from 2025-12-31T23:00:00Z: the range must not end before it starts"},
		{[]string{"backfill", "report", "--from", from, "--to", to, "--poll", "1s"}, "ndigo: backfill: --poll 1s: only with --wait"},
		{[]string{"backfill", "report", "--from", from, "--to", to, "--wait", "--poll", "0s"}, "ndigo: backfill: --poll 0s: must be positive"},
		{[]string{"backfill", "report", "--cancel", "--from", from}, "ndigo: backfill --cancel takes no --from: it cancels the task's running backfill"},
		{[]string{"backfill", "report", "--cancel", "--wait"}, "ndigo: backfill --cancel takes no --wait"},
		{[]string{"backfill", "--from", from, "--to", to}, "ndigo: backfill takes one argument, the task's name, got 0"},
		{[]string{"tasks", "--wait"}, "ndigo: --wait is a flag of backfill, not of tasks"},
		{[]string{"run", "report", "--from", from}, "ndigo: --from is a flag of backfill, not of run"},
		{[]string{"backfill", "report", "--from", from, "--to", to, "--poll", "soon"}, `ndigo: invalid value "soon" for flag -poll`},
	} {
		res := ndigo(t, b.env, c.args...)
		if res.code != exitUsage || !strings.HasPrefix(res.stderr, c.want) || !strings.HasSuffix(res.stderr, "\n"+usageHint+"\n") || strings.Count(res.stderr, "\n") != 2 {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q, then the usage", c.args, res.code, res.stderr, exitUsage, c.want)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{b.env, []string{"backfill", "report", "--from", from, "--to", to, "--overlap", "queue"},
			`/scheduledtasks/report/backfill: 400 Bad Request: scheduling: invalid backfill: task report: overlap "queue": must be one of "skip", "buffer-one", "allow"`},
		{b.env, []string{"backfill", "report", "--from", from, "--to", to, "--overlap", "cancel-previous"}, `overlap "cancel-previous": refused for a backfill`},
		{b.env, []string{"backfill", "report", "--from", rfc(b.Instants[0].Add(time.Minute)), "--to", rfc(b.Instants[0].Add(2 * time.Minute))},
			`400 Bad Request: scheduling: invalid backfill: task report: range [2025-12-31 14:01:00 +0000 UTC, 2025-12-31 14:02:00 +0000 UTC]: holds no instant of the schedule "0 * * * *"`},
		{b.env, []string{"backfill", "plain", "--from", from, "--to", to}, "400 Bad Request: scheduling: invalid backfill: task plain: needs lock"},
		{b.env, []string{"backfill", "nope", "--from", from, "--to", to}, `404 Not Found`},
		{b.env, []string{"backfill", "report", "--cancel"}, `409 Conflict: scheduling: no backfill running: task "report"`},
		{map[string]string{"NDIGO_ADMIN": b.env["NDIGO_ADMIN"]}, []string{"backfill", "report", "--from", from, "--to", to},
			"401 Unauthorized: " + admintest.WrongTokenMessage + " (set NDIGO_ADMIN_TOKEN to the node's admin token)"},
	} {
		res := ndigo(t, c.env, c.args...)
		if res.code != exitFailure || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, res.code, res.stderr, exitFailure, c.want)
		}
	}
	if got := b.stored(t); got.ID != "" {
		t.Errorf("the store holds the backfill %+v after refusals only", got)
	}
	// One running: a second is a conflict, naming it.
	if res := ndigo(t, b.env, "backfill", "report", "--from", from, "--to", to); res.code != 0 {
		t.Fatalf("backfill: exit %d: %s", res.code, res.stderr)
	}
	res := ndigo(t, b.env, "backfill", "report", "--from", from, "--to", to)
	if res.code != exitFailure || !strings.Contains(res.stderr, "409 Conflict: taskstate: a backfill of the task is running") || !strings.Contains(res.stderr, b.stored(t).ID) {
		t.Errorf("a second backfill: exit %d, stderr %q; want the 409 naming the running one", res.code, res.stderr)
	}
}

// The progress line: the bar is (taken+refused)/total of 20 characters;
// on a terminal it is redrawn in place with \r, wide enough to cover the
// line before, and the line ends when the wait does; elsewhere one line
// per change.
func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		b    backfill
		want string
	}{
		{backfill{Total: 1000, Taken: 509, Refused: 3, State: "running"}, "[##########..........] 512/1000 (3 refused) running"},
		{backfill{Total: 1000, State: "running"}, "[....................] 0/1000 (0 refused) running"},
		{backfill{Total: 3, Taken: 3, State: "done"}, "[####################] 3/3 (0 refused) done"},
		{backfill{Total: 0, State: "cancelled"}, "[....................] 0/0 (0 refused) cancelled"},
	} {
		if got := progressLine(c.b); got != c.want {
			t.Errorf("progressLine(%+v) = %q, want %q", c.b, got, c.want)
		}
	}
	var tty, lines strings.Builder
	for _, p := range []*progress{{w: &tty, tty: true}, {w: &lines}} {
		p.draw(backfill{Total: 10, Taken: 9, State: "running"})
		p.draw(backfill{Total: 10, Taken: 9, State: "running"}) // no change
		p.draw(backfill{Total: 10, Taken: 10, State: "done"})
		p.end()
	}
	if want := "\r[##################..] 9/10 (0 refused) running\r[####################] 10/10 (0 refused) done  \n"; tty.String() != want {
		t.Errorf("on a terminal: %q, want %q", tty.String(), want)
	}
	if want := "[##################..] 9/10 (0 refused) running\n[####################] 10/10 (0 refused) done\n"; lines.String() != want {
		t.Errorf("elsewhere: %q, want %q", lines.String(), want)
	}
	if backfillCell(nil) != "-" || backfillCell(&backfill{Total: 1000, Taken: 500, Refused: 12, State: "running"}) != "running 512/1000" {
		t.Errorf("backfillCell: %q, %q", backfillCell(nil), backfillCell(&backfill{Total: 1000, Taken: 500, Refused: 12, State: "running"}))
	}
}
