package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// cmdFlags are the flags of the commands that have flags of their own
// (backfill's, schedule create's and update's), which the other commands
// refuse.
type cmdFlags struct {
	from, to            string // RFC 3339, as given
	force, wait, cancel bool
	overlap             string
	poll                time.Duration

	handler, cron, lock string
	unlocked            bool              // schedule update --unlocked
	options             optionList        // --option KEY=VALUE, as given
	args                string            // --args, as given
	optionMap           map[string]string // options, parsed by checkSchedule
	argsJSON            json.RawMessage   // args, checked by checkSchedule; nil without --args
	crons               listFlag          // --cron, as given: a schedule's one expression (checkSchedule sets cron), a calendar's rules

	dates, weekdays, windows, includes listFlag        // calendar create and update's rules, as given
	note, file                         string          // --note, --file
	calendar                           calendarRequest // the calendar to send, set by checkCalendar
	n                                  int             // next -n, events -n
	after                              int64           // events --after

	set map[string]bool // the flags given, by name
}

// backfillFlags are backfill's flags.
var backfillFlags = []string{"from", "to", "force", "overlap", "wait", "poll", "cancel"}

// defaultPoll is how often backfill --wait reads the task list: the nodes
// read the task state every second.
const defaultPoll = time.Second

// unseenLimit is how long backfill --wait waits for the node to show the
// backfill it started before it gives up.
var unseenLimit = time.Minute

// errBackfillCancelled is the error of backfill --wait when the backfill
// was cancelled: the command exits with exitCancelled.
var errBackfillCancelled = errors.New("backfill cancelled")

// checkBackfill checks backfill's flags: --cancel alone, or --from and
// --to, RFC 3339, the range not reversed; --poll only with --wait.
func checkBackfill(_ []string, f *cmdFlags) error {
	if f.cancel {
		for _, name := range backfillFlags {
			if name != "cancel" && f.set[name] {
				return fmt.Errorf("backfill --cancel takes no --%s: it cancels the task's running backfill", name)
			}
		}
		return nil
	}
	for _, p := range []struct {
		name, value, what string
	}{{"from", f.from, "the range's first instant"}, {"to", f.to, "the range's last instant, included"}} {
		if p.value == "" {
			return fmt.Errorf("backfill: --%s is required: %s, RFC 3339 such as 2026-01-01T00:00:00Z (or --cancel to cancel the running backfill)", p.name, p.what)
		}
		if _, err := time.Parse(time.RFC3339, p.value); err != nil {
			return fmt.Errorf("backfill: --%s %q: must be an RFC 3339 time such as 2026-01-01T00:00:00Z (%s)", p.name, p.value, p.what)
		}
	}
	from, _ := time.Parse(time.RFC3339, f.from)
	to, _ := time.Parse(time.RFC3339, f.to)
	switch {
	case to.Before(from):
		return fmt.Errorf("backfill: --to %s is before --from %s: the range must not end before it starts", f.to, f.from)
	case f.set["poll"] && !f.wait:
		return fmt.Errorf("backfill: --poll %v: only with --wait, which it paces", f.poll)
	case f.poll <= 0:
		return fmt.Errorf("backfill: --poll %v: must be positive", f.poll)
	}
	return nil
}

// runBackfill starts a backfill of the named task and, with --wait, draws
// its progress on stderr until it is done or cancelled; with --cancel it
// cancels the running one.
func runBackfill(ctx context.Context, c *client, args []string, f cmdFlags, out output) error {
	name := args[0]
	if f.cancel {
		u := c.endpoint(name, "/cancel-backfill")
		body, err := c.post(ctx, u)
		if err != nil {
			return err
		}
		if printed, err := out.raw(body); printed {
			return err
		}
		_, err = fmt.Fprintf(out.w, "backfill of %s cancelled: no node takes its next instant; a run of it in flight finishes\n", strconv.Quote(name))
		return err
	}
	u := c.endpoint(name, "/backfill")
	body, err := c.postJSON(ctx, u, backfillRequest{From: f.from, To: f.to, Force: f.force, Overlap: f.overlap})
	if err != nil {
		return err
	}
	var b backfill
	if err := json.Unmarshal(body, &b); err != nil || b.ID == "" {
		return fmt.Errorf("POST %s: the answer is not a backfill (%v): %.200s", u, err, body)
	}
	if !f.wait {
		if printed, err := out.raw(body); printed {
			return err
		}
		return writeBackfill(out.w, "started", b)
	}
	if !out.json {
		if err := writeBackfill(out.w, "started", b); err != nil {
			return err
		}
	}
	end, raw, err := waitBackfill(ctx, c, name, b, f.poll, out)
	if err != nil {
		return err
	}
	if out.json {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		if _, err := out.w.Write(buf.Bytes()); err != nil {
			return err
		}
	} else if err := writeBackfill(out.w, end.State, end); err != nil {
		return err
	}
	if end.State == "cancelled" {
		return fmt.Errorf("%w: backfill %s of %s: %d of its %d instants were not run", errBackfillCancelled, end.ID,
			strconv.Quote(name), end.Total-end.Taken-end.Refused, end.Total)
	}
	return nil
}

