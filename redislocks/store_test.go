package redislocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/ndigo/ndigo/internal/faultproxy"
	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

// newStore returns a store on c in the conformance namespace.
func newStore(t *testing.T, c redis.Cmdable, history int) *redislocks.Store {
	t.Helper()
	s, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "conformance", History: history,
		Trail: taskstatetest.Trail})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lossyStores returns a factory of two stores on the server at addr, as two
// nodes have: A on a client with go-redis's default options (MaxRetries 3)
// that reaches the server through a faultproxy, B on direct. A lost reply
// of A is retried.
func lossyStores(direct *redis.Client, addr string) taskstatetest.NewStores {
	// Loaded scripts make each call one EVALSHA, so that the loss hits the
	// script's run and not a NOSCRIPT answer.
	for _, sc := range redislocks.Scripts {
		if err := sc.Load(context.Background(), direct).Err(); err != nil {
			panic(err)
		}
	}
	return func(t *testing.T, history int) taskstatetest.Stores {
		p, err := faultproxy.New(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return taskstatetest.Stores{A: newStore(t, c, history), B: newStore(t, direct, history), Loss: taskstatetest.Retried, Trail: taskstatetest.Trail,
			LoseNextReply: func(then func()) { p.DropReplyThen(storeCall, then) },
			Leaks:         func(t *testing.T) error { return storeLeaks(context.Background(), direct, "conformance") }}
	}
}

// permanentKey matches the keys of namespace ns that the Store's
// documentation says do not expire: the paused flags and last resumes,
// the namespace's requests, retries, backfills and runs-taken hashes, the
// pause generation, the schedules and their generation, the trail, its
// Keys and its last Seq (which storeLeaks checks are within the bound).
func permanentKey(ns, key string) bool {
	if strings.HasPrefix(key, "ndigo:{"+ns+":") && (strings.HasSuffix(key, "}:task:paused") || strings.HasSuffix(key, "}:task:resumed")) {
		return true
	}
	switch strings.TrimPrefix(key, "ndigo:{"+ns+"}:") {
	case "requests", "retries", "backfills", "runcounts", "pauses", "schedules", "schedules:gen", "trail", "trail:keys", "trail:seq":
		return true
	}
	return false
}

// storeLeaks returns an error naming the keys of namespace ns on c (every
// master of a Cluster) that have no expiry and that the Store's
// documentation does not say are permanent.
func storeLeaks(ctx context.Context, c redis.UniversalClient, ns string) error {
	var mu sync.Mutex
	var leaked []string
	scan := func(ctx context.Context, node *redis.Client) error {
		for _, match := range []string{"ndigo:{" + ns + "}:*", "ndigo:{" + ns + ":*"} {
			it := node.Scan(ctx, 0, match, 1000).Iterator()
			for it.Next(ctx) {
				key := it.Val()
				if permanentKey(ns, key) {
					continue
				}
				ttl, err := node.PTTL(ctx, key).Result()
				if err != nil {
					return err
				}
				if ttl == -1 {
					mu.Lock()
					leaked = append(leaked, key)
					mu.Unlock()
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("storeLeaks: client %T is neither a *redis.Client nor a *redis.ClusterClient", c)
	}
	if err != nil {
		return err
	}
	// The trail and its Keys hold at most the conformance stores' bound.
	trail := "ndigo:{" + ns + "}:trail"
	n, err := c.ZCard(ctx, trail).Result()
	if err != nil {
		return err
	}
	keys, err := c.HLen(ctx, trail+":keys").Result()
	if err != nil {
		return err
	}
	if n > taskstatetest.Trail || keys > n {
		return fmt.Errorf("the trail of namespace %q holds %d entries and %d Keys; want at most %d (the stores' Trail) and one Key each", ns, n, keys, taskstatetest.Trail)
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		return fmt.Errorf("%d keys of namespace %q without an expiry that the Store does not state permanent: %q", len(leaked), ns, leaked)
	}
	return nil
}

// storeCall matches the commands of a store's calls: those a client sends
// on a new connection (HELLO, CLIENT SETINFO) are not.
func storeCall(c faultproxy.Command) bool {
	switch c.Name() {
	case "HELLO", "CLIENT", "AUTH", "SELECT", "PING", "READONLY":
		return false
	}
	return true
}

func TestStoreConformanceSingleServer(t *testing.T) {
	srv := redistest.Start(t)
	taskstatetest.Run(t, lossyStores(srv.Client(), srv.Addr()))
}

// On a Cluster the harness loses no replies (a proxy would have to rewrite
// the servers' redirections); the single server's run covers the retries,
// which are the same scripts.
func TestStoreConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client()
	taskstatetest.Run(t, func(t *testing.T, history int) taskstatetest.Stores {
		return taskstatetest.Stores{A: newStore(t, c, history), B: newStore(t, c, history), Loss: taskstatetest.Retried,
			Trail: taskstatetest.Trail,
			Leaks: func(t *testing.T) error { return storeLeaks(context.Background(), c, "conformance") }}
	})
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
	pause := taskstate.Pause{Paused: true, Note: "bank file late", By: "cli", At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	if err := first.SetPaused(ctx, "Payroll.Close", pause); err != nil {
		t.Fatal(err)
	}
	if err := first.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Node: "a", Token: 7, Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	later, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "prod"})
	if got, err := later.Paused(ctx, "Payroll.Close"); err != nil || got != pause {
		t.Errorf("a new store's Paused = %+v, %v; want %+v: the pause lives in Redis", got, err, pause)
	}
	if runs, err := later.Runs(ctx, "Payroll.Close", 0); err != nil || len(runs) != 1 || runs[0].Token != 7 {
		t.Errorf("a new store's Runs = %+v, %v; want the recorded run", runs, err)
	}
	other, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "staging"})
	if got, err := other.Paused(ctx, "Payroll.Close"); err != nil || got != (taskstate.Pause{}) {
		t.Errorf("another namespace's Paused = %+v, %v; want the zero Pause", got, err)
	}
	if runs, err := other.Runs(ctx, "Payroll.Close", 0); err != nil || len(runs) != 0 {
		t.Errorf("another namespace's Runs = %+v, %v; want none", runs, err)
	}
	ttl, err := c.PTTL(ctx, "ndigo:{prod}:runs:Payroll.Close").Result()
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
		if err := st.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Token: uint64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := srv.Client().LLen(ctx, "ndigo:{module-test}:runs:Payroll.Close").Result(); err != nil || n != 2 {
		t.Fatalf("runs list in Redis: %d, %v; want the 2 that History keeps", n, err)
	}
}

