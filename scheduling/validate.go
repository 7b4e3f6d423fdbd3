package scheduling

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ndigo/ndigo/locks"
)

// declared is what a task's options record, before validation and
// defaults ([Spec] is the result). Pointer fields distinguish "not set"
// from a zero value, so that a lock option given without a lock is
// reported. The opt tags name the options in problems; optionErrors checks
// each field's own rules.
type declared struct {
	Cron         string         `opt:"cron"`
	Lock         *string        `opt:"lock"`
	LockWait     *time.Duration `opt:"lockWait"`
	LockWaitStep *time.Duration `opt:"lockWaitStep"`
	LockTTL      *time.Duration `opt:"lockTtl"`
	MaxRunTime   *time.Duration `opt:"maxRunTime"`
	Renew        bool           `opt:"renew"`
	CatchUp      *time.Duration `opt:"catchUp"`
	Jitter       *time.Duration `opt:"jitter"`
	DST          *string        `opt:"dst"`
	Retry        *int           `opt:"retry"`
	RetryBackoff *time.Duration `opt:"retryBackoff"`
	RetryMax     *time.Duration `opt:"retryMaxBackoff"`
	Overlap      *string        `opt:"overlap"`
	MaxConc      *int           `opt:"maxConcurrent"`
	Calendars    *string        `opt:"calendar"`
	StartAt      *string        `opt:"startAt"`
	EndAt        *string        `opt:"endAt"`
	MaxRuns      *int           `opt:"maxRuns"`
	PauseAfter   *int           `opt:"pauseAfterFailures"`
	LateAfter    *time.Duration `opt:"lateAfter"`
	DownAfter    *time.Duration `opt:"downAfter"`
	FailingAfter *int           `opt:"failingAfter"`
	RunBudget    *time.Duration `opt:"runBudget"`
	Name         *string        `opt:"name"`
}

// A Problem is one thing wrong with one task's spec.
type Problem struct {
	Task   string // the task's name
	Type   string // the controller type; "" for a plain func
	Method string // the method, or the function's name
	Option string // the option, named as in struct tags: cron, lock, lockTtl, ...
	Value  string // the option's value as given
	From   string // where Value came from if a tag's placeholder supplied it: "${payroll.cron}, set by env APP_PAYROLL_CRON"
	Rule   string // what the value breaks
}

// String formats p as one line naming the task, the option, the value,
// where the value came from if not from the tag itself, and the rule.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.Type != "":
		fmt.Fprintf(&b, "%s.%s", p.Type, p.Method)
	case p.Method != "":
		b.WriteString(p.Method)
	default:
		fmt.Fprintf(&b, "task %q", p.Task)
	}
	if full := p.Type + "." + p.Method; p.Method != "" && p.Task != "" && p.Task != full && p.Task != p.Method {
		fmt.Fprintf(&b, " (task %q)", p.Task)
	}
	fmt.Fprintf(&b, ": option %s", p.Option)
	if p.Value != "" {
		fmt.Fprintf(&b, " = %q", p.Value)
	}
	if p.From != "" {
		fmt.Fprintf(&b, " (from %s)", p.From)
	}
	fmt.Fprintf(&b, ": %s", p.Rule)
	return b.String()
}

// A ValidationError lists every problem found in a set of task specs. It
// wraps ErrInvalidSpec.
type ValidationError struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d problem", ErrInvalidSpec, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns ErrInvalidSpec.
func (e *ValidationError) Unwrap() error { return ErrInvalidSpec }

// Validate checks tasks as a scheduler would when they are added (except for
// the lock driver, which only a scheduler knows) and returns a
// *ValidationError listing every problem, or nil.
func Validate(tasks ...Task) error {
	return validateTasks(tasks, nil, lockRules{claims: true, state: true}, newParseCache(nil, len(tasks)))
}

// lockRules is what a scheduler's driver asks of locked tasks. The zero
// value is a scheduler without a driver.
type lockRules struct {
	driver locks.Driver  // nil: no driver; Validate checks as if there were one
	claims bool          // the driver keeps fire claims (locks.Claimer)
	minTTL time.Duration // every lock TTL must exceed it (locks.MinTTLer)
	state  bool          // the scheduler has a task state store, where retries wait
	// locked holds, by lock key, a task of the scheduler on it.
	locked map[string]lockUser
}

// A lockUser is a task on a lock key, for the rule that a task with
// overlap allow has its key to itself.
type lockUser struct {
	task  string
	allow bool
}

