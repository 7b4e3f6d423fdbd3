package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// calendarFlags are the flags of calendar create and calendar update: the
// rules, each repeatable, the note, or a file with the whole calendar.
// nextFlags are next's.
var (
	calendarFlags = []string{"date", "weekday", "window", "cron", "include", "note", "file"}
	nextFlags     = []string{"n"}
)

// calendarRuleFlags are the repeatable rule flags, with the field of the
// calendar each fills.
var calendarRuleFlags = []struct{ flag, field string }{
	{"date", "dates"}, {"weekday", "weekdays"}, {"window", "windows"}, {"cron", "cron"}, {"include", "include"},
}

// calendarVerbs are the second words of the calendar commands.
const calendarVerbs = "create, update or delete"

// checkCalendar returns the check of calendar create or update (verb): the
// name one the API can address; the rules from the flags or from --file,
// not both; for update, something given, as it replaces the whole
// calendar. It sets f.calendar.
func checkCalendar(verb string) func(args []string, f *cmdFlags) error {
	return func(args []string, f *cmdFlags) error {
		name := args[0]
		if err := checkName("calendar", verb, name); err != nil {
			return err
		}
		var given []string
		for _, fl := range calendarFlags {
			if fl != "file" && f.set[fl] {
				given = append(given, "--"+fl)
			}
		}
		req := calendarRequest{Name: name, Dates: f.dates, Weekdays: f.weekdays, Windows: f.windows, Cron: f.crons, Include: f.includes, Note: f.note}
		switch {
		case f.set["file"] && len(given) > 0:
			return fmt.Errorf("calendar %s: --file and %s: give the whole calendar in the file, or its rules with the flags", verb, strings.Join(given, ", "))
		case f.set["file"]:
			var err error
			if req, err = calendarFile(verb, name, f.file); err != nil {
				return err
			}
		case verb == "update" && len(given) == 0:
			return fmt.Errorf("calendar update: nothing given: the update replaces the whole calendar, so give all its rules " +
				"(--date, --weekday, --window, --cron, --include, --note) or --file; ndigo calendars shows them")
		}
		for _, r := range calendarRuleFlags {
			for _, v := range calendarRuleValues(req, r.field) {
				if strings.TrimSpace(v) == "" {
					return fmt.Errorf("calendar %s: --%s %q: must not be empty", verb, r.flag, v)
				}
			}
		}
		f.calendar = req
		return nil
	}
}

// calendarRuleValues returns the entries of req's field.
func calendarRuleValues(req calendarRequest, field string) []string {
	switch field {
	case "dates":
		return req.Dates
	case "weekdays":
		return req.Weekdays
	case "windows":
		return req.Windows
	case "cron":
		return req.Cron
	}
	return req.Include
}

// maxCalendarFile bounds what --file reads: a calendar's largest body.
const maxCalendarFile = 1 << 20

