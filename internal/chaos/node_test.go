package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/ndigo/ndigo/app"
	"github.com/ndigo/ndigo/config"
	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
	"github.com/ndigo/ndigo/redislocks"
	"github.com/ndigo/ndigo/scheduling"
)

// A node is the test binary re-executed with CHAOS_ROLE=node: an ndigo app
// (app.Run, redislocks.Module or pglocks.Module, scheduling) with one locked
// task, Job, that runs longer than the payroll example's so that a test can
// kill, pause or stop its holder mid-run. Its settings come from the
// environment:
//
//	CHAOS_REDIS   lock Redis host:port          CHAOS_LEDGER  ledger Redis host:port
//	CHAOS_NODE    node name                     CHAOS_CRON    schedule (default @every 1s)
//	CHAOS_TTL     lock TTL                      CHAOS_WORK    how long a run works
//	CHAOS_RENEW   "1" to renew the lease while the run works
//	CHAOS_STOP_TIMEOUT  the application's stop timeout (default fx's 15s)
//	CHAOS_SPREAD  the spread setting: auto (default), on or off
//	CHAOS_POSTGRES  a PostgreSQL URL: lock there (pglocks) instead of on Redis,
//	              and keep the ledger there, guarded (see pgLedger)
//	CHAOS_HOLD_TX "1" to keep the run's guarded ledger transaction open while
//	              it works (PostgreSQL only)
//	CHAOS_OVERLAP the overlap policy (scheduling.Overlap): skip (default),
//	              buffer-one, cancel-previous, or allow:N for allow with
//	              scheduling.MaxConcurrent(N)
//
// A run writes a "start" entry to the fenced ledger with its token, logs
// "run start", works
// until CHAOS_WORK passes or its context ends, then, as a stale holder that
// ignores its cancelled context would, extends its lease and writes an "end"
// entry, and logs "run end" with what the context's cause, the Extend and
// the end write returned. It returns nil, but for a run that a later fire
// superseded (cancel-previous), which returns its context's cause, as a
// task that honours its context does, so that the run is recorded as
// cancelled. Logs are JSON lines on stderr.
//
// A ledger entry is "what fire node token key", key being the lease's
// (with allow:N, a slot key of the lock, locks.SlotKey): the fence is kept
// per key, since the tokens of different slots are not comparable.
const (
	nodeLock    = "job"
	nodeNS      = "chaos"
	nodeTask    = "Job"
	nodeHistory = 1000 // runs per task the Redis task state keeps
)

// ledgerScript is the payroll example's fenced append, read from its source
// (go:embed cannot reach outside this package): a test runs in its package's
// directory, and so does a node, which is the test binary re-executed.
var ledgerScript = redis.NewScript(readFile("../../examples/payroll/ledger.lua"))