// writeBackfill writes a line of backfill b's: "started", or its end.
func writeBackfill(w io.Writer, what string, b backfill) error {
	line := fmt.Sprintf("backfill %s of %s %s: ", b.ID, strconv.Quote(b.Task), what)
	if what == "started" {
		line += fmt.Sprintf("%d instants from %s to %s", b.Total, stamp(&b.From), stamp(&b.To))
		var opts []string
		if b.Force {
			opts = append(opts, "force")
		}
		if b.Overlap != "" {
			opts = append(opts, "overlap "+b.Overlap)
		}
		if len(opts) > 0 {
			line += " (" + strings.Join(opts, ", ") + ")"
		}
	} else {
		line += fmt.Sprintf("%d of %d instants, %d taken to run, %d refused as already run", b.Taken+b.Refused, b.Total, b.Taken, b.Refused)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// tasksWithRaw is the task list with each task's backfill as it came.
type tasksWithRaw struct {
	Tasks []struct {
		Name     string          `json:"name"`
		Backfill json.RawMessage `json:"backfill"`
	} `json:"tasks"`
}

// waitBackfill reads the task list every interval until the named task's
// backfill b is no longer running, drawing its progress on out.errw, and
// returns it as read, and as it came.
func waitBackfill(ctx context.Context, c *client, name string, b backfill, every time.Duration, out output) (backfill, json.RawMessage, error) {
	bar := &progress{w: out.errw, tty: isTerminal(out.errw)}
	defer bar.end()
	bar.draw(b)
	stopped := func(err error) error {
		return fmt.Errorf("%w; stopped waiting: backfill %s of %s goes on (ndigo tasks shows it; ndigo backfill NAME --cancel cancels it)",
			err, b.ID, strconv.Quote(name))
	}
	u := c.endpoint("", "")
	since, warned := time.Now(), false
	for {
		body, err := c.get(ctx, u)
		if err != nil {
			return b, nil, stopped(err)
		}
		var list taskList
		var raw tasksWithRaw
		if err := json.Unmarshal(body, &list); err != nil || json.Unmarshal(body, &raw) != nil || len(raw.Tasks) != len(list.Tasks) {
			return b, nil, stopped(fmt.Errorf("GET %s: the answer is not the task list: %v", u, err))
		}
		if list.StateError != "" && !warned {
			warned = true
			bar.note("ndigo: warning: the node cannot read the cluster's task state, so the backfill's progress is its last view: " + list.StateError)
		}
		i := -1
		for j, t := range list.Tasks {
			if t.Name == name {
				i = j
				break
			}
		}
		if i < 0 {
			return b, nil, stopped(fmt.Errorf("the node no longer lists the task %s", strconv.Quote(name)))
		}
		switch cur := list.Tasks[i].Backfill; {
		case cur != nil && cur.ID == b.ID:
			bar.draw(*cur)
			if cur.State != "running" {
				return *cur, raw.Tasks[i].Backfill, nil
			}
		case cur != nil && cur.Created.After(b.Created):
			return b, nil, fmt.Errorf("backfill %s of %s ended unseen: the task's last backfill is now %s, started at %s by %s (ndigo tasks shows it)",
				b.ID, strconv.Quote(name), cur.ID, stamp(&cur.Created), cell(cur.Node))
		case time.Since(since) > unseenLimit:
			return b, nil, stopped(fmt.Errorf("the node does not show backfill %s after %v, though it reads the task state every second: is its store reachable?",
				b.ID, unseenLimit))
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return b, nil, stopped(ctx.Err())
		case <-t.C:
		}
	}
}

// barWidth is how many characters the progress bar has between its
// brackets.
const barWidth = 20

// progressLine draws backfill b's progress: "[#####...............]
// 512/1000 (3 refused) running", the bar (taken+refused)/total.
func progressLine(b backfill) string {
	done, filled := b.Taken+b.Refused, 0
	if b.Total > 0 {
		filled = min(done, b.Total) * barWidth / b.Total
	}
	return fmt.Sprintf("[%s%s] %d/%d (%d refused) %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		done, b.Total, b.Refused, b.State)
}

// progress draws a backfill's progress on w: on a terminal one line,
// redrawn with \r; otherwise one line per change.
type progress struct {
	w     io.Writer
	tty   bool
	last  string // the line drawn last
	width int    // the widest line drawn on the terminal's current line
}

func (p *progress) draw(b backfill) {
	line := progressLine(b)
	if p.w == nil || line == p.last {
		return
	}
	p.last = line
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	fmt.Fprintf(p.w, "\r%-*s", p.width, line)
	p.width = max(p.width, len(line))
}

// note writes msg on a line of its own.
func (p *progress) note(msg string) {
	if p.w == nil {
		return
	}
	p.end()
	fmt.Fprintln(p.w, msg)
	if p.tty && p.last != "" {
		fmt.Fprint(p.w, p.last) // drawn again below the note
		p.width = len(p.last)
	}
}

// end ends the terminal's line of the progress bar.
func (p *progress) end() {
	if p.w != nil && p.tty && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// backfillCell is the BACKFILL cell of a task's last backfill b: its state
// and (taken+refused)/total, "running 512/1000"; none if it had none.
func backfillCell(b *backfill) string {
	if b == nil {
		return none
	}
	return fmt.Sprintf("%s %d/%d", cell(b.State), b.Taken+b.Refused, b.Total)
}
