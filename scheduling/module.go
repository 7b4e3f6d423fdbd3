package scheduling

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/taskstate"
)

// NodeName is the fx name under which Module looks for this node's name, a
// string: fx.Annotate(fn, fx.ResultTags(`name:"scheduling.node"`)).
const NodeName = "scheduling.node"

// SkipLevelName is the fx name under which Module looks for the level of
// its lines about skipped fires, a slog.Level ([Config.SkipLevel]).
const SkipLevelName = "scheduling.skip-level"

// LocationName is the fx name under which Module looks for the zone of cron
// expressions without a CRON_TZ= prefix, a *time.Location.
const LocationName = "scheduling.location"

// SpreadName is the fx name under which Module looks for its
// [SpreadMode].
const SpreadName = "scheduling.spread"

// A SpreadMode says whether Module's scheduler spreads the fires of locked
// tasks over the live nodes ([Config.Spread]).
type SpreadMode string

// The spread modes.
const (
	// SpreadAuto (or "") spreads when the driver keeps memberships
	// (locks.Membership) and is shared by processes: the Redis and
	// PostgreSQL drivers, not the in-process one.
	SpreadAuto SpreadMode = "auto"
	// SpreadOn spreads; Start fails if the driver keeps no memberships.
	SpreadOn SpreadMode = "on"
	// SpreadOff makes every node try every fire.
	SpreadOff SpreadMode = "off"
)

// spreads reports whether mode spreads on d.
func (mode SpreadMode) spreads(d locks.Driver) bool {
	switch mode {
	case SpreadOn:
		return true
	case SpreadOff:
		return false
	}
	_, member := locks.As[locks.Membership](d)
	_, local := locks.As[*locks.InProcessDriver](d)
	return member && !local
}

// registration is one Provide's tasks in the fx value group, with the
// sequence number that orders registrations (value groups are unordered).
type registration struct {
	seq   uint64
	tasks []Task
}

var (
	provideSeq    atomic.Uint64
	taskType      = reflect.TypeFor[Task]()
	taskSliceType = reflect.TypeFor[[]Task]()
	errorType     = reflect.TypeFor[error]()
)

// Provide registers the tasks that constructor returns with Module's
// scheduler. constructor is a function whose parameters come from the fx
// graph and that returns Task or []Task, optionally followed by an error.
// Registration order, which decides same-tick lock contention, is the order
// of the Provide calls.
func Provide(constructor any) fx.Option {
	seq := provideSeq.Add(1)
	cv := reflect.ValueOf(constructor)
	if cv.Kind() != reflect.Func || cv.IsNil() {
		return fx.Error(fmt.Errorf("scheduling.Provide: constructor %T must be a non-nil function returning Task or []Task", constructor))
	}
	ct := cv.Type()
	okResults := ct.NumOut() >= 1 && ct.NumOut() <= 2 &&
		(ct.Out(0) == taskType || ct.Out(0) == taskSliceType) &&
		(ct.NumOut() == 1 || ct.Out(1) == errorType)
	if !okResults {
		return fx.Error(fmt.Errorf("scheduling.Provide: constructor %T must return Task or []Task, optionally followed by error", constructor))
	}
	// The constructor goes to fx as it is, so that fx's errors name it and
	// its source line; its result, under a name of its own, is then numbered
	// into the group.
	name := `name:"scheduling.task.` + strconv.FormatUint(seq, 10) + `"`
	var number any = func(t Task) registration { return registration{seq: seq, tasks: []Task{t}} }
	if ct.Out(0) == taskSliceType {
		number = func(ts []Task) registration { return registration{seq: seq, tasks: ts} }
	}
	return fx.Options(
		fx.Provide(fx.Annotate(constructor, fx.ResultTags(name))),
		fx.Provide(fx.Annotate(number, fx.ParamTags(name), fx.ResultTags(`group:"scheduling.tasks"`))),
	)
}

// namedHandler is a handler registered with [Handler].
type namedHandler struct {
	name string
	fn   HandlerFunc
}

// Handler registers fn with Module's scheduler as the handler named name,
// which stored schedules name ([Scheduler.Handle], [Scheduler.CreateSchedule]).
func Handler(name string, fn HandlerFunc) fx.Option {
	return fx.Supply(fx.Annotated{Group: "scheduling.handlers", Target: namedHandler{name, fn}})
}

