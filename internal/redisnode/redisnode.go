// Package redisnode starts, for tests of what an operator sees (the
// console, the CLI), a scheduler whose locks and task state are on one
// private redis-server, on a fake clock, with one locked task due every
// second: a test kills the server and steps into fires that fail.
package redisnode

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
)

// Task is the name of the node's task: every second, on lock "payroll".
const Task = "Payroll.Close"

// A Node is the scheduler, its backends and its clock.
type Node struct {
	Server *redistest.Server
	Driver *redislocks.Driver
	Store  *redislocks.Store
	Clock  *clockwork.FakeClock
	S      *scheduling.Scheduler
}

// Start starts the node "node-a" in namespace ns, its clock at start; the
// test's cleanup stops it.
func Start(t testing.TB, ns string, start time.Time) *Node {
	t.Helper()
	n := &Node{Server: redistest.Start(t), Clock: clockwork.NewFakeClockAt(start)}
	client := n.Server.Client()
	var err error
	if n.Driver, err = redislocks.New(redislocks.Options{Client: client, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Driver.Close() })
	if n.Store, err = redislocks.NewStore(redislocks.StoreOptions{Client: client, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	n.S = scheduling.New(scheduling.Config{Clock: n.Clock, Node: "node-a", Logger: slog.New(slog.DiscardHandler),
		Driver: n.Driver, State: n.Store})
	if err := n.S.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
		scheduling.Lock("payroll"), scheduling.LockTTL(5*time.Second), scheduling.Name(Task))); err != nil {
		t.Fatal(err)
	}
	if err := n.S.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.S.Stop(context.Background()) })
	return n
}

// Step moves the clock a second on and waits until the fires due by then
// are done.
func (n *Node) Step(t testing.TB) {
	t.Helper()
	if err := schedulingtest.Step(context.Background(), n.Clock, time.Second, 0, n.S); err != nil {
		t.Fatal(err)
	}
}

// DialProbe is the goleak option for a test binary that kills the server:
// go-redis probes a dead server once a second from a goroutine of the
// client's pool, which returns at the first probe after the client closed,
// up to a second after the test ended.
var DialProbe = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
