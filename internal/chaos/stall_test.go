package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/pglocks"
)

var stallN = flag.Int("stall.n", 5, "stalls of a holder per store in TestStalledHoldersAreFenced (make chaos: 100)")

// The stall holder is the test binary re-executed with CHAOS_ROLE set to
// roleStallHolder: one process that holds the key stallKey round after
// round, as the test tells it on its stdin, and answers in JSON lines
// (stallEvent) on its stdout. Its settings come from the environment:
//
//	STALL_STORE  postgres or etcd        STALL_TTL  its leases' TTL
//	STALL_PG     the PostgreSQL URL      STALL_ETCD the etcd endpoints, comma-separated
//	STALL_NS     the drivers' namespace (and the etcd ledger's prefix)
//
// Commands, one a line:
//
//	acquire R  acquire stallKey for STALL_TTL and make the round's run
//	           context with locks.WithLease, as the scheduler cancels a run
//	           when its lease's Done closes; answer "held". A goroutine
//	           answers "cancelled" the moment the run context ends.
//	write R    as a stale holder that ignores its context would: note
//	           whether the run context is cancelled already, write the
//	           entry "stale" of round R through Guard at once, with a
//	           context of its own, wait (up to a failure bound) until the
//	           run context is cancelled, release the lease, and answer
//	           "wrote".
const (
	roleStallHolder = "stallholder"
	stallKey        = "stall"
)

// A stallEvent is one line of the stall holder's answers.
type stallEvent struct {
	Ev    string `json:"ev"`              // held, cancelled, wrote, error
	Round int    `json:"round"`           // the round it answers
	Token uint64 `json:"token,omitempty"` // held: the lease's token
	At    int64  `json:"at,omitempty"`    // held: when Acquire was sent; cancelled: when the run context ended (Unix ns)
	Cause string `json:"cause,omitempty"` // cancelled, wrote: the run context's cause
	// wrote: whether the run context was already cancelled when the
	// guarded write was sent, and what the write and the release returned.
	CancelledAtWrite bool   `json:"cancelled_at_write,omitempty"`
	Write            string `json:"write,omitempty"`
	Release          string `json:"release,omitempty"`
	Err              string `json:"err,omitempty"` // error: what failed
}

// A stallStore is a store whose Guard fences a stale holder's writes: a
// driver on it and a ledger written through its Guard.
type stallStore struct {
	name string
	ttl  time.Duration // the stall holder's leases' TTL
	// start starts a server and returns the stall holder's environment.
	start func(t *testing.T) []string
}

// stallSide is one process's view of a stall store: its driver, a guarded
// ledger write of writer's entry for a round, and what reads a round's
// entries ("writer token"), and, on PostgreSQL, the lease's expiry.
type stallSide struct {
	driver  locks.Driver
	write   func(ctx context.Context, lease locks.Lease, round int, writer string) error
	entries func(ctx context.Context, round int) ([]string, error)
	// expiry, if not nil, reads when the store expires the lease of
	// stallKey with token, on the store's clock (the machine's).
	expiry func(ctx context.Context, token uint64) (time.Time, error)
	close  func()
}

// stallLedgerSchema is the PostgreSQL ledger: one row per guarded write.
const stallLedgerSchema = `CREATE TABLE IF NOT EXISTS stall_ledger (round int, writer text, token bigint)`

var stallStores = []stallStore{
	{
		name: "postgres",
		ttl:  500 * time.Millisecond,
		start: func(t *testing.T) []string {
			srv := pgtest.Start(t)
			return []string{"STALL_STORE=postgres", "STALL_PG=" + srv.URL()}
		},
	},
	{
		name: "etcd",
		// etcd counts leases in whole seconds, and etcdproc's members
		// grant 1s at least (etcdproc.MinLeaseTTL).
		ttl: time.Second,
		start: func(t *testing.T) []string {
			c := etcdtest.StartCluster(t, 1)
			return []string{"STALL_STORE=etcd", "STALL_ETCD=" + strings.Join(c.Endpoints(), ",")}
		},
	},
}

