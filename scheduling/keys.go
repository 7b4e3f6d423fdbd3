package scheduling

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ndigo/ndigo/internal/didyoumean"
	"github.com/ndigo/ndigo/internal/durations"
)

// An OptionKey is one key of the options that a task takes by name: the
// keys of package annotations' Scheduled tag, and of a stored schedule's
// options ([Scheduler.CreateSchedule]). [KeyOption] turns a key and its
// value into the option.
type OptionKey struct {
	Key     string // the key, "lockTtl"
	Option  string // the builder option it sets, "LockTTL"
	Default string // what applies without it, in docs/TASKS.md's words
	Meaning string // what it does, in docs/TASKS.md's words
}

// optionKey is an OptionKey and how its value becomes its option.
type optionKey struct {
	OptionKey
	parse func(value string) (Option, error)
}

// optionKeys are the keys, in the documented order. Parsing, the
// unknown-key error with its suggestion, and the options table all derive
// from this one list.
var optionKeys = []optionKey{
	{OptionKey{"cron", "Cron", "required", "5 fields, or 6 with seconds; `@hourly`-style descriptors; `@every 5m` on a grid of multiples since the Unix epoch, the same on every node; `CRON_TZ=Europe/Paris` prefix; `H` in a field (`H`, `H(0-29)`, `H/15`) is a value a hash of the task's name picks, the same on every node, so that tasks on one schedule spread their fires"},
		text(Cron)},
	{OptionKey{"lock", "Lock", "none", "the lock key; the task runs only while its lease is held"}, text(Lock)},
	{OptionKey{"lockWait", "LockWait", "skip", "wait budget for a held lock before skipping the fire (`5s`, or milliseconds: `500`)"},
		duration(LockWait)},
	{OptionKey{"lockWaitStep", "LockWaitStep", "100ms", "poll interval while waiting, at least 1ms (drivers that announce releases wake waiters at once)"},
		duration(LockWaitStep)},
	{OptionKey{"lockTtl", "LockTTL", "60s", "lease duration; must cover the whole run unless `renew` is on; above the driver's minimum (Redis: its drift margin, about 2ms), at most a year, at least 100ms with `renew`"},
		duration(LockTTL)},
	{OptionKey{"maxRunTime", "MaxRunTime", "none", "deadline of the run's context"}, duration(MaxRunTime)},
	{OptionKey{"renew", "Renew", "off", "extend the lease every third of `lockTtl` while the run lasts; a failed extension is retried while the lease lasts"},
		func(v string) (Option, error) {
			on, err := strconv.ParseBool(v)
			switch {
			case err != nil:
				return nil, fmt.Errorf(`must be "true" or "false"`)
			case on:
				return Renew(), nil
			}
			return nil, nil
		}},
	{OptionKey{"catchUp", "CatchUp", "skip", "a fire missed while no node ran: `skip` it, or a window (`1h`, at most 12h): a starting node runs the most recent fire within it, once in the cluster, if no node claimed it; needs `lock`"},
		func(v string) (Option, error) {
			if v == "skip" {
				return CatchUp(0), nil
			}
			d, err := durations.Parse(v)
			if err != nil {
				return nil, fmt.Errorf(`must be "skip" or a window: %w`, err)
			}
			return CatchUp(d), nil
		}},
	{OptionKey{"jitter", "Jitter", "none", "start each fire up to this long after its instant (`30s`), by an offset a hash of the task's name and the instant picks, the same on every node; below the schedule's shortest interval; the fire keeps its instant as its identity"},
		duration(Jitter)},
	{OptionKey{"dst", "DST", "`once,shift`", "what a wall-clock schedule does when clocks change: a wall time they fall back over fires `once` (its first occurrence) or `twice`; one they spring forward over fires at the first instant after the gap (`shift`) or not (`skip`); `twice,skip` sets both"},
		text(DST)},
	{OptionKey{"overlap", "Overlap", "skip", "what a fire does when a run of the task is going in the cluster: `skip` it; `buffer-one`: wait, in the shared task state, and run once the run ends (at most one waits; a later fire is skipped); `cancel-previous`: cancel the run going, on whatever node, then run; `allow`: run beside it, up to `maxConcurrent` at once, each on a slot of the lock with its own token; needs `lock`"},
		text(Overlap)},
	{OptionKey{"maxConcurrent", "MaxConcurrent", "none", "with `overlap:\"allow\"`, how many runs of the task may run at once in the cluster, at most 64; the task must have its lock to itself"},
		count(MaxConcurrent, "runs")},
	{OptionKey{"retry", "Retry", "none", "retry a run that fails (an error, a panic, or cut by Stop) up to this many times per fire, at most 100; each retry is a run of the same fire under the lock, taken by one node from the shared task state (another node runs it if this one dies); a fire due while a retry is pending is skipped; needs `lock`"},
		count(Retry, "retries")},
	{OptionKey{"retryBackoff", "RetryBackoff", "10s", "the backoff before the first retry, doubled for each next one up to `retryMaxBackoff`; each delay is drawn below that backoff (full jitter: from 0) by a hash of the task, the fire and the attempt"},
		duration(RetryBackoff)},
	{OptionKey{"retryMaxBackoff", "RetryMaxBackoff", "100 × `retryBackoff`, at most 24h", "the cap of the doubling backoff; at least `retryBackoff`, at most 24h"},
		duration(RetryMaxBackoff)},
	{OptionKey{"calendar", "Calendar", "none", "calendars whose exclusions the task's fires skip, separated by commas (`eu-holidays,weekends`); kept in the task state and shared by the cluster, evaluated in the task's zone; an excluded fire shows as `excluded: calendar NAME`, never as missed"},
		func(v string) (Option, error) { return Calendar(strings.Split(v, ",")...), nil }},
	{OptionKey{"startAt", "StartAt", "none", "the first instant the task may fire at: RFC 3339 (`2027-01-15T09:00:00Z`), a wall time (`2027-01-15T09:00`) or a date (`2027-01-15`) in the task's zone"},
		text(StartAt)},
	{OptionKey{"endAt", "EndAt", "none", "the task fires only before this, written as `startAt`; past it the task is `completed`"},
		text(EndAt)},
	{OptionKey{"maxRuns", "MaxRuns", "none", "how many runs the task makes in the cluster, counted in the task state whatever nodes die; then it is `completed`; needs `lock`"},
		count(MaxRuns, "runs")},
	{OptionKey{"pauseAfterFailures", "PauseAfterFailures", "never", "pause the task in the cluster after this many failed fires in a row, with a note that says so"},
		count(PauseAfterFailures, "failures")},
	{OptionKey{"lateAfter", "LateAfter", "the audit's lag: `lockWait`, the longest run unrecorded, 1m", "the grace of a fire for the task's health: a fire not started this long after its instant makes the task `late`; a run is recorded when it ends, so a grace shorter than a run shows it late on the nodes that do not run it"},
		duration(LateAfter)},
	{OptionKey{"downAfter", "DownAfter", "3 fires late", "the task is `down` once a fire due since its last run started has not started for this long (and is past its grace); at least `lateAfter`"},
		duration(DownAfter)},
	{OptionKey{"failingAfter", "FailingAfter", "1", "the task is `failing` once its newest fires that ran, this many of them, all failed (an error, a panic)"},
		count(FailingAfter, "fires")},
	{OptionKey{"runBudget", "RunBudget", "none", "the task is `overrun` while a run has gone on for longer than this (on the node running it; on every node once its record lands); below `maxRunTime`"},
		duration(RunBudget)},
	{OptionKey{"name", "Name", "`Type.Method`", "the task's name in logs, metrics and the registry, and the key of its fire claims; `Type` is the type that declares the method (an embedded base for a promoted method); required for a func literal, whose generated name changes when code moves"},
		text(Name)},
}