type moduleParams struct {
	fx.In
	Lifecycle     fx.Lifecycle
	Driver        locks.Driver    `optional:"true"`
	Configured    []locks.Driver  `group:"locks.configured"` // locks.ConfiguredGroup
	Clock         clockwork.Clock `optional:"true"`
	Logger        *slog.Logger    `optional:"true"`
	Node          string          `name:"scheduling.node" optional:"true"`
	Location      *time.Location  `name:"scheduling.location" optional:"true"`
	SkipLevel     slog.Level      `name:"scheduling.skip-level" optional:"true"`
	Spread        SpreadMode      `name:"scheduling.spread" optional:"true"`
	Registrations []registration  `group:"scheduling.tasks"`
	Handlers      []namedHandler  `group:"scheduling.handlers"`
	Listeners     []Listener      `group:"scheduling.listeners"`       // ListenersGroup
	Wrappers      []DriverWrapper `group:"scheduling.driver-wrappers"` // DriverWrappersGroup
	State         taskstate.Store `optional:"true"`
}

// Module builds a *Scheduler from the fx graph, adds every task registered
// with [Provide] (or package annotations) in registration order, starts it
// on OnStart and stops it on OnStop. The graph may supply a locks.Driver
// (without one, locked tasks fail validation), a clockwork.Clock, a
// *slog.Logger, a node name ([NodeName]), a zone ([LocationName]), a
// [SpreadMode] ([SpreadName]; auto by default) and a
// taskstate.Store (taskstate.Module provides one; without it, tasks cannot
// be paused or run by hand); all are optional. Listeners registered with [Listen] are told about every run and
// skip, and [DriverWrapper] values in [DriverWrappersGroup] wrap the driver. If any task spec is invalid, fx.New fails with every problem
// listed.
var Module = fx.Module("scheduling",
	fx.Provide(newModuleScheduler),
	fx.Invoke(func(*Scheduler) {}),
)

func newModuleScheduler(p moduleParams) (*Scheduler, error) {
	driver := p.Driver
	if driver != nil {
		for _, w := range p.Wrappers {
			if w != nil {
				driver = w(driver)
			}
		}
	}
	s := New(Config{Driver: driver, Clock: p.Clock, Logger: p.Logger, Node: p.Node, Location: p.Location,
		Listeners: p.Listeners, SkipLevel: p.SkipLevel, State: p.State, Spread: p.Spread.spreads(driver)})
	regs := slices.Clone(p.Registrations)
	slices.SortFunc(regs, func(a, b registration) int { return cmp.Compare(a.seq, b.seq) })
	var tasks []Task
	for _, r := range regs {
		tasks = append(tasks, r.tasks...)
	}
	if err := s.Add(tasks...); err != nil {
		return nil, err
	}
	for _, h := range p.Handlers {
		if err := s.Handle(h.name, h.fn); err != nil {
			return nil, err
		}
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			// Checked on start rather than when the graph is built, so that
			// fx stops what already started (a Redis client) on the way out.
			if err := checkConfigured(p.Driver, p.Configured); err != nil {
				return err
			}
			return s.Start()
		},
		OnStop: s.Stop,
	})
	return s, nil
}

// checkConfigured returns an error unless d is every driver that a
// configuration module put in locks.ConfiguredGroup.
func checkConfigured(d locks.Driver, configured []locks.Driver) error {
	for _, c := range configured {
		if c == nil || c == d {
			continue
		}
		got := "no lock driver"
		if d != nil {
			got = DriverName(d)
		}
		return fmt.Errorf("scheduling.Module: the configuration provides the lock driver %s, but the scheduler was given %s: "+
			"the module that replaces locks.Driver (such as redislocks.Module) must be included at the root of the application, "+
			"not inside an fx.Module, whose decorations apply to that module only", DriverName(c), got)
	}
	return nil
}

// DriverName describes a lock driver for logs and errors: its String method
// if it has one (the Redis driver names its namespace), else its type;
// wrappers (locks.Wrapper) are described by what they wrap.
func DriverName(d locks.Driver) string {
	for d != nil {
		if s, ok := d.(fmt.Stringer); ok {
			return s.String()
		}
		w, ok := d.(locks.Wrapper)
		if !ok {
			break
		}
		d = w.Unwrap()
	}
	return fmt.Sprintf("%T", d)
}