// openStallSide opens the store that env (the stall holder's environment)
// names.
func openStallSide(ctx context.Context, env func(string) string) (*stallSide, error) {
	ns := env("STALL_NS")
	switch env("STALL_STORE") {
	case "postgres":
		pool, err := pgxpool.New(ctx, env("STALL_PG"))
		if err != nil {
			return nil, err
		}
		d, err := pglocks.New(pglocks.Options{Pool: pool, Namespace: ns})
		if err == nil {
			err = d.CreateSchema(ctx)
		}
		if err == nil {
			_, err = pool.Exec(ctx, stallLedgerSchema)
		}
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &stallSide{
			driver: d,
			write: func(ctx context.Context, lease locks.Lease, round int, writer string) (err error) {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() {
					if err != nil {
						_ = tx.Rollback(context.WithoutCancel(ctx))
					}
				}()
				if err := pglocks.Guard(ctx, tx, lease); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, "INSERT INTO stall_ledger VALUES ($1, $2, $3)", round, writer, int64(lease.Token())); err != nil {
					return err
				}
				return tx.Commit(ctx)
			},
			entries: func(ctx context.Context, round int) ([]string, error) {
				rows, err := pool.Query(ctx, "SELECT writer, token FROM stall_ledger WHERE round = $1", round)
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					var w string
					var tok int64
					if err := rows.Scan(&w, &tok); err != nil {
						return nil, err
					}
					out = append(out, fmt.Sprintf("%s %d", w, tok))
				}
				return out, rows.Err()
			},
			expiry: func(ctx context.Context, token uint64) (at time.Time, err error) {
				err = pool.QueryRow(ctx, "SELECT expires_at FROM ndigo_locks WHERE ns = $1 AND key = $2 AND token = $3",
					ns, stallKey, int64(token)).Scan(&at)
				return at, err
			},
			close: func() { _ = d.Close(); pool.Close() },
		}, nil
	case "etcd":
		c, err := clientv3.New(etcdtest.Config(strings.Split(env("STALL_ETCD"), ",")...))
		if err != nil {
			return nil, err
		}
		d, err := etcdlocks.New(etcdlocks.Options{Client: c, Namespace: ns})
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		prefix := func(round int) string { return fmt.Sprintf("stall-ledger/%s/%d/", ns, round) }
		return &stallSide{
			driver: d,
			write: func(ctx context.Context, lease locks.Lease, round int, writer string) error {
				entry := fmt.Sprintf("%s %d", writer, lease.Token())
				_, err := etcdlocks.Guard(ctx, lease, clientv3.OpPut(prefix(round)+entry, entry))
				return err
			},
			entries: func(ctx context.Context, round int) ([]string, error) {
				resp, err := c.Get(ctx, prefix(round), clientv3.WithPrefix())
				if err != nil {
					return nil, err
				}
				var out []string
				for _, kv := range resp.Kvs {
					out = append(out, string(kv.Value))
				}
				return out, nil
			},
			close: func() { d.Close(); _ = c.Close() },
		}, nil
	}
	return nil, fmt.Errorf("chaos: STALL_STORE %q", env("STALL_STORE"))
}

// stallHolderMain is the stall holder's program (see roleStallHolder).
func stallHolderMain() int {
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex // serialises the answers
	say := func(e stallEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(e)
	}
	fail := func(round int, err error) int {
		say(stallEvent{Ev: "error", Round: round, Err: err.Error()})
		return 1
	}
	ttl, err := time.ParseDuration(os.Getenv("STALL_TTL"))
	if err != nil {
		return fail(0, err)
	}
	side, err := openStallSide(context.Background(), os.Getenv)
	if err != nil {
		return fail(0, err)
	}
	defer side.close()
	var (
		lease  locks.Lease
		run    context.Context
		cancel context.CancelFunc
	)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		round, _ := strconv.Atoi(arg)
		switch cmd {
		case "acquire":
			sent := time.Now()
			actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
			lease, err = side.driver.Acquire(actx, stallKey, ttl)
			acancel()
			if err != nil {
				return fail(round, fmt.Errorf("acquire: %w", err))
			}
			run, cancel = locks.WithLease(context.Background(), lease)
			go func(run context.Context, round int) {
				<-run.Done()
				at := time.Now()
				say(stallEvent{Ev: "cancelled", Round: round, At: at.UnixNano(), Cause: text(context.Cause(run))})
			}(run, round)
			say(stallEvent{Ev: "held", Round: round, Token: lease.Token(), At: sent.UnixNano()})
		case "write":
			if lease == nil {
				return fail(round, errors.New("write without a lease"))
			}
			// The write first, at once: a run resumed from a stall may run
			// before the goroutine that cancels its context does.
			e := stallEvent{Ev: "wrote", Round: round, CancelledAtWrite: run.Err() != nil}
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
			e.Write = text(side.write(wctx, lease, round, "stale"))
			// A failure bound, not a measure: the cancellation is due
			// already; the "cancelled" answer times it.
			bound := time.NewTimer(30 * time.Second)
			select {
			case <-run.Done():
				e.Cause = text(context.Cause(run))
			case <-bound.C:
				e.Cause = "not cancelled within 30s"
			}
			bound.Stop()
			e.Release = text(lease.Release(wctx))
			wcancel()
			cancel()
			lease = nil
			say(e)
		default:
			return fail(round, fmt.Errorf("unknown command %q", in.Text()))
		}
	}
	return 0
}

// A stallHolder is the test's end of a running stall holder.
type stallHolder struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan stallEvent
	stderr *strings.Builder
}

