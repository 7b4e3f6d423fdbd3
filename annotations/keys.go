package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ndigo/ndigo/internal/didyoumean"
	"github.com/ndigo/ndigo/scheduling"
)

// A tagKey is one key of the Scheduled tag: the builder option it sets,
// its default and meaning (docs/TASKS.md's options table is checked against
// them), and how its value becomes that option.
type tagKey struct {
	key, option, def, meaning string
	// parse turns the value into the option; nil for method, which binds
	// the func instead.
	parse func(value string) (scheduling.Option, error)
}

// tagKeys are the Scheduled tag's keys, in the documented order. Parsing,
// the unknown-key error with its suggestion, and the options table all
// derive from this one list.
var tagKeys = []tagKey{
	{"method", "(the func you pass)", "required", "the method to run: `func(context.Context) error`", nil},
	{"cron", "Cron", "required", "5 fields, or 6 with seconds; `@hourly`-style descriptors; `@every 5m` on a grid of multiples since the Unix epoch, the same on every node; `CRON_TZ=Europe/Paris` prefix; `H` in a field (`H`, `H(0-29)`, `H/15`) is a value a hash of the task's name picks, the same on every node, so that tasks on one schedule spread their fires",
		text(scheduling.Cron)},
	{"lock", "Lock", "none", "the lock key; the task runs only while its lease is held", text(scheduling.Lock)},
	{"lockWait", "LockWait", "skip", "wait budget for a held lock before skipping the fire (`5s`, or milliseconds: `500`)",
		duration(scheduling.LockWait)},
	{"lockWaitStep", "LockWaitStep", "100ms", "poll interval while waiting, at least 1ms (drivers that announce releases wake waiters at once)",
		duration(scheduling.LockWaitStep)},
	{"lockTtl", "LockTTL", "60s", "lease duration; must cover the whole run unless `renew` is on; above the driver's minimum (Redis: its drift margin, about 2ms), at most a year, at least 100ms with `renew`",
		duration(scheduling.LockTTL)},
	{"maxRunTime", "MaxRunTime", "none", "deadline of the run's context", duration(scheduling.MaxRunTime)},
	{"renew", "Renew", "off", "extend the lease every third of `lockTtl` while the run lasts; a failed extension is retried while the lease lasts",
		func(v string) (scheduling.Option, error) {
			on, err := strconv.ParseBool(v)
			switch {
			case err != nil:
				return nil, fmt.Errorf(`must be "true" or "false"`)
			case on:
				return scheduling.Renew(), nil
			}
			return nil, nil
		}},
	{"catchUp", "CatchUp", "skip", "a fire missed while no node ran: `skip` it, or a window (`1h`, at most 12h): a starting node runs the most recent fire within it, once in the cluster, if no node claimed it; needs `lock`",
		func(v string) (scheduling.Option, error) {
			if v == "skip" {
				return scheduling.CatchUp(0), nil
			}
			d, err := ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf(`must be "skip" or a window: %w`, err)
			}
			return scheduling.CatchUp(d), nil
		}},
	{"jitter", "Jitter", "none", "start each fire up to this long after its instant (`30s`), by an offset a hash of the task's name and the instant picks, the same on every node; below the schedule's shortest interval; the fire keeps its instant as its identity",
		duration(scheduling.Jitter)},
	{"dst", "DST", "`once,shift`", "what a wall-clock schedule does when clocks change: a wall time they fall back over fires `once` (its first occurrence) or `twice`; one they spring forward over fires at the first instant after the gap (`shift`) or not (`skip`); `twice,skip` sets both",
		text(scheduling.DST)},
	{"overlap", "Overlap", "skip", "what a fire does when a run of the task is going in the cluster: `skip` it; `buffer-one`: wait, in the shared task state, and run once the run ends (at most one waits; a later fire is skipped); `cancel-previous`: cancel the run going, on whatever node, then run; `allow`: run beside it, up to `maxConcurrent` at once, each on a slot of the lock with its own token; needs `lock`",
		text(scheduling.Overlap)},
	{"maxConcurrent", "MaxConcurrent", "none", "with `overlap:\"allow\"`, how many runs of the task may run at once in the cluster, at most 64; the task must have its lock to itself",
		count(scheduling.MaxConcurrent, "runs")},
	{"retry", "Retry", "none", "retry a run that fails (an error, a panic, or cut by Stop) up to this many times per fire, at most 100; each retry is a run of the same fire under the lock, taken by one node from the shared task state (another node runs it if this one dies); a fire due while a retry is pending is skipped; needs `lock`",
		count(scheduling.Retry, "retries")},
	{"retryBackoff", "RetryBackoff", "10s", "the backoff before the first retry, doubled for each next one up to `retryMaxBackoff`; each delay is drawn below that backoff (full jitter: from 0) by a hash of the task, the fire and the attempt",
		duration(scheduling.RetryBackoff)},
	{"retryMaxBackoff", "RetryMaxBackoff", "100 × `retryBackoff`, at most 24h", "the cap of the doubling backoff; at least `retryBackoff`, at most 24h",
		duration(scheduling.RetryMaxBackoff)},
	{"name", "Name", "`Type.Method`", "the task's name in logs, metrics and the registry, and the key of its fire claims; `Type` is the type that declares the method (an embedded base for a promoted method); required for a func literal, whose generated name changes when code moves",
		text(scheduling.Name)},
}

func text(set func(string) scheduling.Option) func(string) (scheduling.Option, error) {
	return func(v string) (scheduling.Option, error) { return set(v), nil }
}

// count parses a whole number of what for set.
func count(set func(int) scheduling.Option, what string) func(string) (scheduling.Option, error) {
	return func(v string) (scheduling.Option, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("must be a whole number of %s (`3`)", what)
		}
		return set(n), nil
	}
}

func duration(set func(time.Duration) scheduling.Option) func(string) (scheduling.Option, error) {
	return func(v string) (scheduling.Option, error) {
		d, err := ParseDuration(v)
		if err != nil {
			return nil, err
		}
		return set(d), nil
	}
}

// keyNames returns the tag keys' names, in order.
func keyNames() []string {
	names := make([]string, len(tagKeys))
	for i, k := range tagKeys {
		names[i] = k.key
	}
	return names
}

// option turns one tag pair into a scheduling option: nil for method and
// for renew:"false", a declaration error for a bad value or unknown key.
func option(p tagPair) scheduling.Option {
	for _, k := range tagKeys {
		if k.key != p.key {
			continue
		}
		if k.parse == nil {
			return nil
		}
		o, err := k.parse(p.value)
		if err != nil {
			return invalid(p.key, p.value, err.Error())
		}
		return o
	}
	rule := "unknown tag key; known keys are " + strings.Join(keyNames(), ", ")
	if s := didyoumean.Closest(p.key, keyNames()); s != "" {
		rule = fmt.Sprintf("unknown tag key; did you mean %q?", s)
	}
	return invalid(p.key, p.value, rule)
}

// optionsTable returns the Markdown table of the tag keys that docs/TASKS.md
// shows.
func optionsTable() string {
	var b strings.Builder
	b.WriteString("| tag key | builder option | default | meaning |\n|---|---|---|---|\n")
	for _, k := range tagKeys {
		opt := k.option
		if k.parse != nil {
			opt = "`" + opt + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.key, opt, k.def, k.meaning)
	}
	return b.String()
}
