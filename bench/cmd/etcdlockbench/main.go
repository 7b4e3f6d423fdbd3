// Command etcdlockbench measures the ndigo etcd lock driver beside etcd's
// own concurrency.Mutex and beside ndigo's Redis and PostgreSQL drivers,
// each on a private server started for the run on this machine (one etcd
// member, redis-server, PostgreSQL; none durable to disk: etcd's data on
// /dev/shm where it can, Redis without persistence, PostgreSQL with
// fsync off), and prints a Markdown table of medians over several runs
// with ratios computed within each run.
//
//	cd bench && go run ./cmd/etcdlockbench -runs 5
//
// Scenarios: acquire+release cycles on distinct keys (one per goroutine)
// at 1, 16 and 64 goroutines, and release-to-waiter handoff latency with
// one holder and one waiter. Every contender waits as it is meant to: the
// ndigo drivers with locks.Wait (woken by the release notification: an
// etcd watch, Redis pub/sub, PostgreSQL LISTEN), concurrency.Mutex with its
// Lock, which watches the key ahead of it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ndigo/ndigo/bench/lockbench"
	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdproc"
	"github.com/ndigo/ndigo/internal/pgproc"
	"github.com/ndigo/ndigo/internal/redisproc"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
)

var (
	duration = flag.Duration("duration", 2*time.Second, "measured time per cycle scenario")
	runs     = flag.Int("runs", 5, "runs; the table shows medians")
	handoffs = flag.Int("handoffs", 300, "handoffs measured per contender and run")
	concs    = flag.String("goroutines", "1,16,64", "goroutine counts")
	only     = flag.String("only", "", "comma-separated parts of the names of the contenders to run (default all)")
)

// ttl is every contender's lease; no benchmark lets it expire.
const ttl = 10 * time.Second

const ours = "ndigo etcdlocks"

// servers are the private servers of the run.
type servers struct {
	etcd  *etcdproc.Cluster
	redis *redisproc.Server
	pg    *pgproc.Server
}

// A factory makes a contender on fresh clients; calls counts the round
// trips its clients send.
type factory struct {
	name string
	make func(ctx context.Context, s *servers, calls *atomic.Int64) (*lockbench.Contender, error)
}

func factories() []factory {
	all := []factory{
		{ours, func(ctx context.Context, s *servers, calls *atomic.Int64) (*lockbench.Contender, error) {
			c, err := etcdClient(s, calls)
			if err != nil {
				return nil, err
			}
			d, err := etcdlocks.New(etcdlocks.Options{Client: c, Namespace: "bench"})
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			return lockbench.WaitFor(d, ttl, func() { d.Close(); _ = c.Close() }), nil
		}},
		{"etcd concurrency.Mutex", func(ctx context.Context, s *servers, calls *atomic.Int64) (*lockbench.Contender, error) {
			c, err := etcdClient(s, calls)
			if err != nil {
				return nil, err
			}
			// A session (an etcd lease kept alive) per concurrent holder, as
			// each process has its own: two mutexes of one session on one
			// key share the key, so the second would not wait. Sessions are
			// reused once their mutex is unlocked.
			var mu sync.Mutex
			var free, all []*concurrency.Session
			return &lockbench.Contender{
				Lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					mu.Lock()
					var sess *concurrency.Session
					if n := len(free); n > 0 {
						sess, free = free[n-1], free[:n-1]
					}
					mu.Unlock()
					if sess == nil {
						var err error
						if sess, err = concurrency.NewSession(c, concurrency.WithTTL(int(ttl/time.Second))); err != nil {
							return nil, err
						}
						mu.Lock()
						all = append(all, sess)
						mu.Unlock()
					}
					put := func() { mu.Lock(); free = append(free, sess); mu.Unlock() }
					m := concurrency.NewMutex(sess, "/mutexbench/"+key)
					if err := m.Lock(ctx); err != nil {
						put()
						return nil, err
					}
					return func(ctx context.Context) error { err := m.Unlock(ctx); put(); return err }, nil
				},
				Close: func() {
					for _, s := range all {
						_ = s.Close()
					}
					_ = c.Close()
				},
			}, nil
		}},
		{"ndigo redislocks", func(ctx context.Context, s *servers, calls *atomic.Int64) (*lockbench.Contender, error) {
			c := redis.NewClient(&redis.Options{Addr: s.redis.Addr(), PoolSize: 128})
			c.AddHook(redisCounter{calls})
			d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "bench"})
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			return lockbench.WaitFor(d, ttl, func() { _ = d.Close(); _ = c.Close() }), nil
		}},
		{"ndigo pglocks", func(ctx context.Context, s *servers, calls *atomic.Int64) (*lockbench.Contender, error) {
			cfg, err := pgxpool.ParseConfig(s.pg.URL())
			if err != nil {
				return nil, err
			}
			cfg.MaxConns = 80
			cfg.ConnConfig.Tracer = pgCounter{calls}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return nil, err
			}
			d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
			if err == nil {
				err = d.CreateSchema(ctx)
			}
			if err != nil {
				pool.Close()
				return nil, err
			}
			return lockbench.WaitFor(d, ttl, func() { _ = d.Close(); pool.Close() }), nil
		}},
	}
	return lockbench.Select(all, func(f factory) string { return f.name }, *only)
}