// calendarFile reads the calendar named name from the JSON file path:
// the body of POST /calendars, its name optional, and if given name's.
func calendarFile(verb, name, path string) (calendarRequest, error) {
	fh, err := os.Open(path)
	if err != nil {
		return calendarRequest{}, fmt.Errorf("calendar %s: --file %q: %v", verb, path, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxCalendarFile+1))
	if err != nil {
		return calendarRequest{}, fmt.Errorf("calendar %s: --file %q: %v", verb, path, err)
	}
	if len(data) > maxCalendarFile {
		return calendarRequest{}, fmt.Errorf("calendar %s: --file %q: over %d bytes; a calendar is far smaller", verb, path, maxCalendarFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req calendarRequest
	if err := dec.Decode(&req); err != nil {
		return calendarRequest{}, fmt.Errorf(`calendar %s: --file %q: not the JSON object of a calendar, {"name": "...", "dates": [...], "weekdays": [...], `+
			`"windows": [...], "cron": [...], "include": [...], "note": "..."}: %v`, verb, path, err)
	}
	if dec.More() {
		return calendarRequest{}, fmt.Errorf("calendar %s: --file %q: more than one JSON value; want one calendar", verb, path)
	}
	switch {
	case req.Name == "":
		req.Name = name
	case req.Name != name:
		return calendarRequest{}, fmt.Errorf("calendar %s: --file %q names the calendar %q, not %q: give the name the file has, or leave it out of the file", verb, path, req.Name, name)
	}
	return req, nil
}

// checkCalendarDelete is the check of calendar delete.
func checkCalendarDelete(args []string, _ *cmdFlags) error {
	return checkName("calendar", "delete", args[0])
}

func listCalendars(ctx context.Context, c *client, _ []string, _ cmdFlags, out output) error {
	var res calendarList
	if printed, err := getJSON(ctx, c, c.calendarsEndpoint(""), out, "the calendar list", &res); printed || err != nil {
		return err
	}
	if err := writeCalendars(out.w, res.Calendars); err != nil {
		return err
	}
	for _, cal := range res.Calendars {
		if cal.Problem != "" && out.errw != nil {
			// Not an error: the nodes that read it apply it.
			fmt.Fprintf(out.errw, "ndigo: warning: %s cannot apply the calendar %s: %s\n", nodeName(res.Node), strconv.Quote(cal.Name), cal.Problem)
		}
	}
	return nil
}

// putCalendar returns calendar create (POST /calendars) or calendar update
// (PUT /calendars/{name}, which replaces the calendar whole).
func putCalendar(verb string) func(context.Context, *client, []string, cmdFlags, output) error {
	return func(ctx context.Context, c *client, args []string, f cmdFlags, out output) error {
		method, u := http.MethodPost, c.calendarsEndpoint("")
		var body []byte
		var err error
		if verb == "create" {
			body, err = c.postJSON(ctx, u, f.calendar)
		} else {
			method, u = http.MethodPut, c.calendarsEndpoint(args[0])
			body, err = c.putJSON(ctx, u, f.calendar)
		}
		if err != nil {
			return err
		}
		if printed, err := out.raw(body); printed {
			return err
		}
		var cal calendar
		if err := json.Unmarshal(body, &cal); err != nil || cal.Name == "" {
			return fmt.Errorf("%s %s: the answer is not a calendar (%v): %.200s", method, u, err, body)
		}
		var line string
		if verb == "create" {
			line = fmt.Sprintf("calendar %s created (%s): the tasks that name it (option calendar) skip the fires it excludes, "+
				"on %s now and on the other nodes from their next poll, within about a second", strconv.Quote(cal.Name), rulesText(cal), nodeName(cal.Node))
		} else {
			line = fmt.Sprintf("calendar %s updated (%s): every node judges the fires from %s on by these rules, those before by the old",
				strconv.Quote(cal.Name), rulesText(cal), cal.From.UTC().Format(time.RFC3339Nano))
		}
		_, err = fmt.Fprintln(out.w, line)
		return err
	}
}

func deleteCalendar(ctx context.Context, c *client, args []string, _ cmdFlags, out output) error {
	u := c.calendarsEndpoint(args[0])
	body, err := c.delete(ctx, u)
	if err != nil {
		return err
	}
	if printed, err := out.raw(body); printed {
		return err
	}
	var res calendarAction
	if err := json.Unmarshal(body, &res); err != nil || res.Action != "delete-calendar" {
		return fmt.Errorf("DELETE %s: the answer is not a calendar's deletion (%v): %.200s", u, err, body)
	}
	_, err = fmt.Fprintf(out.w, "calendar %s deleted: no task named it\n", strconv.Quote(args[0]))
	return err
}

// rulesText is a calendar's rules in one line: "dates 2026-12-25,2026-12-26;
// weekdays sat,sun; windows 22:00-06:00; cron 0 12 * * *; include other",
// "no rules" for none.
func rulesText(cal calendar) string {
	var parts []string
	for _, p := range []struct {
		name    string
		entries []string
	}{{"dates", cal.Dates}, {"weekdays", cal.Weekdays}, {"windows", cal.Windows}, {"cron", cal.Cron}, {"include", cal.Include}} {
		if len(p.entries) > 0 {
			parts = append(parts, p.name+" "+strings.Join(p.entries, ","))
		}
	}
	if len(parts) == 0 {
		return "no rules"
	}
	return strings.Join(parts, "; ")
}

// rulesWidth is how many characters of a calendar's rules the RULES cell
// shows; --json shows them whole.
const rulesWidth = 60

func writeCalendars(w io.Writer, cals []calendar) error {
	if len(cals) == 0 {
		_, err := fmt.Fprintln(w, "no calendars")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRULES\tUSED BY\tFROM\tNOTE")
	for _, cal := range cals {
		rules := rulesText(cal)
		if utf8.RuneCountInString(rules) > rulesWidth {
			rules = string([]rune(rules)[:rulesWidth-3]) + "..."
		}
		from := cal.From
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(cal.Name), cell(rules), cell(strings.Join(cal.UsedBy, ", ")), stamp(&from), cell(cal.Note))
	}
	return tw.Flush()
}

// checkNext is the check of next: -n at least 1 (the node bounds it too).
func checkNext(_ []string, f *cmdFlags) error {
	if f.set["n"] && f.n < 1 {
		return fmt.Errorf("next: -n %d: must be at least 1, the instants to list (10 without it)", f.n)
	}
	return nil
}

func showNext(ctx context.Context, c *client, args []string, f cmdFlags, out output) error {
	u := c.endpoint(args[0], "/next")
	if f.set["n"] {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "n=" + strconv.Itoa(f.n)
	}
	var res nextFires
	if printed, err := getJSON(ctx, c, u, out, "a task's next fires", &res); printed || err != nil {
		return err
	}
	return writeNext(out.w, args[0], res)
}

func writeNext(w io.Writer, name string, res nextFires) error {
	if len(res.Fires) == 0 {
		_, err := fmt.Fprintf(w, "%s fires no more: it is completed (past its endAt, its one-off instant or its maxRuns)\n", strconv.Quote(name))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIRE\tSTART\tSKIP\tDST")
	for _, nf := range res.Fires {
		fire, start := nf.Fire, nf.Start
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", stamp(&fire), stamp(&start), cell(nf.Skip), cell(nf.DST))
	}
	return tw.Flush()
}

// listFlag is a repeatable flag: each value as given.
type listFlag []string

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, " ")
}

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