func text(set func(string) Option) func(string) (Option, error) {
	return func(v string) (Option, error) { return set(v), nil }
}

// count parses a whole number of what for set.
func count(set func(int) Option, what string) func(string) (Option, error) {
	return func(v string) (Option, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("must be a whole number of %s (`3`)", what)
		}
		return set(n), nil
	}
}

func duration(set func(time.Duration) Option) func(string) (Option, error) {
	return func(v string) (Option, error) {
		d, err := durations.Parse(v)
		if err != nil {
			return nil, err
		}
		return set(d), nil
	}
}

// OptionKeys returns the keys of the options that a task takes by name, in
// the documented order.
func OptionKeys() []OptionKey {
	out := make([]OptionKey, len(optionKeys))
	for i, k := range optionKeys {
		out[i] = k.OptionKey
	}
	return out
}

// KeyOption returns the option that key sets to value, as the Scheduled tag
// and a stored schedule's options take it ("lockTtl", "5m"): nil for
// renew "false"; for a value that key does not take, or a key that is not
// one of [OptionKeys], an option that fails the task's validation, naming
// the key, the value and the rule (and the closest key, for a misspelt
// one).
func KeyOption(key, value string) Option {
	for _, k := range optionKeys {
		if k.Key != key {
			continue
		}
		o, err := k.parse(value)
		if err != nil {
			return invalid(key, value, err.Error())
		}
		return o
	}
	return invalid(key, value, unknownKey(key, nil))
}

// unknownKey is the rule of a key that is none of the option keys nor of
// extra.
func unknownKey(key string, extra []string) string {
	names := extra
	for _, k := range optionKeys {
		names = append(names, k.Key)
	}
	if s := didyoumean.Closest(key, names); s != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", s)
	}
	return "unknown key; known keys are " + strings.Join(names, ", ")
}
