// Package backendnode starts, for tests of what an operator sees (the
// console, the CLI), a cluster of schedulers whose locks and task state are
// on one private redis-server, PostgreSQL or etcd, on one fake clock, each node
// with one locked task due every second: a test kills the server, steps
// into fires that fail, and restarts it.
package backendnode

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/scheduling/schedulingtest"
	"github.com/ndigo/ndigo/taskstate"
)

// Task is the name of the nodes' task: every second, on lock "payroll".
const Task = "Payroll.Close"

// History is the length of the nodes' shared history: a few minutes of
// fires, with the failures of an outage on every node.
const History = 500

// A Server is the backend the nodes share.
type Server interface {
	Kill()    // SIGKILL: the nodes' calls fail
	Restart() // after Kill: a Redis server comes back empty, PostgreSQL with its data
}

// A Node is one scheduler and the driver and store it was built from.
type Node struct {
	Name   string // node-a, node-b, …
	Driver locks.Driver
	Store  taskstate.Store
	S      *scheduling.Scheduler
}

// A Cluster is the nodes, their server and their clock.
type Cluster struct {
	Server Server
	Clock  *clockwork.FakeClock
	Nodes  []*Node
}

// Redis starts n nodes on one private redis-server, in namespace ns, their
// clock at start; the test's cleanup stops them.
func Redis(t testing.TB, ns string, start time.Time, n int) *Cluster {
	t.Helper()
	srv := redistest.Start(t)
	return startNodes(t, srv, start, n, func(*clockwork.FakeClock) (locks.Driver, taskstate.Store) {
		client := srv.Client()
		d, err := redislocks.New(redislocks.Options{Client: client, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		st, err := redislocks.NewStore(redislocks.StoreOptions{Client: client, Namespace: ns, History: History})
		if err != nil {
			t.Fatal(err)
		}
		return d, st
	})
}

// Postgres starts n nodes on one private PostgreSQL server, in namespace
// ns, their clock at start; the test's cleanup stops them.
func Postgres(t testing.TB, ns string, start time.Time, n int) *Cluster {
	t.Helper()
	srv := pgtest.Start(t)
	return startNodes(t, srv, start, n, func(fc *clockwork.FakeClock) (locks.Driver, taskstate.Store) {
		pool := srv.Pool()
		d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: ns, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		st, err := pglocks.NewStore(pglocks.StoreOptions{Pool: pool, Namespace: ns, History: History})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := d.CreateSchema(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSchema(ctx); err != nil {
			t.Fatal(err)
		}
		return d, st
	})
}

// Etcd starts n nodes on a private one-member etcd cluster, in namespace
// ns, their clock at start; the test's cleanup stops them.
func Etcd(t testing.TB, ns string, start time.Time, n int) *Cluster {
	t.Helper()
	member := etcdtest.StartCluster(t, 1).Members()[0]
	return startNodes(t, member, start, n, func(fc *clockwork.FakeClock) (locks.Driver, taskstate.Store) {
		client := member.Client()
		d, err := etcdlocks.New(etcdlocks.Options{Client: client, Namespace: ns, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		st, err := etcdlocks.NewStore(etcdlocks.StoreOptions{Client: client, Namespace: ns, History: History})
		if err != nil {
			t.Fatal(err)
		}
		return d, st
	})
}

// Backends are the constructors of a cluster on each lock store, by name.
var Backends = map[string]func(t testing.TB, ns string, start time.Time, n int) *Cluster{
	"redis": Redis, "postgres": Postgres, "etcd": Etcd}

func startNodes(t testing.TB, srv Server, start time.Time, n int, backends func(*clockwork.FakeClock) (locks.Driver, taskstate.Store)) *Cluster {
	c := &Cluster{Server: srv, Clock: clockwork.NewFakeClockAt(start)}
	for i := range n {
		node := &Node{Name: fmt.Sprintf("node-%c", 'a'+i)}
		node.Driver, node.Store = backends(c.Clock)
		node.S = scheduling.New(scheduling.Config{Clock: c.Clock, Node: node.Name, Logger: slog.New(slog.DiscardHandler),
			Driver: node.Driver, State: node.Store})
		if err := node.S.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@every 1s"),
			scheduling.Lock("payroll"), scheduling.LockTTL(5*time.Second), scheduling.Name(Task))); err != nil {
			t.Fatal(err)
		}
		if err := node.S.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.S.Stop(context.Background()) })
		c.Nodes = append(c.Nodes, node)
	}
	return c
}

// Step moves the clock a second on and waits until the fires due by then
// are done on every node.
func (c *Cluster) Step(t testing.TB) {
	t.Helper()
	ss := make([]*scheduling.Scheduler, len(c.Nodes))
	for i, n := range c.Nodes {
		ss[i] = n.S
	}
	if err := schedulingtest.Step(context.Background(), c.Clock, time.Second, 0, ss...); err != nil {
		t.Fatal(err)
	}
}

// DialProbe is the goleak option for a test binary that kills the server:
// go-redis probes a dead server once a second from a goroutine of the
// client's pool, which returns at the first probe after the client closed,
// up to a second after the test ended.
var DialProbe = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
