package redislocks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

// newStores returns two stores on c, each with its own client options but
// one namespace, as two nodes have.
func newStores(c redis.Cmdable) taskstatetest.NewStores {
	return func(t *testing.T, history int) (taskstate.Store, taskstate.Store) {
		var out [2]taskstate.Store
		for i := range out {
			s, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "conformance", History: history})
			if err != nil {
				t.Fatal(err)
			}
			out[i] = s
		}
		return out[0], out[1]
	}
}

func TestStoreConformanceSingleServer(t *testing.T) {
	taskstatetest.Run(t, newStores(redistest.Start(t).Client()))
}

func TestStoreConformanceCluster(t *testing.T) {
	taskstatetest.Run(t, newStores(redistest.StartCluster(t, 3).Client()))
}

// The paused flag and the history survive every node's restart: they are in
// Redis, and a store made afterwards reads them. Namespaces do not see each
// other's state.
func TestStoreStateOutlivesNodesAndStaysInItsNamespace(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	first, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.SetPaused(ctx, "Payroll.Close", true); err != nil {
		t.Fatal(err)
	}
	if err := first.Record(ctx, "Payroll.Close", taskstate.Run{Node: "a", Token: 7, Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	later, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "prod"})
	if paused, err := later.Paused(ctx, "Payroll.Close"); err != nil || !paused {
		t.Errorf("a new store's Paused = %v, %v; want true: the flag lives in Redis", paused, err)
	}
	if runs, err := later.Runs(ctx, "Payroll.Close"); err != nil || len(runs) != 1 || runs[0].Token != 7 {
		t.Errorf("a new store's Runs = %+v, %v; want the recorded run", runs, err)
	}
	other, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "staging"})
	if paused, err := other.Paused(ctx, "Payroll.Close"); err != nil || paused {
		t.Errorf("another namespace's Paused = %v, %v; want false", paused, err)
	}
	if runs, err := other.Runs(ctx, "Payroll.Close"); err != nil || len(runs) != 0 {
		t.Errorf("another namespace's Runs = %+v, %v; want none", runs, err)
	}
	ttl, err := c.PTTL(ctx, "ndigo:{prod:Payroll.Close}:task:runs").Result()
	if err != nil || ttl <= 0 {
		t.Errorf("the runs list's TTL = %v, %v; want it to expire (bounded storage)", ttl, err)
	}
}

func TestNewStoreRejectsBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, o := range map[string]redislocks.StoreOptions{
		"no client":     {Namespace: "prod"},
		"bad namespace": {Client: c, Namespace: "a:b"},
		"empty ns":      {Client: c},
		"history < 0":   {Client: c, Namespace: "prod", History: -1},
		"history > max": {Client: c, Namespace: "prod", History: taskstate.MaxHistory + 1},
	} {
		if _, err := redislocks.NewStore(o); !errors.Is(err, taskstate.ErrInvalid) {
			t.Errorf("%s: err = %v, want taskstate.ErrInvalid", name, err)
		}
	}
}

// A Redis that does not answer gives errors wrapping ErrRedis that name the
// task.
func TestStoreRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	s, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "prod"})
	srv.Kill()
	_, err := s.Paused(context.Background(), "Payroll.Close")
	if !errors.Is(err, redislocks.ErrRedis) {
		t.Fatalf("Paused with Redis down: err = %v, want redislocks.ErrRedis", err)
	}
}

// The module replaces the default task state (taskstate.Module) app-wide
// with a Store in its Redis and namespace, with the configured history.
func TestModuleOverridesDefaultStore(t *testing.T) {
	srv := redistest.Start(t)
	var st taskstate.Store
	app := fxtest.New(t, locks.Module, taskstate.Module,
		fx.Supply(redislocks.ModuleConfig{URL: "redis://" + srv.Addr(), Namespace: "module-test", History: 2}),
		redislocks.Module, fx.Module("consumer", fx.Populate(&st)))
	app.RequireStart()
	defer app.RequireStop()
	if _, ok := st.(*redislocks.Store); !ok {
		t.Fatalf("store %T, want *redislocks.Store", st)
	}
	ctx := context.Background()
	for i := range 3 {
		if err := st.Record(ctx, "Payroll.Close", taskstate.Run{Token: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := srv.Client().LLen(ctx, "ndigo:{module-test:Payroll.Close}:task:runs").Result(); err != nil || n != 2 {
		t.Fatalf("runs list in Redis: %d, %v; want the 2 that History keeps", n, err)
	}
}

// A TakeRequest whose reply was lost, retried by go-redis, answers the
// request its first attempt took; a Record retried the same way records the
// run once.
func TestStoreCallsRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	lossyClient := redis.NewClient(&redis.Options{Addr: s.proxy.Addr()})
	t.Cleanup(func() { _ = lossyClient.Close() })
	behind, _ := redislocks.NewStore(redislocks.StoreOptions{Client: lossyClient, Namespace: "retry"})
	other, _ := redislocks.NewStore(redislocks.StoreOptions{Client: s.direct, Namespace: "retry"})

	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := other.RequestRun(ctx, "Payroll.Close", at); err != nil {
		t.Fatal(err)
	}
	m := s.dropFirstReply(redislocks.TakeSHA, "ndigo:{retry}:requests")
	got, ok, err := behind.TakeRequest(ctx, "Payroll.Close")
	if err != nil || !ok || !got.Equal(at) {
		t.Fatalf("TakeRequest whose first reply was lost = %v, %v, %v; want the request it took", got, ok, err)
	}
	s.retried(t, m)
	if _, ok, err := other.TakeRequest(ctx, "Payroll.Close"); err != nil || ok {
		t.Fatalf("another node's TakeRequest after it = %v, %v; want nothing left", ok, err)
	}

	m = s.dropFirstReply(redislocks.RecordSHA, "ndigo:{retry:Payroll.Close}:task:runs")
	if err := behind.Record(ctx, "Payroll.Close", taskstate.Run{Token: 9, Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	if n, dropped := s.proxy.Count(m), s.proxy.Dropped(); n != 2 || dropped != 2 {
		t.Fatalf("the record script was sent %d times with %d replies dropped in all; want 2 and 2", n, dropped)
	}
	runs, err := other.Runs(ctx, "Payroll.Close")
	if err != nil || len(runs) != 1 || runs[0].Token != 9 {
		t.Fatalf("runs after a retried Record = %+v, %v; want the run once", runs, err)
	}
}