// An optionError is an option that breaks a rule of its own (optionErrors).
type optionError struct {
	option string // as in declared's opt tags
	rule   string // required, cronexpr, min (not empty), gt, gte, or excluded_without
	param  string // excluded_without's: the option it needs, Lock or Retry
	value  any    // the option's value
}

// optionErrors checks each option of d against its own rules, in d's
// field order, and returns the first rule that each option breaks: the
// expression is required and must parse, a lock or name given must not be
// empty, lock durations need a lock and retry backoffs a retry, and
// durations and counts must not be negative (positive where zero means
// nothing).
func optionErrors(d *declared, cache *parseCache) []optionError {
	var errs []optionError
	fail := func(option, rule, param string, value any) {
		errs = append(errs, optionError{option, rule, param, value})
	}
	if d.Cron == "" {
		fail("cron", "required", "", d.Cron)
	} else if _, err := cache.parse(d.Cron); err != nil {
		fail("cron", "cronexpr", "", d.Cron)
	}
	if d.Lock != nil && *d.Lock == "" {
		fail("lock", "min", "", *d.Lock)
	}
	// dur checks an option given (p not nil): it needs the option named
	// need if that one is not given, and must be positive (gt) or not
	// negative (gte).
	dur := func(option string, p *time.Duration, need string, needed bool, rule string) {
		switch {
		case p == nil:
		case need != "" && !needed:
			fail(option, "excluded_without", need, *p)
		case rule == "gt" && *p <= 0, rule == "gte" && *p < 0:
			fail(option, rule, "", *p)
		}
	}
	locked, retried := d.Lock != nil, d.Retry != nil
	dur("lockWait", d.LockWait, "Lock", locked, "gte")
	dur("lockWaitStep", d.LockWaitStep, "Lock", locked, "gt")
	dur("lockTtl", d.LockTTL, "Lock", locked, "gt")
	dur("maxRunTime", d.MaxRunTime, "", true, "gt")
	if d.Renew && !locked {
		fail("renew", "excluded_without", "Lock", d.Renew)
	}
	dur("catchUp", d.CatchUp, "", true, "gte")
	dur("jitter", d.Jitter, "", true, "gte")
	if d.Retry != nil && *d.Retry < 0 {
		fail("retry", "gte", "", *d.Retry)
	}
	dur("retryBackoff", d.RetryBackoff, "Retry", retried, "gt")
	dur("retryMaxBackoff", d.RetryMax, "Retry", retried, "gt")
	if d.MaxConc != nil && *d.MaxConc <= 0 {
		fail("maxConcurrent", "gt", "", *d.MaxConc)
	}
	if d.Name != nil && *d.Name == "" {
		fail("name", "min", "", *d.Name)
	}
	return errs
}

// A parseCache parses each distinct cron expression of one validation once,
// and keeps the schedules for the scheduler to run. Schedules are immutable,
// so tasks with the same expression share one.
type parseCache struct {
	loc *time.Location
	m   map[string]parsed
}

type parsed struct {
	s   schedule
	err error
}

// newParseCache returns a cache for about n expressions.
func newParseCache(loc *time.Location, n int) *parseCache {
	return &parseCache{loc: loc, m: make(map[string]parsed, n)}
}

func (c *parseCache) parse(expr string) (schedule, error) {
	p, ok := c.m[expr]
	if !ok {
		p.s, p.err = parseSchedule(expr, c.loc)
		c.m[expr] = p
	}
	return p.s, p.err
}

// parseFor is parse for the task named name with DST policy dst ("" for
// the default): its H items resolved from a hash of the name (see
// resolveH), the policy applied.
func (c *parseCache) parseFor(expr, name, dst string) (schedule, error) {
	if hasH(expr) {
		var err error
		if expr, err = resolveH(expr, name); err != nil {
			return nil, err
		}
	}
	s, err := c.parse(expr)
	if err != nil || dst == "" {
		return s, err
	}
	p, err := parseDST(dst)
	if err != nil {
		return nil, err
	}
	return withDST(s, p), nil
}

