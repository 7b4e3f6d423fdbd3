package scheduling

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/locks"
)

// NodeName is the fx name under which Module looks for this node's name, a
// string: fx.Annotate(fn, fx.ResultTags(`name:"scheduling.node"`)).
const NodeName = "scheduling.node"

// LocationName is the fx name under which Module looks for the zone of cron
// expressions without a CRON_TZ= prefix, a *time.Location.
const LocationName = "scheduling.location"

// registration is one Provide's tasks in the fx value group, with the
// sequence number that orders registrations (value groups are unordered).
type registration struct {
	seq   uint64
	tasks []Task
}

type registrationOut struct {
	fx.Out
	Registration registration `group:"scheduling.tasks"`
}

var (
	provideSeq          atomic.Uint64
	taskType            = reflect.TypeFor[Task]()
	taskSliceType       = reflect.TypeFor[[]Task]()
	errorType           = reflect.TypeFor[error]()
	registrationOutType = reflect.TypeFor[registrationOut]()
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
	in := make([]reflect.Type, ct.NumIn())
	for i := range in {
		in[i] = ct.In(i)
	}
	wrapped := reflect.MakeFunc(reflect.FuncOf(in, []reflect.Type{registrationOutType, errorType}, ct.IsVariadic()),
		func(args []reflect.Value) []reflect.Value {
			var res []reflect.Value
			if ct.IsVariadic() {
				res = cv.CallSlice(args)
			} else {
				res = cv.Call(args)
			}
			var out registrationOut
			var err error
			if len(res) == 2 && !res[1].IsNil() {
				err = res[1].Interface().(error)
			}
			switch v := res[0].Interface().(type) {
			case Task:
				out.Registration = registration{seq: seq, tasks: []Task{v}}
			case []Task:
				out.Registration = registration{seq: seq, tasks: v}
			}
			errv := reflect.Zero(errorType)
			if err != nil {
				errv = reflect.ValueOf(&err).Elem()
			}
			return []reflect.Value{reflect.ValueOf(out), errv}
		})
	return fx.Provide(wrapped.Interface())
}

type moduleParams struct {
	fx.In
	Lifecycle     fx.Lifecycle
	Driver        locks.Driver    `optional:"true"`
	Clock         clockwork.Clock `optional:"true"`
	Logger        *slog.Logger    `optional:"true"`
	Node          string          `name:"scheduling.node" optional:"true"`
	Location      *time.Location  `name:"scheduling.location" optional:"true"`
	Registrations []registration  `group:"scheduling.tasks"`
}

// Module builds a *Scheduler from the fx graph, adds every task registered
// with [Provide] (or package annotations) in registration order, starts it
// on OnStart and stops it on OnStop. The graph may supply a locks.Driver
// (without one, locked tasks fail validation), a clockwork.Clock, a
// *slog.Logger, a node name ([NodeName]) and a zone ([LocationName]); all are
// optional. If any task spec is invalid, fx.New fails with every problem
// listed.
var Module = fx.Module("scheduling",
	fx.Provide(newModuleScheduler),
	fx.Invoke(func(*Scheduler) {}),
)

func newModuleScheduler(p moduleParams) (*Scheduler, error) {
	s := New(Config{Driver: p.Driver, Clock: p.Clock, Logger: p.Logger, Node: p.Node, Location: p.Location})
	regs := slices.Clone(p.Registrations)
	slices.SortFunc(regs, func(a, b registration) int { return cmp.Compare(a.seq, b.seq) })
	var tasks []Task
	for _, r := range regs {
		tasks = append(tasks, r.tasks...)
	}
	if err := s.Add(tasks...); err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { return s.Start() },
		OnStop:  s.Stop,
	})
	return s, nil
}
