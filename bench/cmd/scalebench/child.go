package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-co-op/gocron/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// A node is one child process: one scheduler of one system with its own
// client. It writes to stdout, one line each:
//
//	R <task> <fire unix s> <lateness µs>   a run, flushed every 50ms
//	J <json message>                        ready, mark, owners, final
//
// and reads commands from stdin, one a line: "mark" (answer the counters),
// "owners" (answer who owns each task, ndigo only, and whether the node
// leads, gocron-elector only). SIGTERM stops it
// gracefully (ndigo: Scheduler.Stop; gocron: Shutdown) and makes it write
// its final message.
type node struct {
	name   string
	system string
	tasks  int

	out   *bufio.Writer
	outMu sync.Mutex // protects out
	runs  chan string

	counter *counter
	sched   *scheduling.Scheduler // ndigo systems
	el      *elector              // gocron-elector
	stop    func() error          // stops the scheduler gracefully
}

// message is a J line.
type message struct {
	Type   string            `json:"type"`
	Node   string            `json:"node"`
	RT     map[string]int64  `json:"rt,omitempty"`     // client round trips by kind, cumulative
	CPU    int64             `json:"cpu_us,omitempty"` // user+system CPU of the process, cumulative
	Owners map[string]string `json:"owners,omitempty"`
	Leader bool              `json:"leader,omitempty"` // gocron-elector: holds the lease
	Error  string            `json:"error,omitempty"`
}

func runChild() {
	n := &node{name: *childNode, system: *childSystem, tasks: *childTasks,
		out: bufio.NewWriterSize(os.Stdout, 1<<16), runs: make(chan string, 1<<16), counter: newCounter()}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	flushed := make(chan struct{})
	go n.writeRuns(flushed)
	if err := n.start(); err != nil {
		n.send(message{Type: "error", Error: err.Error()})
		os.Exit(1)
	}
	n.send(message{Type: "ready"})
	go n.commands()
	<-term
	err := n.stop()
	close(n.runs)
	<-flushed
	m := n.counters("final")
	if err != nil {
		m.Error = err.Error()
	}
	n.send(m)
	os.Exit(0)
}

// writeRuns writes the runs every 50ms, so that a SIGKILL loses at most the
// last 50ms of them (with -child-flush, ran writes them itself).
func (n *node) writeRuns(done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case r, ok := <-n.runs:
			if !ok {
				n.outMu.Lock()
				n.out.Flush()
				n.outMu.Unlock()
				return
			}
			n.outMu.Lock()
			n.out.WriteString(r)
			n.outMu.Unlock()
		case <-t.C:
			n.outMu.Lock()
			n.out.Flush()
			n.outMu.Unlock()
		}
	}
}

func (n *node) send(m message) {
	m.Node = n.name
	b, _ := json.Marshal(m)
	n.outMu.Lock()
	defer n.outMu.Unlock()
	n.out.WriteString("J ")
	n.out.Write(b)
	n.out.WriteString("\n")
	n.out.Flush()
}

func (n *node) commands() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "mark":
			n.send(n.counters("mark"))
		case "owners":
			m := message{Type: "owners", Owners: map[string]string{}}
			if n.sched != nil {
				for _, t := range n.sched.Tasks() {
					m.Owners[t.Name] = t.Owner
				}
			}
			if n.el != nil {
				m.Leader = n.el.IsLeader(context.Background()) == nil
			}
			n.send(m)
		}
	}
	// The parent is gone: stop as on SIGTERM.
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
}

func (n *node) counters(typ string) message {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := ru.Utime.Sec*1e6 + ru.Utime.Usec + ru.Stime.Sec*1e6 + ru.Stime.Usec
	return message{Type: typ, RT: n.counter.snapshot(), CPU: cpu}
}

// ran records a run of task i for the fire at nominal, started at start.
// With -child-flush it writes the run at once, before the task's function
// goes on, so that a run started before a SIGKILL is seen.
func (n *node) ran(i int, nominal, start time.Time) {
	line := "R " + strconv.Itoa(i) + " " + strconv.FormatInt(nominal.Unix(), 10) + " " +
		strconv.FormatInt(start.Sub(nominal).Microseconds(), 10) + "\n"
	if *childFlush {
		n.outMu.Lock()
		n.out.WriteString(line)
		n.out.Flush()
		n.outMu.Unlock()
		return
	}
	n.runs <- line
}

func taskName(i int) string { return "task" + strconv.Itoa(i) }