// validateTasks checks every task and returns a *ValidationError listing all
// problems. taken, if not nil, reports the names already in use. Locked tasks are checked
// against the driver's rules. Parsed schedules are left in cache.
func validateTasks(tasks []Task, taken func(string) bool, rules lockRules, cache *parseCache) error {
	var problems []Problem
	names := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		add := func(p Problem) {
			p.Task, p.Type, p.Method = t.Name(), t.typ, t.method
			if p.From == "" {
				p.From = t.from[p.Option]
			}
			problems = append(problems, p)
		}
		// An option the spec reader could not read is reported once, as
		// it was declared; the rules that depend on it (it is required,
		// other options need it) are not checked on its absence. An
		// unreadable tag leaves every option unknown.
		unread := map[string]bool{}
		for _, p := range t.problems {
			add(p)
			unread[p.Option] = true
		}
		depends := func(oe optionError) bool {
			return unread["tag"] || unread[oe.option] || (oe.rule == "excluded_without" && unread["lock"])
		}
		if t.fn == nil {
			add(Problem{Option: "func", Rule: "must not be nil"})
		}
		for _, oe := range optionErrors(&t.decl, cache) {
			if !depends(oe) {
				add(Problem{Option: oe.option, Value: optionValue(oe.value), Rule: ruleText(cache, t.decl, oe)})
			}
		}
		if t.decl.Lock != nil {
			for _, p := range rules.check(t.Spec()) {
				add(p)
			}
			if n := len(*t.decl.Lock); n > locks.MaxKeyLen {
				add(Problem{Option: "lock", Value: cut(*t.decl.Lock), Rule: fmt.Sprintf("is %d bytes, over locks.MaxKeyLen (%d): "+
					"every driver refuses it", n, locks.MaxKeyLen)})
			}
			if n := len(fireKey(t.Name())); n > locks.MaxKeyLen {
				add(Problem{Option: "name", Value: cut(t.Name()), Rule: fmt.Sprintf("makes a %d-byte fire claim key (\"@\" and the name), "+
					"over locks.MaxKeyLen (%d): every driver refuses it", n, locks.MaxKeyLen)})
			}
		}
		// With defaults applied, as the scheduler will run it.
		if s := t.Spec(); t.decl.Lock != nil && !s.Renew && s.MaxRunTime > 0 && s.LockTTL > 0 && s.MaxRunTime > s.LockTTL {
			add(Problem{Option: "maxRunTime", Value: s.MaxRunTime.String(), Rule: fmt.Sprintf("must not exceed lockTtl (%s) unless renew is on: "+
				"a run that outlasts its lease lets another node run the same fire", s.LockTTL)})
		}
		if c := t.decl.CatchUp; c != nil && *c > 0 && !unread["catchUp"] {
			switch {
			case *c > MaxCatchUp:
				add(Problem{Option: "catchUp", Value: c.String(), Rule: fmt.Sprintf("must not exceed %v (scheduling.MaxCatchUp): "+
					"a missed fire must still be claimable when the cluster comes back", MaxCatchUp)})
			case t.decl.Lock == nil && !unread["lock"]:
				add(Problem{Option: "catchUp", Value: c.String(), Rule: "needs lock: a missed fire is caught up by the node " +
					"that claims it, and only a locked task's fires are claimed"})
			}
		}
		if n := t.decl.Retry; n != nil && *n > 0 && !unread["retry"] {
			for _, p := range rules.checkRetry(t.Spec(), t.decl.Lock != nil || unread["lock"]) {
				add(p)
			}
		}
		for _, p := range rules.checkOverlap(t.decl, t.Spec(), unread) {
			add(p)
		}
		for _, p := range vocabularyProblems(t.decl, unread, rules, cache.loc) {
			add(p)
		}
		for _, p := range healthProblems(t.decl, unread, rules) {
			add(p)
		}
		if d := t.decl.DST; d != nil && !unread["dst"] {
			if _, err := parseDST(*d); err != nil {
				add(Problem{Option: "dst", Value: *d, Rule: "must be once or twice, shift or skip, or one of each (\"twice,skip\"): it " + err.Error()})
			}
		}
		if j := t.decl.Jitter; j != nil && *j > 0 && !unread["jitter"] && !unread["cron"] {
			if sched, err := cache.parseFor(t.decl.Cron, t.Name(), ""); err == nil {
				switch gap := shortestGap(sched, time.Now()); {
				case *j > MaxJitter:
					add(Problem{Option: "jitter", Value: j.String(), Rule: fmt.Sprintf("must not exceed %v (scheduling.MaxJitter): "+
						"a fire must still be claimable when it starts", MaxJitter)})
				case gap > 0 && *j >= gap:
					add(Problem{Option: "jitter", Value: j.String(), Rule: fmt.Sprintf("must be below the schedule's shortest interval (%v): "+
						"a fire must start before the next one is due", gap)})
				}
			}
		}
		if t.decl.Name == nil && t.fn != nil && t.typ == "" && funcLiteral.MatchString(t.method) {
			add(Problem{Option: "name", Value: t.Name(), Rule: "must be set (Name option) for a func literal: its generated name changes when code moves, " +
				"and it names the task in logs, metrics and the fire claims that nodes running different builds must share"})
		}
		if s := t.Spec(); s.Lock != "" {
			if u, ok := rules.locked[s.Lock]; ok && (u.allow || s.Overlap == OverlapAllow) {
				add(Problem{Option: "lock", Value: s.Lock, Rule: fmt.Sprintf("is also the lock of task %s: a task with overlap allow must have its lock "+
					"to itself, as its runs hold the key's slots, not the key", u.task)})
			} else if !ok {
				if rules.locked == nil {
					rules.locked = map[string]lockUser{}
				}
				rules.locked[s.Lock] = lockUser{t.Name(), s.Overlap == OverlapAllow}
			}
		}
		name := t.Name()
		if names[name] || taken != nil && taken(name) {
			add(Problem{Option: "name", Value: name, Rule: "must be unique within the scheduler; set a distinct name with Name or the name tag"})
		}
		names[name] = true
	}
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: problems}
}