// Each mutating call whose reply was lost is resent by go-redis with its
// defaults, and answers what its first attempt did: the request taken is
// the caller's, and nothing is done twice. (taskstatetest's LostReply cases
// check the same with another node's calls before the retry.)
func TestStoreCallsRetriedAfterLostReply(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	lossyClient := redis.NewClient(&redis.Options{Addr: s.proxy.Addr()})
	t.Cleanup(func() { _ = lossyClient.Close() })
	behind, _ := redislocks.NewStore(redislocks.StoreOptions{Client: lossyClient, Namespace: "retry"})
	other, _ := redislocks.NewStore(redislocks.StoreOptions{Client: s.direct, Namespace: "retry"})

	m := s.dropFirstReply(redislocks.PauseSHA, "ndigo:{retry:Payroll.Close}:task:paused")
	if err := behind.SetPaused(ctx, "Payroll.Close", taskstate.Pause{Paused: true, Note: "retried"}); err != nil {
		t.Fatal(err)
	}
	s.retried(t, m)
	if got, err := other.Paused(ctx, "Payroll.Close"); err != nil || got != (taskstate.Pause{Paused: true, Note: "retried"}) {
		t.Fatalf("Paused after a retried SetPaused = %+v, %v; want paused with its note", got, err)
	}

	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	m = s.dropFirstReply(redislocks.RequestSHA, "ndigo:{retry}:requests")
	if err := behind.RequestRun(ctx, "Payroll.Close", at); err != nil {
		t.Fatal(err)
	}
	if n, dropped := s.proxy.Count(m), s.proxy.Dropped(); n != 2 || dropped != 2 {
		t.Fatalf("the request script was sent %d times with %d replies dropped in all; want 2 and 2", n, dropped)
	}
	m = s.dropFirstReply(redislocks.TakeSHA, "ndigo:{retry}:requests")
	got, ok, err := behind.TakeRequest(ctx, "Payroll.Close", "node-a")
	if err != nil || !ok || !got.Equal(at) {
		t.Fatalf("TakeRequest whose first reply was lost = %v, %v, %v; want the request it took", got, ok, err)
	}
	if n, dropped := s.proxy.Count(m), s.proxy.Dropped(); n != 2 || dropped != 3 {
		t.Fatalf("the take script was sent %d times with %d replies dropped in all; want 2 and 3", n, dropped)
	}
	if _, ok, err := other.TakeRequest(ctx, "Payroll.Close", "node-b"); err != nil || ok {
		t.Fatalf("another node's TakeRequest after it = %v, %v; want nothing left", ok, err)
	}

	m = s.dropFirstReply(redislocks.RecordSHA, "ndigo:{retry}:runs:Payroll.Close")
	if err := behind.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Fire: at, Manual: true, Node: "node-a", Token: 9, Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if n, dropped := s.proxy.Count(m), s.proxy.Dropped(); n != 2 || dropped != 4 {
		t.Fatalf("the record script was sent %d times with %d replies dropped in all; want 2 and 4", n, dropped)
	}
	runs, err := other.Runs(ctx, "Payroll.Close", 0)
	if err != nil || len(runs) != 1 || runs[0].Token != 9 {
		t.Fatalf("runs after a retried Record = %+v, %v; want the run once, in place of its placeholder", runs, err)
	}
}