func startStallHolder(t *testing.T, env []string) *stallHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+roleStallHolder), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &stallHolder{t: t, cmd: cmd, stdin: stdin, events: make(chan stallEvent, 16), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: h.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(h.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e stallEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = stallEvent{Ev: "error", Err: "unreadable answer: " + sc.Text()}
			}
			h.events <- e
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		exited := make(chan error, 1)
		go func() {
			for range h.events { // drain, so that the reader ends
			}
			<-read
			exited <- cmd.Wait()
		}()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("stall holder exited with %v; stderr:\n%s", err, h.stderr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("stall holder did not exit within 30s of its stdin's end; killed")
		}
	})
	return h
}

// lockedWriter makes a writer safe for the exec package's copying goroutine
// and the test's reads.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// send writes one command to the holder.
func (h *stallHolder) send(cmd string, round int) {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.stdin, "%s %d\n", cmd, round); err != nil {
		h.t.Fatalf("stall holder: %s %d: %v", cmd, round, err)
	}
}

// await returns the holder's next answer ev of round, keeping the other
// answers it reads in got. It fails the test after a generous bound.
func (h *stallHolder) await(ev string, round int, got map[string]stallEvent) stallEvent {
	h.t.Helper()
	if e, ok := got[ev]; ok {
		return e
	}
	bound := time.NewTimer(60 * time.Second)
	defer bound.Stop()
	for {
		select {
		case e, ok := <-h.events:
			if !ok {
				h.t.Fatalf("stall holder exited awaiting %q of round %d; stderr:\n%s", ev, round, h.stderr)
			}
			if e.Ev == "error" {
				h.t.Fatalf("stall holder, round %d: %s; stderr:\n%s", e.Round, e.Err, h.stderr)
			}
			if e.Round != round {
				h.t.Fatalf("stall holder answered %+v in round %d", e, round)
			}
			got[e.Ev] = e
			if e.Ev == ev {
				return e
			}
		case <-bound.C:
			h.t.Fatalf("stall holder: no %q of round %d within 60s", ev, round)
		}
	}
}

// A holder stopped (SIGSTOP, as a long GC pause or a frozen VM would) past
// its lease and resumed, stallN times on PostgreSQL and on etcd: while it is
// stopped a successor acquires the key (with a greater token) and writes
// through Guard; resumed, the holder finds its run context cancelled with
// ErrLeaseLost before its write, and its write through Guard is refused with
// ErrLeaseLost. The ledger is read back: no stale entry, the successor's
// entry there. Each stall round is paired with a round in which the holder
// is not stopped and the successor polls Acquire from the moment the holder
// holds the key: it measures the margin, how long before the key can be
// acquired again the holder's run context is cancelled. The margins, and
// for the stalled holders the time from SIGCONT to the cancellation, are
// logged, not asserted: they are timings of a shared machine.
func TestStalledHoldersAreFenced(t *testing.T) {
	for _, st := range stallStores {
		t.Run(st.name, func(t *testing.T) { stalledHoldersAreFenced(t, st) })
	}
}