func (n *node) start() error {
	ctx := context.Background()
	switch n.system {
	case "ndigo", "ndigo-pg", "ndigo-etcd":
		var (
			closeDriver func()
			s           *scheduling.Scheduler
			closeClient func()
		)
		// Warnings and errors go to stderr, which the parent passes on: a
		// fire that failed says why (SCALEBENCH_LOG=info: every skip too).
		logLevel := slog.LevelWarn
		if os.Getenv("SCALEBENCH_LOG") == "info" {
			logLevel = slog.LevelInfo
		}
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})).With("node", n.name)
		switch n.system {
		case "ndigo":
			c := n.redisClient()
			rd, err := redislocks.New(redislocks.Options{Client: c, Namespace: "bench"})
			if err != nil {
				return err
			}
			st, err := redislocks.NewStore(redislocks.StoreOptions{Client: c, Namespace: "bench"})
			if err != nil {
				return err
			}
			closeDriver = func() { _ = rd.Close() }
			s = scheduling.New(scheduling.Config{Driver: rd, State: st, Spread: true, Node: n.name, Logger: logger})
			closeClient = func() { _ = c.Close() }
		case "ndigo-etcd":
			// Client round trips are not counted on etcd.
			c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*childEtcd, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return err
			}
			ed, err := etcdlocks.New(etcdlocks.Options{Client: c, Namespace: "bench"})
			if err != nil {
				_ = c.Close()
				return err
			}
			st, err := etcdlocks.NewStore(etcdlocks.StoreOptions{Client: c, Namespace: "bench"})
			if err != nil {
				_ = c.Close()
				return err
			}
			closeDriver = ed.Close
			s = scheduling.New(scheduling.Config{Driver: ed, State: st, Spread: true, Node: n.name, Logger: logger})
			closeClient = func() { _ = c.Close() }
		default:
			cfg, err := pgxpool.ParseConfig(*childPG)
			if err != nil {
				return err
			}
			cfg.ConnConfig.Tracer = n.counter
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				return err
			}
			pd, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: "bench"})
			if err != nil {
				return err
			}
			st, err := pglocks.NewStore(pglocks.StoreOptions{Pool: pool, Namespace: "bench"})
			if err != nil {
				return err
			}
			closeDriver = func() { _ = pd.Close() }
			s = scheduling.New(scheduling.Config{Driver: pd, State: st, Spread: true, Node: n.name, Logger: logger})
			closeClient = pool.Close
		}
		for i := range n.tasks {
			err := s.Add(scheduling.NewTask(func(ctx context.Context) error {
				start := time.Now()
				r, _ := scheduling.RunFromContext(ctx)
				n.ran(i, r.Fire, start)
				return nil
			}, scheduling.Name(taskName(i)), scheduling.Cron(*childCron), scheduling.Lock(taskName(i)), scheduling.LockTTL(*childTTL)))
			if err != nil {
				return err
			}
		}
		n.sched = s
		n.stop = func() error {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := s.Stop(stopCtx)
			closeDriver()
			closeClient()
			return err
		}
		return s.Start()
	case "gocron-locker", "gocron-elector":
		c := n.redisClient()
		rl := redislock.New(c)
		var opts []gocron.SchedulerOption
		var jobOpts []gocron.JobOption
		var el *elector
		if n.system == "gocron-locker" {
			jobOpts = append(jobOpts, gocron.WithDistributedJobLocker(locker{rl}))
		} else {
			el = newElector(rl, "gocron-leader", *childTTL, time.Second)
			n.el = el
			opts = append(opts, gocron.WithDistributedElector(el))
		}
		s, err := gocron.NewScheduler(opts...)
		if err != nil {
			return err
		}
		for i := range n.tasks {
			_, err := s.NewJob(gocron.CronJob(everySecond, true), gocron.NewTask(func() {
				// gocron hands the job no fire instant: the whole second at
				// or before the start stands for it.
				start := time.Now()
				n.ran(i, start.Truncate(time.Second), start)
			}), append(jobOpts, gocron.WithName(taskName(i)))...)
			if err != nil {
				return err
			}
		}
		n.stop = func() error {
			err := s.Shutdown()
			if el != nil {
				el.close()
			}
			_ = c.Close()
			return err
		}
		s.Start()
		return nil
	}
	return fmt.Errorf("scalebench: unknown system %q", n.system)
}

func (n *node) redisClient() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: *childAddr})
	c.AddHook(n.counter)
	return c
}

// locker is gocron's per-job Locker on bsm/redislock: the lock of a job is
// its name, taken for the lock TTL (-ttl) and released when the run ends.
type locker struct{ c *redislock.Client }

func (l locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lk, err := l.c.Obtain(ctx, "gocron:"+key, *childTTL, nil)
	if err != nil {
		return nil, err
	}
	return unlocker{lk}, nil
}

type unlocker struct{ l *redislock.Lock }

func (u unlocker) Unlock(ctx context.Context) error { return u.l.Release(ctx) }