// Runs reads only the runs it returns: the task list's one run per task is
// one LRANGE of one element, not the history.
func TestStoreRunsReadsOnlyTheLimit(t *testing.T) {
	s := newLossy(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.proxy.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	st, _ := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "limit"})
	for i := range 5 {
		if err := st.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Token: uint64(i), Outcome: "ok"}}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(ctx, "Payroll.Close", 1)
	if err != nil || len(runs) != 1 || runs[0].Token != 4 {
		t.Fatalf("Runs(limit 1) = %+v, %v; want the newest run", runs, err)
	}
	lrange := func(c faultproxy.Command) bool { return c.Name() == "LRANGE" }
	one := func(c faultproxy.Command) bool {
		return lrange(c) && len(c.Args) == 4 && c.Args[2] == "0" && c.Args[3] == "0"
	}
	if n, all := s.proxy.Count(one), s.proxy.Count(lrange); n != 1 || all != 1 {
		t.Fatalf("Runs(limit 1) sent %d LRANGE commands, %d of them LRANGE key 0 0; want one, of one element", all, n)
	}
}

// A record sent again with its ID, as the scheduler resends a batch whose
// Record call failed, is kept once; records with other IDs, or none, each.
func TestStoreRecordsAnIDOnce(t *testing.T) {
	st := newStore(t, redistest.Start(t).Client(), 0)
	ctx := context.Background()
	run := func(token uint64) taskstate.Run { return taskstate.Run{Token: token, Outcome: "ok"} }
	for _, batch := range [][]taskstate.TaskRun{
		{{Task: "t", ID: "a.1", Run: run(1)}},
		{{Task: "t", ID: "a.1", Run: run(1)}, {Task: "t", ID: "a.2", Run: run(2)}}, // the first again, with a newer
		{{Task: "t", Run: run(3)}, {Task: "t", Run: run(3)}},                       // no ID: each kept
	} {
		if err := st.Record(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(ctx, "t", 0)
	var tokens []uint64
	for _, r := range runs {
		tokens = append(tokens, r.Token)
	}
	if err != nil || !slices.Equal(tokens, []uint64{3, 3, 2, 1}) {
		t.Fatalf("kept tokens %v, %v; want 3 3 2 1: the resent record once", tokens, err)
	}
}

// A Record sent again after the minute that its ID's call key lives (a
// node whose backlog waited out a longer outage) finds its run among the
// kept ones and adds nothing: the history keeps it once.
func TestStoreRecordResentAfterItsCallKeyExpired(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	s := newStore(t, c, 0)
	mine := taskstate.TaskRun{Task: "Payroll.Close", ID: "node-a.1", Run: taskstate.Run{Node: "node-a", Token: 7, Outcome: "ok"}}
	theirs := taskstate.TaskRun{Task: "Payroll.Close", ID: "node-b.1", Run: taskstate.Run{Node: "node-b", Token: 8, Outcome: "ok"}}
	for _, r := range []taskstate.TaskRun{mine, theirs} {
		if err := s.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.Del(ctx, "ndigo:{conformance}:call:record:node-a.1").Result(); err != nil || n != 1 {
		t.Fatalf("DEL of the record's call key = %d, %v; want 1: the key the store names after the ID", n, err)
	}
	if err := s.Record(ctx, mine, theirs); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "Payroll.Close", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Token != 8 || runs[1].Token != 7 {
		t.Fatalf("Runs after the resend = %+v; want the two runs once each, node-b's newest", runs)
	}
}

// The conformance harness's leak check finds a key of the namespace that
// has no expiry and is not stated permanent, and passes the stated ones.
func TestStoreLeaksFindsAKeyWithoutExpiry(t *testing.T) {
	c := redistest.Start(t).Client()
	ctx := context.Background()
	s := newStore(t, c, 0)
	if err := s.SetPaused(ctx, "Payroll.Close", taskstate.Pause{Paused: true, Note: "paused"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused(ctx, "Payroll.Open", taskstate.Pause{Note: "resumed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, taskstate.TaskRun{Task: "Payroll.Close", Run: taskstate.Run{Node: "a", Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	if err := storeLeaks(ctx, c, "conformance"); err != nil {
		t.Fatalf("storeLeaks of a store's own keys: %v", err)
	}
	if err := c.Persist(ctx, "ndigo:{conformance}:runs:Payroll.Close").Err(); err != nil {
		t.Fatal(err)
	}
	if err := storeLeaks(ctx, c, "conformance"); err == nil || !strings.Contains(err.Error(), "runs:Payroll.Close") {
		t.Fatalf("storeLeaks of a runs list without expiry = %v; want it named", err)
	}
}