// funcLiteral matches the generated names of func literals: "pkg.F.func1",
// or "pkg.F.g.2" for one inlined from g.
var funcLiteral = regexp.MustCompile(`\.func\d+(\.|$)|\.\d+$`)

// check returns the problems of a locked spec (defaults applied) under
// these rules.
func (r lockRules) check(s Spec) []Problem {
	if !r.claims {
		rule := "needs a lock driver, and the scheduler has none (provide a locks.Driver, e.g. locks.Module); a locked task never runs unguarded"
		if r.driver != nil {
			rule = fmt.Sprintf("needs a driver that keeps fire claims (locks.Claimer), and %T keeps none: "+
				"a driver wrapper must implement Claim or unwrap to its driver with Unwrap() locks.Driver", r.driver)
		}
		return []Problem{{Option: "lock", Value: s.Lock, Rule: rule}}
	}
	var ps []Problem
	ttl := s.LockTTL.String()
	switch {
	case s.LockTTL > locks.MaxTTL:
		ps = append(ps, Problem{Option: "lockTtl", Value: ttl, Rule: fmt.Sprintf("must not exceed %v (locks.MaxTTL)", locks.MaxTTL)})
	case s.LockTTL <= 0: // reported by the spec's own rules
	case s.LockTTL <= r.minTTL:
		ps = append(ps, Problem{Option: "lockTtl", Value: ttl,
			Rule: fmt.Sprintf("must exceed the lock driver's minimum lease TTL (%v): a shorter lease is over before the task starts", r.minTTL)})
	case s.Renew && s.LockTTL < MinRenewTTL:
		ps = append(ps, Problem{Option: "lockTtl", Value: ttl,
			Rule: fmt.Sprintf("must be at least %v with renew: renewals run every third of it", MinRenewTTL)})
	}
	if s.LockWaitStep > 0 && s.LockWaitStep < MinLockWaitStep {
		ps = append(ps, Problem{Option: "lockWaitStep", Value: s.LockWaitStep.String(),
			Rule: fmt.Sprintf("must be at least %v: a waiter asks the driver once per step", MinLockWaitStep)})
	}
	return ps
}