func readFile(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ledgerKeys are the fenced ledger's list and high-water mark.
var ledgerKeys = []string{"chaos:{ledger}", "chaos:{ledger}:high"}

// fenceKeys are the ledger keys that the lease on key writes through: the
// one list, and the high-water mark of the lock's key (ledgerKeys) or of
// one of its slots, since each slot's tokens count on their own.
func fenceKeys(key string) []string {
	if key == nodeLock {
		return ledgerKeys
	}
	return []string{ledgerKeys[0], ledgerKeys[1] + ":" + key}
}

// errStale is a write the ledger rejected.
var errStale = errors.New("chaos: ledger rejected a stale fencing token")

func appendLedger(ctx context.Context, c redis.Scripter, token uint64, entry string) error {
	return appendFenced(ctx, c, ledgerKeys, token, entry)
}

// appendFenced is appendLedger through the fence of keys (see fenceKeys).
func appendFenced(ctx context.Context, c redis.Scripter, keys []string, token uint64, entry string) error {
	res, err := ledgerScript.Run(ctx, c, keys, token, entry).Slice()
	if err != nil {
		return fmt.Errorf("chaos: ledger append: %w", err)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return fmt.Errorf("%w: token %d, ledger at %v", errStale, token, res[1])
	}
	return nil
}

// A ledger is where one run writes its start and end entries as the
// holder of its lease: its writes are refused once a successor holds the
// lock.
type ledger interface {
	start(ctx context.Context, lease locks.Lease, entry string) error
	end(ctx context.Context, lease locks.Lease, entry string) error
}

// redisLedger is the payroll example's fenced list: a write is refused once
// a greater token of the lease's key has written.
type redisLedger struct{ c redis.Scripter }

func (l redisLedger) start(ctx context.Context, lease locks.Lease, entry string) error {
	return appendFenced(ctx, l.c, fenceKeys(lease.Key()), lease.Token(), entry)
}

func (l redisLedger) end(ctx context.Context, lease locks.Lease, entry string) error {
	return appendFenced(ctx, l.c, fenceKeys(lease.Key()), lease.Token(), entry)
}

// pgLedgerSchema is the ledger table on PostgreSQL, made by the test before
// it starts nodes: an entry's fields, as in the Redis ledger's text.
const pgLedgerSchema = `CREATE TABLE IF NOT EXISTS chaos_ledger (what text, fire text, node text, token bigint)`

// pgLedger writes each entry in a transaction guarded by pglocks.Guard, so
// that it commits only while the run still holds its lease. With hold, the
// start entry's transaction stays open while the run works and the end
// entry commits with it, as a run that does its work in one guarded
// transaction would.
type pgLedger struct {
	pool *pgxpool.Pool
	hold bool
	tx   pgx.Tx // the open transaction of a held run
}

func (l *pgLedger) start(ctx context.Context, lease locks.Lease, entry string) error {
	return l.write(ctx, lease, entry, !l.hold)
}

func (l *pgLedger) end(ctx context.Context, lease locks.Lease, entry string) error {
	return l.write(ctx, lease, entry, true)
}

// write appends entry in l's open transaction, or a new one, guarded, and
// commits if commit is set.
func (l *pgLedger) write(ctx context.Context, lease locks.Lease, entry string, commit bool) (err error) {
	tx := l.tx
	l.tx = nil
	if tx == nil {
		if tx, err = l.pool.Begin(ctx); err != nil {
			return fmt.Errorf("chaos: ledger begin: %w", err)
		}
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := pglocks.Guard(ctx, tx, lease); err != nil {
		return err
	}
	f := strings.Fields(entry)
	if _, err := tx.Exec(ctx, "INSERT INTO chaos_ledger VALUES ($1, $2, $3, $4)", f[0], f[1], f[2], lease.Token()); err != nil {
		return fmt.Errorf("chaos: ledger insert: %w", err)
	}
	if !commit {
		l.tx = tx
		return nil
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("chaos: ledger commit: %w", err)
	}
	return nil
}

// startNode starts the test binary as a chaos node named name on the Redis
// at redisAddr, with env added to its environment.
func startNode(p *nodetest.Procs, name, redisAddr string, env ...string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+roleNode, "CHAOS_NODE="+name, "CHAOS_REDIS="+redisAddr)
	cmd.Env = append(cmd.Env, env...)
	p.Start(name, cmd)
}

func nodeMain() int {
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(env(k, def))
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos node: %s: %v\n", k, err)
			os.Exit(2)
		}
		return d
	}
	node := env("CHAOS_NODE", "node-"+strconv.Itoa(os.Getpid()))
	ttl, work := dur("CHAOS_TTL", "2s"), dur("CHAOS_WORK", "300ms")
	opts := []scheduling.Option{
		scheduling.Name(nodeTask), scheduling.Cron(env("CHAOS_CRON", "@every 1s")),
		scheduling.Lock(nodeLock), scheduling.LockTTL(ttl),
	}
	if os.Getenv("CHAOS_RENEW") == "1" {
		opts = append(opts, scheduling.Renew())
	}
	if o := os.Getenv("CHAOS_OVERLAP"); o != "" {
		policy, n, allow := strings.Cut(o, ":")
		opts = append(opts, scheduling.Overlap(policy))
		if allow {
			limit, err := strconv.Atoi(n)
			if err != nil {
				fmt.Fprintf(os.Stderr, "chaos node: CHAOS_OVERLAP %q: %v\n", o, err)
				os.Exit(2)
			}
			opts = append(opts, scheduling.MaxConcurrent(limit))
		}
	}
	fw := app.Framework{Node: node, Log: app.Log{Format: "json", Level: "info"}, Spread: env("CHAOS_SPREAD", "auto")}
	var store fx.Option
	if pg := os.Getenv("CHAOS_POSTGRES"); pg != "" {
		fw.Postgres = app.Postgres{URL: config.SecretURL(pg), Namespace: nodeNS}
		hold := os.Getenv("CHAOS_HOLD_TX") == "1"
		store = fx.Options(pglocks.Module, fx.Provide(func(p *pgxpool.Pool) func() ledger {
			return func() ledger { return &pgLedger{pool: p, hold: hold} }
		}))
	} else {
		// The shared history keeps every record of a test's few minutes at
		// most, so that a test reads them all (nodeHistory).
		fw.Redis = app.Redis{URL: config.SecretURL("redis://" + os.Getenv("CHAOS_REDIS")), Namespace: nodeNS, History: nodeHistory}
		c := redis.NewClient(&redis.Options{Addr: env("CHAOS_LEDGER", os.Getenv("CHAOS_REDIS"))})
		defer c.Close()
		store = fx.Options(redislocks.Module, fx.Provide(func() func() ledger {
			return func() ledger { return redisLedger{c} }
		}))
	}
	err := app.Run(context.Background(),
		fx.StopTimeout(dur("CHAOS_STOP_TIMEOUT", "15s")),
		fx.Supply(fw),
		store,
		scheduling.Provide(func(log *slog.Logger, newLedger func() ledger) scheduling.Task {
			return scheduling.NewTask(func(ctx context.Context) error {
				return job(ctx, log, newLedger(), work, ttl)
			}, opts...)
		}),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos node %s: %v\n", node, err)
		return 1
	}
	return 0
}

func job(ctx context.Context, log *slog.Logger, ledger ledger, work, ttl time.Duration) error {
	run, _ := scheduling.RunFromContext(ctx)
	lease, _ := locks.FromContext(ctx)
	fire := nodetest.FireString(run.Fire)
	entry := func(what string) string {
		return fmt.Sprintf("%s %s %s %d %s", what, fire, run.Node, lease.Token(), lease.Key())
	}
	bounded := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	}
	wctx, cancel := bounded()
	startErr := ledger.start(wctx, lease, entry("start"))
	cancel()
	log.Info("run start", "fire", fire, "node", run.Node, "token", lease.Token(), "goroutines", runtime.NumGoroutine(),
		"start_ledger", text(startErr))
	timer := time.NewTimer(work)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	cause := context.Cause(ctx)
	wctx, cancel = bounded()
	defer cancel()
	extendErr := lease.Extend(wctx, ttl)
	endErr := ledger.end(wctx, lease, entry("end"))
	log.Info("run end", "fire", fire, "node", run.Node, "token", lease.Token(),
		"cause", text(cause), "extend", text(extendErr), "ledger", text(endErr))
	if errors.Is(cause, scheduling.ErrSuperseded) {
		return cause
	}
	return nil
}

func text(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
