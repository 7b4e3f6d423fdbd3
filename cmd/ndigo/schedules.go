package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// scheduleFlags are the flags of schedule create and schedule update;
// updateFlags, schedule update's, which may also drop the lock.
var (
	scheduleFlags = []string{"handler", "cron", "lock", "option", "args"}
	updateFlags   = append(slices.Clip(scheduleFlags), "unlocked")
)

// optionList is the repeated --option flag: each KEY=VALUE as given, which
// checkSchedule parses, so that a malformed one is a usage error of its
// own.
type optionList []string

func (o *optionList) String() string {
	if o == nil {
		return ""
	}
	return strings.Join(*o, " ")
}

func (o *optionList) Set(v string) error {
	*o = append(*o, v)
	return nil
}

// checkSchedule returns the check of schedule create or update (verb): the
// name one the API can address; for create, --handler and --cron given; for
// update, some change given, and not both --lock and --unlocked; each
// --option KEY=VALUE with a key of its own, --args one JSON value. It sets
// f.optionMap and f.argsJSON from them.
func checkSchedule(verb string) func(args []string, f *cmdFlags) error {
	return func(args []string, f *cmdFlags) error {
		if err := checkName("schedule", verb, args[0]); err != nil {
			return err
		}
		// --cron is repeatable for a calendar's rules; a schedule has one.
		if len(f.crons) > 1 {
			return fmt.Errorf("schedule %s: --cron is given %d times (%s): a schedule has one cron expression", verb, len(f.crons), strings.Join(f.crons, ", "))
		}
		if len(f.crons) == 1 {
			f.cron = f.crons[0]
		}
		for _, p := range []struct{ name, value, what string }{
			{"handler", f.handler, "the name of a handler the nodes register in code (Scheduler.Handle)"},
			{"cron", f.cron, `the cron expression, such as "0 2 * * *" or "@every 5m"`},
		} {
			switch {
			case verb == "update" && f.set[p.name] && p.value == "":
				return fmt.Errorf("schedule update: --%s is empty: give %s, or leave the flag out to keep the schedule's", p.name, p.what)
			case verb != "update" && p.value == "":
				return fmt.Errorf("schedule %s: --%s is required: %s", verb, p.name, p.what)
			}
		}
		if verb == "update" {
			switch {
			case f.set["lock"] && f.set["unlocked"]:
				return errors.New("schedule update: --lock and --unlocked: give one, --lock KEY to lock the schedule on KEY, --unlocked to drop its lock")
			case f.set["lock"] && f.lock == "":
				return errors.New("schedule update: --lock is empty: give a key, or --unlocked to drop the schedule's lock (every node then runs each fire)")
			case !slices.ContainsFunc(updateFlags, func(fl string) bool { return f.set[fl] }):
				return errors.New("schedule update: nothing to change: give --handler, --cron, --lock or --unlocked, --option or --args; the rest of the schedule is kept")
			}
		}
		for _, kv := range f.options {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case !ok:
				return fmt.Errorf("schedule %s: --option %q: must be KEY=VALUE, a key of the Scheduled tag's, such as --option lockTtl=5m", verb, kv)
			case k == "":
				return fmt.Errorf("schedule %s: --option %q: the key before '=' is empty; want KEY=VALUE, such as --option lockTtl=5m", verb, kv)
			}
			if old, dup := f.optionMap[k]; dup {
				return fmt.Errorf("schedule %s: --option %q: %s is given twice (%s=%s before); give each option once", verb, kv, k, k, old)
			}
			if f.optionMap == nil {
				f.optionMap = map[string]string{}
			}
			f.optionMap[k] = v
		}
		if f.set["args"] {
			if !json.Valid([]byte(f.args)) {
				return fmt.Errorf(`schedule %s: --args %.80q: must be one JSON value, such as --args '{"tenant": "acme"}'`, verb, f.args)
			}
			f.argsJSON = json.RawMessage(f.args)
		}
		return nil
	}
}

// checkDelete is the check of schedule delete.
func checkDelete(args []string, _ *cmdFlags) error {
	return checkName("schedule", "delete", args[0])
}

