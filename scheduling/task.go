package scheduling

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"time"
)

// Default values of the lock options.
const (
	DefaultLockWaitStep = 100 * time.Millisecond
	DefaultLockTTL      = 60 * time.Second
)

// A Task is one declared task: a func and its spec. A Task may carry
// declaration errors; they surface when it is added to a scheduler.
type Task struct {
	fn       func(context.Context) error
	decl     declared
	typ      string // controller type, "" for a plain func
	method   string
	problems []Problem         // recorded by Invalid, and for a nil func
	from     map[string]string // where options' values came from, by option, recorded by From
}

// NewTask declares fn as a task with the given options. The controller type
// and method are read from fn when it is a method value (c.CloseBooks).
func NewTask(fn func(context.Context) error, opts ...Option) Task {
	t := Task{fn: fn}
	if fn != nil {
		t.typ, t.method = funcOrigin(fn)
	}
	for _, o := range opts {
		if o != nil {
			o(&t)
		}
	}
	return t
}

// Name returns the task's name: the Name option, or the default that
// [Name] describes.
func (t Task) Name() string {
	if t.decl.Name != nil {
		return *t.decl.Name
	}
	if t.typ == "" {
		return t.method
	}
	return t.typ + "." + t.method
}

// Spec returns the task's spec with defaults applied.
func (t Task) Spec() Spec {
	s := Spec{Cron: t.decl.Cron, Renew: t.decl.Renew}
	if t.decl.Lock != nil {
		s.Lock = *t.decl.Lock
		s.LockWaitStep = DefaultLockWaitStep
		s.LockTTL = DefaultLockTTL
	}
	if t.decl.LockWait != nil {
		s.LockWait = *t.decl.LockWait
	}
	if t.decl.LockWaitStep != nil {
		s.LockWaitStep = *t.decl.LockWaitStep
	}
	if t.decl.LockTTL != nil {
		s.LockTTL = *t.decl.LockTTL
	}
	if t.decl.MaxRunTime != nil {
		s.MaxRunTime = *t.decl.MaxRunTime
	}
	if t.decl.Jitter != nil {
		s.Jitter = *t.decl.Jitter
	}
	if t.decl.DST != nil {
		if p, err := parseDST(*t.decl.DST); err == nil && p.String() != DSTDefault {
			s.DST = p.String()
		}
	}
	if t.decl.CatchUp != nil {
		s.CatchUp = *t.decl.CatchUp
	}
	if t.decl.Overlap != nil && validOverlap(*t.decl.Overlap) && *t.decl.Overlap != OverlapSkip {
		s.Overlap = *t.decl.Overlap
	}
	if t.decl.MaxConc != nil && s.Overlap == OverlapAllow {
		s.MaxConcurrent = *t.decl.MaxConc
	}
	if t.decl.Calendars != nil {
		s.Calendars = *t.decl.Calendars
	}
	if t.decl.StartAt != nil {
		s.StartAt = *t.decl.StartAt
	}
	if t.decl.EndAt != nil {
		s.EndAt = *t.decl.EndAt
	}
	if t.decl.MaxRuns != nil {
		s.MaxRuns = *t.decl.MaxRuns
	}
	if t.decl.PauseAfter != nil {
		s.PauseAfterFailures = *t.decl.PauseAfter
	}
	if t.decl.LateAfter != nil {
		s.LateAfter = *t.decl.LateAfter
	}
	if t.decl.DownAfter != nil {
		s.DownAfter = *t.decl.DownAfter
	}
	if t.decl.FailingAfter != nil {
		s.FailingAfter = *t.decl.FailingAfter
	}
	if t.decl.RunBudget != nil {
		s.RunBudget = *t.decl.RunBudget
	}
	if t.decl.Retry != nil && *t.decl.Retry > 0 {
		s.Retries, s.RetryBackoff = *t.decl.Retry, DefaultRetryBackoff
		if t.decl.RetryBackoff != nil {
			s.RetryBackoff = *t.decl.RetryBackoff
		}
		s.RetryMaxBackoff = min(100*s.RetryBackoff, max(MaxRetryBackoff, s.RetryBackoff))
		if t.decl.RetryMax != nil {
			s.RetryMaxBackoff = *t.decl.RetryMax
		}
	}
	return s
}

// A Spec is a task's validated spec with defaults applied. Lock is "" for an
// unlocked task, and the lock durations are then zero.
type Spec struct {
	Cron         string
	Lock         string
	LockWait     time.Duration
	LockWaitStep time.Duration
	LockTTL      time.Duration
	MaxRunTime   time.Duration
	Renew        bool
	CatchUp      time.Duration // the catch-up window; zero skips missed fires
	Jitter       time.Duration // each fire starts up to this much after its instant; zero starts it on time
	DST          string        // the daylight-saving policy, "twice,shift" and the like; "" for DSTDefault, "once,shift"
	// Retries is how many times a failed run of a fire is retried; zero
	// retries none, and the retry durations are then zero.
	Retries         int
	RetryBackoff    time.Duration // the first retry's backoff, doubled for each next one
	RetryMaxBackoff time.Duration // the cap of the doubling backoff
	// Overlap is what a fire does when a run of the task is going
	// ([Overlap]): "" for OverlapSkip, or the policy's name.
	Overlap string
	// MaxConcurrent is, with OverlapAllow, how many runs of the task may
	// run at once in the cluster; 0 otherwise.
	MaxConcurrent int
	// Calendars names the calendars whose exclusions the task's fires
	// skip, separated by commas, as written ([Calendar]); "" for none.
	Calendars string
	// StartAt and EndAt bound the task's fires, as written ([StartAt],
	// [EndAt]); "" for no bound.
	StartAt, EndAt string
	// MaxRuns is how many runs the task makes in the cluster, whatever its
	// schedule ([MaxRuns]); 0 for no bound.
	MaxRuns int
	// PauseAfterFailures pauses the task after that many failed fires in a
	// row ([PauseAfterFailures]); 0 never does.
	PauseAfterFailures int
	// LateAfter, DownAfter, FailingAfter and RunBudget tune the task's
	// health ([Scheduler.Health]), as set ([LateAfter], [DownAfter],
	// [FailingAfter], [RunBudget]); zero for the defaults, which depend on
	// the schedule and the history: a fire's grace, three fires late, one
	// failure, no budget.
	LateAfter    time.Duration
	DownAfter    time.Duration
	FailingAfter int
	RunBudget    time.Duration
}

// funcOrigin splits the runtime name of fn, such as
// "example.com/pkg.(*PayrollController).CloseBooks-fm", into the type
// "PayrollController" and method "CloseBooks". A plain function yields ""
// and its package-qualified name, "pkg.Func".
func funcOrigin(fn any) (typ, method string) {
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	if f == nil {
		return "", "func"
	}
	name := strings.TrimSuffix(f.Name(), "-fm")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	// name is now "pkg.(*T).M", "pkg.T.M", "pkg.Func" or "pkg.Func.func1".
	if open := strings.Index(name, ".("); open >= 0 {
		if close := strings.Index(name[open:], ")."); close >= 0 {
			typ = strings.TrimPrefix(name[open+2:open+close], "*")
			return typ, name[open+close+2:]
		}
	}
	if !strings.HasSuffix(f.Name(), "-fm") {
		return "", name
	}
	parts := strings.Split(name, ".")
	if len(parts) >= 3 {
		return parts[1], strings.Join(parts[2:], ".")
	}
	return "", name
}
