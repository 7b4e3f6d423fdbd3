// Command ndigo controls the scheduled tasks of a cluster of ndigo nodes
// through any one node's admin endpoints:
//
//	ndigo tasks          every task: cron, lock, next fire, paused, the last run in the cluster, a retry due, its backfill
//	ndigo runs NAME      the task's last recorded fires, cluster-wide, newest first, with their attempts
//	ndigo audit NAME     each instant of the task's schedule: ran, skipped, failed, missed
//	ndigo run NAME       one node runs the task once, as soon as it can, under its lock
//	ndigo pause NAME     every node skips the task's fires until it is resumed
//	ndigo resume NAME    the task runs again from its next fire
//	ndigo backfill NAME --from TIME --to TIME [--force] [--overlap POLICY] [--wait]
//	                     the task runs once for each instant of its schedule in the range, in order
//	ndigo backfill NAME --cancel
//	                     its running backfill stops: no node takes its next instant
//	ndigo schedules      the stored schedules (tasks declared at runtime) as the node sees them, and why it does not run one
//	ndigo schedule create NAME --handler HANDLER --cron EXPR [--lock KEY] [--option KEY=VALUE ...] [--args JSON]
//	                     every node with the handler runs the task from its next fire (the others from their next poll)
//	ndigo schedule update NAME [--handler HANDLER] [--cron EXPR] [--lock KEY | --unlocked] [--option KEY=VALUE ...] [--args JSON]
//	                     what the flags give changes, the rest of the stored schedule is kept
//	ndigo schedule delete NAME
//	                     no node fires the stored schedule from its next poll
//	ndigo next NAME [-n 10]
//	                     the task's next instants: each one's start, the calendar that excludes it, its DST note
//	ndigo calendars      the calendars (named exclusions that tasks name), their rules and what names them
//	ndigo calendar create NAME [--date DATE ...] [--weekday DAY ...] [--window WINDOW ...] [--cron EXPR ...] [--include CALENDAR ...] [--note TEXT]
//	ndigo calendar create NAME --file CALENDAR.json
//	                     the tasks that name the calendar skip the fires it excludes, on every node from its next poll
//	ndigo calendar update NAME (the same flags, or --file)
//	                     the calendar is replaced whole
//	ndigo calendar delete NAME
//	                     refused while a task or a calendar names it
//
// --admin URL (or NDIGO_ADMIN) names the node's admin address, by default
// http://127.0.0.1:8081. run, pause, resume, backfill and the schedule and
// calendar commands send the bearer token in NDIGO_ADMIN_TOKEN: it is read from the
// environment only, so that it stays out of shell history and process
// listings, and its leading and trailing whitespace is dropped, as the node
// drops its own (a token read from a file works for both). --json prints
// the server's JSON instead of a table. A failure exits with status 1 and
// the server's message; a usage error with status 2; an audit that found a
// missed fire with status 3, so that a cron job or a probe can alert on it;
// backfill --wait, which draws the backfill's progress on stderr until it
// ends, exits 0 when it is done and 4 when it was cancelled.
//
// Install it from a clone of ndigo with
//
//	go install ./cmd/ndigo
//
// (once the module is published: go install github.com/ndigo/ndigo/cmd/ndigo@latest).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