// checkOverlap returns the problems of a task's overlap policy, under
// these rules.
func (r lockRules) checkOverlap(d declared, s Spec, unread map[string]bool) []Problem {
	var ps []Problem
	if d.Overlap != nil && !unread["overlap"] {
		switch p := *d.Overlap; {
		case !validOverlap(p):
			ps = append(ps, Problem{Option: "overlap", Value: p, Rule: "must be skip, buffer-one, cancel-previous or allow"})
		case p != OverlapSkip && d.Lock == nil && !unread["lock"]:
			ps = append(ps, Problem{Option: "overlap", Value: p, Rule: "needs lock: the policy applies to the runs of the cluster, " +
				"which only a locked task's lock makes one"})
		case (p == OverlapBufferOne || p == OverlapCancelPrevious) && !r.state:
			ps = append(ps, Problem{Option: "overlap", Value: p, Rule: "needs a task state store (Config.State; scheduling.Module " +
				"takes it from the graph): the fire waiting for the run going waits there, so that any node runs it"})
		case p == OverlapAllow && d.MaxConc == nil && !unread["maxConcurrent"]:
			ps = append(ps, Problem{Option: "overlap", Value: p, Rule: "needs maxConcurrent: how many runs of the task may run at once in the cluster"})
		case p == OverlapAllow && s.LockWait > 0:
			ps = append(ps, Problem{Option: "lockWait", Value: s.LockWait.String(), Rule: "must not be set with overlap allow: " +
				"a fire that finds every run slot taken is skipped"})
		}
	}
	if n := d.MaxConc; n != nil && !unread["maxConcurrent"] && !unread["overlap"] {
		switch {
		case d.Overlap == nil || *d.Overlap != OverlapAllow:
			ps = append(ps, Problem{Option: "maxConcurrent", Value: strconv.Itoa(*n), Rule: "needs overlap allow: it bounds the runs that policy lets run at once"})
		case *n > locks.MaxSlots:
			ps = append(ps, Problem{Option: "maxConcurrent", Value: strconv.Itoa(*n), Rule: fmt.Sprintf("must not exceed %d (locks.MaxSlots)", locks.MaxSlots)})
		}
	}
	return ps
}

// checkRetry returns the problems of a spec that retries (defaults
// applied), under these rules; locked reports a lock option, read or not.
func (r lockRules) checkRetry(s Spec, locked bool) []Problem {
	var ps []Problem
	n := strconv.Itoa(s.Retries)
	switch {
	case s.Retries > MaxRetries:
		ps = append(ps, Problem{Option: "retry", Value: n, Rule: fmt.Sprintf("must not exceed %d (scheduling.MaxRetries)", MaxRetries)})
	case !locked:
		ps = append(ps, Problem{Option: "retry", Value: n, Rule: "needs lock: one node of the cluster takes each retry " +
			"and runs it under the task's lock, and an unlocked task runs on every node"})
	case !r.state:
		ps = append(ps, Problem{Option: "retry", Value: n, Rule: "needs a task state store (Config.State; scheduling.Module " +
			"takes it from the graph): a pending retry waits there, so that another node runs it if this one dies"})
	}
	switch {
	case s.RetryBackoff > MaxRetryBackoff:
		ps = append(ps, Problem{Option: "retryBackoff", Value: s.RetryBackoff.String(),
			Rule: fmt.Sprintf("must not exceed %v (scheduling.MaxRetryBackoff)", MaxRetryBackoff)})
	case s.RetryMaxBackoff > MaxRetryBackoff:
		ps = append(ps, Problem{Option: "retryMaxBackoff", Value: s.RetryMaxBackoff.String(),
			Rule: fmt.Sprintf("must not exceed %v (scheduling.MaxRetryBackoff)", MaxRetryBackoff)})
	case s.RetryMaxBackoff > 0 && s.RetryMaxBackoff < s.RetryBackoff:
		ps = append(ps, Problem{Option: "retryMaxBackoff", Value: s.RetryMaxBackoff.String(),
			Rule: fmt.Sprintf("must not be below retryBackoff (%v): it caps the backoff that doubles from it", s.RetryBackoff)})
	}
	return ps
}

func optionValue(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		v = rv.Elem().Interface()
	}
	if b, ok := v.(bool); ok && !b {
		return ""
	}
	return fmt.Sprint(v)
}

func ruleText(cache *parseCache, s declared, oe optionError) string {
	switch oe.rule {
	case "required":
		return "is required"
	case "cronexpr":
		_, err := cache.parse(s.Cron)
		return fmt.Sprintf("must be a valid cron expression (%v)", err)
	case "min":
		return "must not be empty"
	case "gte":
		return "must not be negative"
	case "gt":
		return "must be positive"
	case "excluded_without":
		if oe.param == "Retry" {
			return "needs retry: it only applies to a task that retries"
		}
		return "needs lock: it only applies to a locked task"
	}
	return fmt.Sprintf("breaks rule %q", oe.rule)
}

// shortestGap returns the shortest interval between the next 256 instants
// of sched after from; zero if it has fewer than two.
func shortestGap(sched schedule, from time.Time) time.Duration {
	var gap time.Duration
	prev := sched.Next(from)
	for range 256 {
		if prev.IsZero() {
			break
		}
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}

// cut shortens a long value for a problem's text.
func cut(v string) string {
	if len(v) > 64 {
		return strings.ToValidUTF8(v[:64], "") + "…"
	}
	return v
}