// An elector is gocron's Elector on a bsm/redislock lease: every interval
// the leader extends its lease to ttl and the others try to take it.
// IsLeader answers nil only while the lease is held by the local reckoning:
// until ttl after the start of the call that last took or extended it.
type elector struct {
	c        *redislock.Client
	key      string
	ttl      time.Duration
	interval time.Duration
	done     chan struct{}
	exited   chan struct{}

	mu    sync.Mutex
	lease *redislock.Lock // nil while not leader
	until time.Time       // the lease's end by the local clock
}

var errNotLeader = errors.New("not the leader")

func newElector(c *redislock.Client, key string, ttl, interval time.Duration) *elector {
	e := &elector{c: c, key: key, ttl: ttl, interval: interval, done: make(chan struct{}), exited: make(chan struct{})}
	go e.loop()
	return e
}

func (e *elector) IsLeader(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil || !time.Now().Before(e.until) {
		return errNotLeader
	}
	return nil
}

func (e *elector) loop() {
	defer close(e.exited)
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		e.renew()
		select {
		case <-e.done:
			return
		case <-t.C:
		}
	}
}

func (e *elector) renew() {
	ctx, cancel := context.WithTimeout(context.Background(), e.interval)
	defer cancel()
	e.mu.Lock()
	lease := e.lease
	e.mu.Unlock()
	sent := time.Now()
	if lease == nil {
		l, err := e.c.Obtain(ctx, e.key, e.ttl, nil)
		if err != nil {
			return
		}
		lease = l
	} else if err := lease.Refresh(ctx, e.ttl, nil); errors.Is(err, redislock.ErrNotObtained) {
		e.mu.Lock()
		e.lease = nil
		e.mu.Unlock()
		return
	} else if err != nil {
		return // the local deadline still holds; the next tick retries
	}
	e.mu.Lock()
	e.lease, e.until = lease, sent.Add(e.ttl)
	e.mu.Unlock()
}

func (e *elector) close() {
	close(e.done)
	<-e.exited
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease != nil {
		_ = e.lease.Release(context.Background())
		e.lease = nil
	}
}

// A counter counts a node's client round trips by kind: a go-redis hook (one
// per command, one per pipeline) and a pgx tracer (one per query, exec or
// batch). Pub/sub is not counted: the subscription is made once per node, and
// a notification is pushed, not asked for.
type counter struct {
	mu sync.Mutex
	by map[string]int64
}

func newCounter() *counter { return &counter{by: map[string]int64{}} }

func (c *counter) add(kind string) {
	c.mu.Lock()
	c.by[kind]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.by))
	for k, v := range c.by {
		m[k] = v
	}
	return m
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(redisKind(cmd))
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// Distinct kinds in order, each once: a recorder's pipeline of k
		// record scripts is one kind of round trip whatever k.
		var kinds []string
		for _, cmd := range cmds {
			if k := redisKind(cmd); !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		c.add("pipeline[" + strings.Join(kinds, ", ") + "]")
		return next(ctx, cmds)
	}
}

var (
	taskNumber = regexp.MustCompile(`task\d+`)
	longToken  = regexp.MustCompile(`[0-9a-z]{8,}(\.[0-9a-z]+)?`)
)

// redisKind names a command for the breakdown: its name, and for a script
// its SHA's first 8 digits and its first key with task numbers and nonces
// elided.
func redisKind(cmd redis.Cmder) string {
	name := strings.ToLower(cmd.Name())
	args := cmd.Args()
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
		kind := name
		if len(args) > 1 {
			if s, ok := args[1].(string); ok && name != "eval" && len(s) >= 8 {
				kind += " " + s[:8]
			}
		}
		if len(args) > 3 {
			if k, ok := args[2].(int); !ok || k > 0 {
				kind += " " + normKey(fmt.Sprint(args[3]))
			}
		}
		return kind
	}
	if len(args) > 1 {
		return name + " " + normKey(fmt.Sprint(args[1]))
	}
	return name
}

func normKey(k string) string {
	k = taskNumber.ReplaceAllString(k, "task*")
	return longToken.ReplaceAllStringFunc(k, func(s string) string {
		if strings.HasPrefix(s, "task") || !strings.ContainsAny(s, "0123456789") {
			return s // a word, not a nonce or hash
		}
		return "…"
	})
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.add("query " + sqlKind(data.SQL))
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	kinds := []string{}
	if data.Batch != nil {
		for _, q := range data.Batch.QueuedQueries {
			kinds = append(kinds, sqlKind(q.SQL))
		}
	}
	c.add("batch[" + strings.Join(kinds, "; ") + "]")
	return ctx
}

func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

var spaces = regexp.MustCompile(`\s+`)

// sqlKind shortens a statement to its first 60 characters.
func sqlKind(sql string) string {
	s := strings.TrimSpace(spaces.ReplaceAllString(sql, " "))
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