// Exit statuses: a failure of the request, a usage error, missed fires,
// a backfill waited for that was cancelled.
const (
	exitFailure   = 1
	exitUsage     = 2
	exitMissed    = 3
	exitCancelled = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, reads NDIGO_ADMIN and
// NDIGO_ADMIN_TOKEN through getenv, writes results to stdout and errors to
// stderr, and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ndigo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	admin := fs.String("admin", "", "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	var f cmdFlags
	fs.StringVar(&f.from, "from", "", "")
	fs.StringVar(&f.to, "to", "", "")
	fs.BoolVar(&f.force, "force", false, "")
	fs.StringVar(&f.overlap, "overlap", "", "")
	fs.BoolVar(&f.wait, "wait", false, "")
	fs.DurationVar(&f.poll, "poll", defaultPoll, "")
	fs.BoolVar(&f.cancel, "cancel", false, "")
	fs.StringVar(&f.handler, "handler", "", "")
	fs.Var(&f.crons, "cron", "")
	fs.Var(&f.dates, "date", "")
	fs.Var(&f.weekdays, "weekday", "")
	fs.Var(&f.windows, "window", "")
	fs.Var(&f.includes, "include", "")
	fs.StringVar(&f.note, "note", "", "")
	fs.StringVar(&f.file, "file", "", "")
	fs.IntVar(&f.n, "n", 0, "")
	fs.Int64Var(&f.after, "after", 0, "")
	fs.StringVar(&f.lock, "lock", "", "")
	fs.BoolVar(&f.unlocked, "unlocked", false, "")
	fs.Var(&f.options, "option", "")
	fs.StringVar(&f.args, "args", "", "")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) || (err == nil && len(pos) > 0 && pos[0] == "help") {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		return usageError(stderr, err.Error())
	}
	if len(pos) == 0 {
		return usageError(stderr, "no command given")
	}
	name := pos[0]
	verbs := map[string]string{"schedule": scheduleVerbs, "calendar": calendarVerbs}
	if v, ok := verbs[name]; ok {
		if len(pos) == 1 {
			return usageError(stderr, name+" takes a verb, "+v+", and the "+name+"'s name")
		}
		name, pos = name+" "+pos[1], pos[1:]
	}
	cmd, ok := commands[name]
	if !ok {
		if noun, _, _ := strings.Cut(name, " "); verbs[noun] != "" && strings.Contains(name, " ") {
			return usageError(stderr, fmt.Sprintf("unknown command %q: the verbs of %s are %s", name, noun, verbs[noun]))
		}
		return usageError(stderr, fmt.Sprintf("unknown command %q: %s", name, unknownCommand))
	}
	noun := cmd.noun
	if noun == "" {
		noun = "task"
	}
	if len(pos)-1 != cmd.args {
		want := "no argument"
		if cmd.args == 1 {
			want = "one argument, the " + noun + "'s name"
		}
		return usageError(stderr, fmt.Sprintf("%s takes %s, got %d", name, want, len(pos)-1))
	}
	if cmd.args == 1 && pos[1] == "" {
		return usageError(stderr, fmt.Sprintf("%s: the %s name is empty", name, noun))
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	for _, fl := range ownFlags {
		if f.set[fl] && !slices.Contains(cmd.flags, fl) {
			return usageError(stderr, fmt.Sprintf("--%s is a flag of %s, not of %s", fl, flagOwners(fl), name))
		}
	}
	if cmd.check != nil {
		if err := cmd.check(pos[1:], &f); err != nil {
			return usageError(stderr, err.Error())
		}
	}
	if *timeout <= 0 {
		return usageError(stderr, fmt.Sprintf("--timeout %v: must be positive", *timeout))
	}
	addr, source := *admin, "--admin"
	if addr == "" {
		addr, source = getenv("NDIGO_ADMIN"), "NDIGO_ADMIN"
	}
	if addr == "" {
		addr, source = defaultAdmin, "the default admin address"
	}
	base, err := parseAdmin(addr)
	if err != nil {
		return usageError(stderr, fmt.Sprintf("%s %q: %v", source, addr, err))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	// As the node does with its own: a token read from a file keeps its
	// final newline, which no header can carry.
	raw := getenv("NDIGO_ADMIN_TOKEN")
	token := strings.Trim(raw, tokenSpace)
	switch {
	case !cmd.sendToken || token == raw:
	case token == "":
		fmt.Fprintln(stderr, "ndigo: NDIGO_ADMIN_TOKEN is only whitespace: sending no token")
	default:
		fmt.Fprintln(stderr, "ndigo: NDIGO_ADMIN_TOKEN has leading or trailing whitespace (such as a file's final newline): sending the token without it")
	}
	c := &client{base: base, token: token, user: getenv("USER"), http: &http.Client{Transport: tr, Timeout: *timeout}}
	if err := cmd.do(ctx, c, pos[1:], f, output{w: stdout, errw: stderr, json: *asJSON}); err != nil {
		fmt.Fprintf(stderr, "ndigo: %v\n", err)
		switch {
		case errors.Is(err, errMissed):
			return exitMissed
		case errors.Is(err, errBackfillCancelled):
			return exitCancelled
		}
		return exitFailure
	}
	return 0
}

// parseInterleaved parses fs's flags wherever they stand among args, as in
// "ndigo runs Payroll.Close --json", and returns the other arguments in
// order; every argument after "--" is not a flag.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageHint is the line after a usage error: the error says what was wrong,
// and the whole help (ndigo help) is a command away, not sixty lines of it
// pushing the error off the screen.
const usageHint = "run 'ndigo help' for the commands and their flags"

func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "ndigo: %s\n%s\n", msg, usageHint)
	return exitUsage
}