// etcdClient is a client of the run's member whose unary calls (every
// etcd request but watches and keep-alive streams) add to calls.
func etcdClient(s *servers, calls *atomic.Int64) (*clientv3.Client, error) {
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return clientv3.New(clientv3.Config{Endpoints: s.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
}

// redisCounter is a go-redis hook counting the commands a client sends.
type redisCounter struct{ n *atomic.Int64 }

func (c redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// pgCounter is a pgx tracer counting the statements a pool sends.
type pgCounter struct{ n *atomic.Int64 }

func (c pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

var metrics = []lockbench.Metric{{Header: "round trips/acq", Format: "%.2f"}}

func main() {
	flag.Parse()
	log.SetFlags(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := start()
	if err != nil {
		log.Fatal(err)
	}
	defer s.stop()
	fatalf := func(format string, args ...any) {
		s.stop()
		log.Fatalf(format, args...)
	}
	ns, err := lockbench.ParseGoroutines(*concs)
	if err != nil {
		fatalf("bad -goroutines: %v", err)
	}
	byName := map[string]factory{}
	var names []string
	for _, f := range factories() {
		byName[f.name] = f
		names = append(names, f.name)
	}
	results, err := lockbench.Run(ctx, lockbench.Plan{
		Runs: *runs, Goroutines: ns, Modes: "distinct", Names: names, Handoffs: names, Metrics: metrics,
		Cycles: func(ctx context.Context, name string, n int, shared bool) (lockbench.Cell, error) {
			var calls atomic.Int64
			con, err := byName[name].make(ctx, s, &calls)
			if err != nil {
				return lockbench.Cell{}, err
			}
			defer con.Close()
			keys := lockbench.Keys(n, shared)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s-%d", keys[i], time.Now().UnixNano()) // no run finds another's keys
			}
			if err := lockbench.Warm(ctx, con, keys); err != nil {
				return lockbench.Cell{}, err
			}
			calls.Store(0)
			cell, err := lockbench.Cycles(ctx, con, keys, *duration)
			cell.Metrics = []float64{float64(calls.Load()) / float64(max(cell.Acquired, 1))}
			return cell, err
		},
		Handoff: func(ctx context.Context, name string) (lockbench.Cell, error) {
			var calls atomic.Int64
			con, err := byName[name].make(ctx, s, &calls)
			if err != nil {
				return lockbench.Cell{}, err
			}
			defer con.Close()
			return lockbench.Handoff(ctx, con, *handoffs)
		},
	})
	if lockbench.Interrupted(err) {
		return
	}
	if err != nil {
		fatalf("%v", err)
	}
	report(os.Stdout, results, names)
}

func start() (*servers, error) {
	s := &servers{}
	var err error
	if s.etcd, err = etcdproc.StartCluster(etcdproc.Options{}); err != nil {
		return nil, err
	}
	if s.redis, err = redisproc.Start(redisproc.Options{}); err != nil {
		s.stop()
		return nil, err
	}
	if s.pg, err = pgproc.Start(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *servers) stop() {
	if s.etcd != nil {
		s.etcd.Stop()
	}
	if s.redis != nil {
		s.redis.Stop()
	}
	if s.pg != nil {
		s.pg.Stop()
	}
}

func report(w io.Writer, results *lockbench.Results, names []string) {
	fmt.Fprintf(w, "Command: `cd bench && go run ./cmd/etcdlockbench %s`\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "One etcd member (%s), redis-server and PostgreSQL on this machine, none durable to disk; Go %s, GOMAXPROCS %d, "+
		"%d runs of %v per scenario, %d handoffs per run; medians over runs. Ratios are ndigo etcdlocks' throughput over the "+
		"other's, computed within each run, then the median. round trips/acq: requests the client sent (etcd unary calls, "+
		"Redis commands or pipelines, PostgreSQL statements) per successful acquisition, its release included.\n\n",
		etcdVersion(), runtime.Version(), runtime.GOMAXPROCS(0), *runs, *duration, *handoffs)
	lockbench.Table{Ours: ours, Names: names, Metrics: metrics, Handoffs: *handoffs}.Write(w, results)
}

// etcdVersion is the etcd binary's version line.
func etcdVersion() string {
	bin, err := etcdproc.LookPath()
	if err != nil {
		return "etcd"
	}
	out, _ := execOutput(bin, "--version")
	first, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(first)
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