// checkName refuses the names "." and ".." of a noun ("schedule",
// "calendar"): the node's mux takes /schedules/. and /calendars/.. for dot
// segments, so that no request could update or delete one so named.
func checkName(noun, verb, name string) error {
	if name == "." || name == ".." {
		what := map[string]string{"schedule": "stored schedule"}[noun]
		return fmt.Errorf("%s %s: the name %q cannot be a %s's: /%ss/%s is a dot segment, which no request can update or delete; choose another name",
			noun, verb, name, cmp.Or(what, noun), noun, name)
	}
	return nil
}

func listSchedules(ctx context.Context, c *client, _ []string, _ cmdFlags, out output) error {
	var res scheduleList
	if printed, err := getJSON(ctx, c, c.schedulesEndpoint(""), out, "the schedule list", &res); printed || err != nil {
		return err
	}
	if err := writeSchedules(out.w, res.Schedules); err != nil {
		return err
	}
	var idle []string
	for _, sc := range res.Schedules {
		if sc.Problem != "" {
			idle = append(idle, strconv.Quote(sc.Name))
		}
	}
	if len(idle) > 0 && out.errw != nil {
		// Not an error: the nodes that have the handler run it.
		fmt.Fprintf(out.errw, "ndigo: warning: %s does not run %d of the %d stored schedules (%s): PROBLEM HERE says why\n",
			nodeName(res.Node), len(idle), len(res.Schedules), strings.Join(idle, ", "))
	}
	return nil
}

// putSchedule returns schedule create (POST /schedules) or schedule update
// (verb). An update changes what its flags give and keeps the rest: it reads
// the stored schedule (GET /schedules), changes it, and sends the whole of
// it (PUT /schedules/{name}, which replaces a schedule whole); --option
// KEY=VALUE sets one option, KEY= with no value drops it. Two updates of
// one schedule at once keep the later's whole schedule.
func putSchedule(verb string) func(context.Context, *client, []string, cmdFlags, output) error {
	return func(ctx context.Context, c *client, args []string, f cmdFlags, out output) error {
		req := scheduleRequest{Name: args[0], Handler: f.handler, Cron: f.cron, Lock: f.lock, Options: f.optionMap, Args: f.argsJSON}
		method, u := http.MethodPost, c.schedulesEndpoint("")
		var body []byte
		var err error
		if verb == "create" {
			body, err = c.postJSON(ctx, u, req)
		} else {
			if req, err = updated(ctx, c, args[0], f); err != nil {
				return err
			}
			method, u = http.MethodPut, c.schedulesEndpoint(args[0])
			body, err = c.putJSON(ctx, u, req)
		}
		if err != nil {
			return err
		}
		if printed, err := out.raw(body); printed {
			return err
		}
		var sc schedule
		if err := json.Unmarshal(body, &sc); err != nil || sc.Name == "" {
			return fmt.Errorf("%s %s: the answer is not a schedule (%v): %.200s", method, u, err, body)
		}
		return writeScheduled(out.w, verb, sc)
	}
}

// updated returns the stored schedule name as the node answering lists
// it, with f's changes.
func updated(ctx context.Context, c *client, name string, f cmdFlags) (scheduleRequest, error) {
	var list scheduleList
	if _, err := getJSON(ctx, c, c.schedulesEndpoint(""), output{}, "the schedule list", &list); err != nil {
		return scheduleRequest{}, fmt.Errorf("schedule update: reading the schedule to change: %w", err)
	}
	i := slices.IndexFunc(list.Schedules, func(sc schedule) bool { return sc.Name == name })
	if i < 0 {
		return scheduleRequest{}, fmt.Errorf("schedule update: no stored schedule is named %q (ndigo schedules lists them): create it first", name)
	}
	sc := list.Schedules[i]
	req := scheduleRequest{Name: name, Handler: sc.Handler, Cron: sc.Cron, Lock: sc.Lock, Options: maps.Clone(sc.Options), Args: sc.Args}
	if string(req.Args) == "null" {
		req.Args = nil
	}
	if f.set["handler"] {
		req.Handler = f.handler
	}
	if f.set["cron"] {
		req.Cron = f.cron
	}
	switch {
	case f.set["lock"]:
		req.Lock = f.lock
	case f.unlocked:
		req.Lock = ""
	}
	for k, v := range f.optionMap {
		if v == "" {
			delete(req.Options, k)
			continue
		}
		if req.Options == nil {
			req.Options = map[string]string{}
		}
		req.Options[k] = v
	}
	if f.set["args"] {
		req.Args = f.argsJSON
	}
	return req, nil
}