func stalledHoldersAreFenced(t *testing.T, st stallStore) {
	ns := fmt.Sprintf("stall-%d", time.Now().UnixNano())
	env := append(st.start(t), "STALL_NS="+ns, "STALL_TTL="+st.ttl.String())
	ctx := context.Background()
	side, err := openStallSide(ctx, func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.close)
	h := startStallHolder(t, env)

	var margins, uppers, expiries, resumes, first []time.Duration
	var late, notAtWrite int
	for i := range *stallN {
		for _, stall := range []bool{false, true} {
			round := 2 * i
			if stall {
				round++
			}
			m, up, toExpiry, resume, atWrite, firstAcquire := stallRound(t, h, side, round, stall)
			first = append(first, firstAcquire)
			if stall {
				resumes = append(resumes, resume)
				if !atWrite {
					notAtWrite++
				}
				continue
			}
			margins, uppers = append(margins, m), append(uppers, up)
			if side.expiry != nil {
				expiries = append(expiries, toExpiry)
			}
			if up <= 0 {
				late++
			}
		}
		if t.Failed() {
			break
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%s, TTL %v, %d stalls and %d unstopped rounds; load %s", st.name, st.ttl, len(resumes), len(margins), strings.TrimSpace(string(load)))
	t.Logf("margin (unstopped holder: its run context cancelled, to the key first acquirable by the successor): at least %s; at most %s; %d rounds cancelled after the successor held the key",
		spread(margins), spread(uppers), late)
	if side.expiry != nil {
		t.Logf("unstopped holder: its run context cancelled, to its lease's expiry in the database: %s", spread(expiries))
	}
	t.Logf("stalled holder: SIGCONT to its run context observed cancelled: %s; %d of %d sent their guarded write (refused) before their run context's cancellation had run",
		spread(resumes), notAtWrite, len(resumes))
	t.Logf("holder's Acquire sent to the successor's first successful Acquire answered: %s", spread(first))
}

// stallRound runs one round: the holder acquires the key; with stall, it is
// stopped until a successor has acquired the key and written its entry,
// then resumed; without, the successor polls Acquire from the moment the
// holder holds the key. Then the holder writes its stale entry. It returns
// the margin (unstopped rounds: the successor's last refused Acquire's send
// less the holder's cancellation, a lower bound of how long after the run
// context was cancelled the key became free) and its upper bound (the
// successful Acquire's reply less the cancellation), on PostgreSQL the
// time from the cancellation to the lease's expiry in the database, the time from SIGCONT to the
// cancellation (stalled rounds), whether the holder's run context was
// cancelled already when it sent its guarded write, and the time from the
// holder's Acquire sent to the successor's first successful one answered.
func stallRound(t *testing.T, h *stallHolder, side *stallSide, round int, stall bool) (margin, upper, toExpiry, resume time.Duration, atWrite bool, firstAcquire time.Duration) {
	t.Helper()
	got := map[string]stallEvent{}
	h.send("acquire", round)
	held := h.await("held", round, got)
	var expires time.Time
	if side.expiry != nil {
		var err error
		if expires, err = side.expiry(context.Background(), held.Token); err != nil {
			t.Fatalf("round %d: reading the holder's expiry: %v", round, err)
		}
	}
	if stall {
		if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	succ, lastRefused, err := acquireFirst(ctx, side.driver, 30*time.Second)
	replied := time.Now()
	if err != nil {
		t.Fatalf("round %d: the successor's Acquire: %v", round, err)
	}
	firstAcquire = replied.Sub(time.Unix(0, held.At))
	if succ.Token() <= held.Token {
		t.Errorf("round %d: the successor's token %d is not above the holder's %d", round, succ.Token(), held.Token)
	}
	if err := side.write(ctx, succ, round, "successor"); err != nil {
		t.Errorf("round %d: the successor's guarded write: %v", round, err)
	}
	var resumed time.Time
	if stall {
		resumed = time.Now()
		if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	h.send("write", round)
	wrote := h.await("wrote", round, got)
	cancelled := h.await("cancelled", round, got)
	for what, cause := range map[string]string{"cancelled": cancelled.Cause, "wrote": wrote.Cause} {
		if !strings.Contains(cause, locks.ErrLeaseLost.Error()) {
			t.Errorf("round %d (stalled %v): the holder's run context's cause (%s) = %q, want ErrLeaseLost", round, stall, what, cause)
		}
	}
	if !strings.Contains(wrote.Write, locks.ErrLeaseLost.Error()) {
		t.Errorf("round %d (stalled %v): the holder's guarded write returned %q, want ErrLeaseLost", round, stall, wrote.Write)
	}
	if !strings.Contains(wrote.Release, locks.ErrLeaseLost.Error()) {
		t.Errorf("round %d (stalled %v): the holder's Release returned %q, want ErrLeaseLost", round, stall, wrote.Release)
	}
	entries, err := side.entries(ctx, round)
	if err != nil {
		t.Fatalf("round %d: reading the ledger: %v", round, err)
	}
	want := []string{fmt.Sprintf("successor %d", succ.Token())}
	if !slices.Equal(entries, want) {
		t.Errorf("round %d (stalled %v): ledger %q, want only %q: a stale write accepted or the successor's lost", round, stall, entries, want)
	}
	if err := succ.Release(ctx); err != nil {
		t.Errorf("round %d: the successor's Release: %v", round, err)
	}
	cancelledAt := time.Unix(0, cancelled.At)
	if !expires.IsZero() {
		toExpiry = expires.Sub(cancelledAt)
	}
	if stall {
		resume = cancelledAt.Sub(resumed)
	} else if !lastRefused.IsZero() {
		margin, upper = lastRefused.Sub(cancelledAt), replied.Sub(cancelledAt)
	} else {
		t.Logf("round %d: the successor's first Acquire succeeded: no lower bound of the margin", round)
	}
	return margin, upper, toExpiry, resume, wrote.CancelledAtWrite, firstAcquire
}

// acquireFirst calls Acquire on stallKey back to back until it succeeds,
// with ttl, and returns the lease and when the last refused call was sent.
func acquireFirst(ctx context.Context, d locks.Driver, ttl time.Duration) (l locks.Lease, lastRefused time.Time, err error) {
	for {
		sent := time.Now()
		l, err = d.Acquire(ctx, stallKey, ttl)
		if err == nil {
			return l, lastRefused, nil
		}
		if !errors.Is(err, locks.ErrNotAcquired) {
			return nil, lastRefused, err
		}
		lastRefused = sent
	}
}

// spread formats the minimum, median and maximum of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("min %v, median %v, max %v (n=%d)", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}
