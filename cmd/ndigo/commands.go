package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A command is one subcommand: how many arguments it takes and what its
// argument names ("" for a task, or "schedule"), whether it sends the
// token, the flags of its own it takes (no command but those naming them
// takes them), how it checks its argument and flags (an error is a usage
// error), and what it does with them.
type command struct {
	args      int
	noun      string
	sendToken bool
	flags     []string
	check     func(args []string, f *cmdFlags) error
	do        func(ctx context.Context, c *client, args []string, f cmdFlags, out output) error
}

// The commands by name; a schedule's and a calendar's are two words,
// "schedule" or "calendar" and a verb.
var commands = map[string]command{
	"tasks":           {args: 0, do: listTasks},
	"runs":            {args: 1, do: listRuns},
	"audit":           {args: 1, do: showAudit},
	"run":             {args: 1, sendToken: true, do: mutate("run")},
	"pause":           {args: 1, sendToken: true, flags: pauseFlags, do: mutate("pause")},
	"resume":          {args: 1, sendToken: true, flags: pauseFlags, do: mutate("resume")},
	"backfill":        {args: 1, sendToken: true, flags: backfillFlags, check: checkBackfill, do: runBackfill},
	"schedules":       {args: 0, do: listSchedules},
	"schedule create": {args: 1, noun: "schedule", sendToken: true, flags: scheduleFlags, check: checkSchedule("create"), do: putSchedule("create")},
	"schedule update": {args: 1, noun: "schedule", sendToken: true, flags: updateFlags, check: checkSchedule("update"), do: putSchedule("update")},
	"schedule delete": {args: 1, noun: "schedule", sendToken: true, check: checkDelete, do: deleteSchedule},
	"next":            {args: 1, flags: nextFlags, check: checkNext, do: showNext},
	"calendars":       {args: 0, do: listCalendars},
	"calendar create": {args: 1, noun: "calendar", sendToken: true, flags: calendarFlags, check: checkCalendar("create"), do: putCalendar("create")},
	"calendar update": {args: 1, noun: "calendar", sendToken: true, flags: calendarFlags, check: checkCalendar("update"), do: putCalendar("update")},
	"calendar delete": {args: 1, noun: "calendar", sendToken: true, check: checkCalendarDelete, do: deleteCalendar},
	"events":          {args: 0, flags: eventsFlags, check: checkEvents, do: listEvents},
}

// scheduleVerbs are the second words of the schedule commands.
const scheduleVerbs = "create, update or delete"

// ownFlags are the flags that only some commands take, in the order the
// usage errors check them.
var ownFlags = slices.Concat(backfillFlags, updateFlags, calendarFlags, nextFlags, []string{"after"})

// flagOwners names the commands that take flag: "backfill", "schedule
// create and schedule update".
func flagOwners(flag string) string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		if slices.Contains(commands[name].flags, flag) {
			names = append(names, name)
		}
	}
	if len(names) > 1 {
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return strings.Join(names, "")
}

// output is where a command's result goes: a table, or with json the
// server's body as it came.
type output struct {
	w    io.Writer
	errw io.Writer // warnings
	json bool
}

// raw writes body as it came and reports true in --json mode.
func (o output) raw(body []byte) (bool, error) {
	if !o.json {
		return false, nil
	}
	_, err := o.w.Write(body)
	return true, err
}

func listTasks(ctx context.Context, c *client, _ []string, _ cmdFlags, out output) error {
	var res taskList
	if printed, err := getJSON(ctx, c, c.endpoint("", ""), out, "the task list", &res); printed || err != nil {
		return err
	}
	if res.StateError != "" && out.errw != nil {
		// The node answered from its own view: the cluster's columns may be
		// stale, and fires that need the store fail.
		fmt.Fprintf(out.errw, "ndigo: warning: the node cannot read the cluster's task state, so PAUSED and LAST FIRE (CLUSTER) are its own view: %s\n", res.StateError)
	}
	return writeTasks(out.w, res.Tasks)
}

func listRuns(ctx context.Context, c *client, args []string, _ cmdFlags, out output) error {
	var res runs
	if printed, err := getJSON(ctx, c, c.endpoint(args[0], "/runs"), out, "a run history", &res); printed || err != nil {
		return err
	}
	return writeRuns(out.w, args[0], res)
}

// errMissed is the error of an audit that found missed fires: the command
// exits with exitMissed.
var errMissed = errors.New("missed fires")

func showAudit(ctx context.Context, c *client, args []string, _ cmdFlags, out output) error {
	var res audit
	printed, err := getJSON(ctx, c, c.endpoint(args[0], "/audit"), out, "an audit", &res)
	if err != nil {
		return err
	}
	// With --json the body went out as it came; the exit status still
	// tells of missed fires.
	if !printed {
		if err := writeAudit(out.w, args[0], res); err != nil {
			return err
		}
	}
	if res.Note != "" && out.errw != nil {
		fmt.Fprintf(out.errw, "ndigo: warning: the audit of %s covers less than it should: %s\n", strconv.Quote(args[0]), res.Note)
	}
	if res.Missed > 0 {
		last := ""
		if res.LastMissed != nil {
			last = ", the last at " + stamp(res.LastMissed)
		}
		return fmt.Errorf("%w: %d fires of %s ran nowhere%s", errMissed, res.Missed, strconv.Quote(args[0]), last)
	}
	return nil
}

// getJSON GETs u and, unless --json printed the body as it came, decodes
// it into v, which is what the answer should be. When it printed the body,
// it decodes what it can into v all the same.
func getJSON(ctx context.Context, c *client, u string, out output, what string, v any) (printed bool, err error) {
	body, err := c.get(ctx, u)
	if err != nil {
		return false, err
	}
	if printed, err := out.raw(body); printed {
		_ = json.Unmarshal(body, v)
		return true, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, fmt.Errorf("GET %s: the answer is not %s: %v", u, what, err)
	}
	return false, nil
}

// pauseFlags are pause's and resume's flags: the note kept with the
// change.
var pauseFlags = []string{"note"}

// mutate returns the command that POSTs verb (run, pause or resume) for
// the named task; a pause or resume sends its --note and who sent it
// ("ndigo CLI" and the user's name).
func mutate(verb string) func(context.Context, *client, []string, cmdFlags, output) error {
	return func(ctx context.Context, c *client, args []string, f cmdFlags, out output) error {
		u := c.endpoint(args[0], "/"+verb)
		var body []byte
		var err error
		if verb == "pause" || verb == "resume" {
			by := "ndigo CLI"
			if c.user != "" {
				by += " (" + c.user + ")"
			}
			body, err = c.postJSON(ctx, u, map[string]string{"note": f.note, "by": by})
		} else {
			body, err = c.post(ctx, u)
		}
		if err != nil {
			return err
		}
		if done, err := out.raw(body); done {
			return err
		}
		var res action
		if err := json.Unmarshal(body, &res); err != nil {
			return fmt.Errorf("POST %s: the answer is not an action's result: %v", u, err)
		}
		if res.Task == "" {
			res.Task = args[0]
		}
		return writeAction(out.w, verb, res)
	}
}