func deleteSchedule(ctx context.Context, c *client, args []string, _ cmdFlags, out output) error {
	u := c.schedulesEndpoint(args[0])
	body, err := c.delete(ctx, u)
	if err != nil {
		return err
	}
	if printed, err := out.raw(body); printed {
		return err
	}
	var res action
	if err := json.Unmarshal(body, &res); err != nil || res.Action != "delete-schedule" {
		return fmt.Errorf("DELETE %s: the answer is not a schedule's deletion (%v): %.200s", u, err, body)
	}
	_, err = fmt.Fprintf(out.w, "schedule %s deleted: the node answering fires it no more, the other nodes from their next poll, within about a second; a run of it in flight finishes\n",
		strconv.Quote(args[0]))
	return err
}

// writeScheduled writes the line of a schedule created or updated (verb):
// what it is, and when the nodes run it.
func writeScheduled(w io.Writer, verb string, sc schedule) error {
	lock := "unlocked: every node runs each fire"
	if sc.Lock != "" {
		lock = "lock " + strconv.Quote(sc.Lock)
	}
	spec := fmt.Sprintf("handler %s, cron %s, %s", strconv.Quote(sc.Handler), strconv.Quote(sc.Cron), lock)
	if opts := optionsCell(sc.Options); opts != none {
		spec += ", options " + opts
	}
	var line string
	if verb == "create" {
		line = fmt.Sprintf("schedule %s created (%s): it runs from its next fire, on %s now and on the other nodes from their next poll, within about a second",
			strconv.Quote(sc.Name), spec, nodeName(sc.Node))
	} else {
		line = fmt.Sprintf("schedule %s updated (%s): every node runs it from %s on, the old spec's fires before; a run of the old in flight finishes",
			strconv.Quote(sc.Name), spec, sc.From.UTC().Format(time.RFC3339Nano))
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// nodeName names a node of the answer; "the node answering" if it has no
// name.
func nodeName(n string) string {
	if n == "" {
		return "the node answering"
	}
	return cell(n)
}

func writeSchedules(w io.Writer, scs []schedule) error {
	if len(scs) == 0 {
		_, err := fmt.Fprintln(w, "no stored schedules")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHANDLER\tCRON\tLOCK\tOPTIONS\tARGS\tUPDATED\tBY\tPROBLEM HERE")
	for _, sc := range scs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", strings.Join(cells([]string{sc.Name, sc.Handler, sc.Cron, sc.Lock}), "\t"),
			optionsCell(sc.Options), argsCell(sc.Args), stamp(&sc.Updated), cell(sc.Node), cell(sc.Problem))
	}
	return tw.Flush()
}

// optionsCell is the OPTIONS cell of a schedule's options: key=value,
// sorted by key, comma-separated; none if it has none.
func optionsCell(opts map[string]string) string {
	if len(opts) == 0 {
		return none
	}
	kvs := make([]string, 0, len(opts))
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		kvs = append(kvs, k+"="+opts[k])
	}
	return cell(strings.Join(kvs, ","))
}

// argsWidth is how many characters of a schedule's arguments the ARGS cell
// shows; --json shows them whole.
const argsWidth = 40

// argsCell is the ARGS cell of a schedule's arguments: compact JSON, cut
// to argsWidth characters with "..." at the end; none for null.
func argsCell(args json.RawMessage) string {
	if len(args) == 0 {
		return none
	}
	s := string(args)
	var b bytes.Buffer
	if json.Compact(&b, args) == nil {
		s = b.String()
	}
	if s == "null" {
		return none
	}
	if utf8.RuneCountInString(s) > argsWidth {
		s = string([]rune(s)[:argsWidth-3]) + "..."
	}
	return cell(s)
}
