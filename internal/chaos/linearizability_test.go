package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/internal/redistest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/redislocks"
)

// recorderConfig tells one process how to record its share of a history.
type recorderConfig struct {
	Addr       string        // Redis
	Start      int64         // the history's start, Unix ns: epochs count from it
	Epoch      time.Duration // keys change every epoch; one Redis pause per epoch
	Keys       int           // keys per epoch
	Drivers    int           // drivers, each on its own client
	Workers    int           // goroutines, spread over the drivers
	Ops        int64         // operations to record, at least
	Until      int64         // and record until then, Unix ns, so that faults happen
	ClientBase int           // first porcupine client id
	OpTimeout  time.Duration // per operation; a paused Redis turns it into an unknown outcome
}

// record is one operation of a history. Times are Unix ns on the machine's
// wall clock, which every process shares. Return is math.MaxInt64 for an
// unknown outcome: Redis may still run the call at any later time.
type record struct {
	Client int
	In     input
	Out    output
	Call   int64
	Return int64
}

// recordHistory runs cfg.Workers goroutines doing Acquire, Extend and
// Release against Redis until cfg.Ops operations are recorded.
func recordHistory(cfg recorderConfig) ([]record, error) {
	var drivers []*redislocks.Driver
	for range cfg.Drivers {
		// No retries: a retried script could take effect twice behind one
		// result.
		c := redis.NewClient(&redis.Options{Addr: cfg.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.Workers})
		defer c.Close()
		d, err := redislocks.New(redislocks.Options{Client: c, Namespace: "lin"})
		if err != nil {
			return nil, err
		}
		drivers = append(drivers, d)
	}
	var (
		count atomic.Int64
		mu    sync.Mutex // protects out and failure
		out   []record
		fail  error
		wg    sync.WaitGroup
	)
	for w := range cfg.Workers {
		wg.Go(func() {
			d := drivers[w%len(drivers)]
			var mine []record
			do := func(in input, op func(ctx context.Context) (locks.Lease, error)) (locks.Lease, result) {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.OpTimeout)
				defer cancel()
				r := record{Client: cfg.ClientBase + w, In: in, Call: time.Now().UnixNano()}
				l, err := op(ctx)
				r.Return = time.Now().UnixNano()
				switch {
				case err == nil:
					r.Out.Result = ok
					if l != nil {
						r.Out.Token = l.Token()
					}
				case errors.Is(err, locks.ErrNotAcquired):
					r.Out.Result = notAcquired
				case errors.Is(err, locks.ErrLeaseLost):
					r.Out.Result = leaseLost
				case errors.Is(err, redislocks.ErrRedis), errors.Is(err, context.DeadlineExceeded):
					// No reply, or none within OpTimeout (a loaded
					// machine): the command may have run.
					r.Out.Result, r.Return = unknown, math.MaxInt64
				default:
					mu.Lock()
					fail = fmt.Errorf("%+v: unexpected error %w", in, err)
					mu.Unlock()
					r.Out.Result, r.Return = unknown, math.MaxInt64 // not ok: no lease to go on with
				}
				mine = append(mine, r)
				count.Add(1)
				return l, r.Out.Result
			}
			for count.Load() < cfg.Ops || time.Now().UnixNano() < cfg.Until {
				epoch := (time.Now().UnixNano() - cfg.Start) / int64(cfg.Epoch)
				key := fmt.Sprintf("e%d-k%d", epoch, rand.IntN(cfg.Keys))
				l, res := do(input{Op: acquire, Key: key}, func(ctx context.Context) (locks.Lease, error) {
					return d.Acquire(ctx, key, time.Hour)
				})
				if res != ok {
					continue
				}
				in := input{Key: key, Token: l.Token()}
				lost := false
				for range rand.IntN(3) {
					in.Op = extend
					if _, res := do(in, func(ctx context.Context) (locks.Lease, error) { return nil, l.Extend(ctx, time.Hour) }); res == leaseLost {
						lost = true
						break
					}
				}
				if lost {
					continue
				}
				// A Release with an unknown outcome is retried once: the
				// retry either releases or finds the lease gone.
				in.Op = release
				for range 2 {
					if _, res := do(in, func(ctx context.Context) (locks.Lease, error) { return nil, l.Release(ctx) }); res != unknown {
						break
					}
				}
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, d := range drivers {
		_ = d.Close()
	}
	return out, fail
}

// linWorkerMain records a share of the history in a child process: the
// configuration comes in CHAOS_LIN_CONFIG, the records go to the file
// CHAOS_LIN_OUT.
func linWorkerMain() int {
	var cfg recorderConfig
	if err := json.Unmarshal([]byte(os.Getenv("CHAOS_LIN_CONFIG")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos linworker:", err)
		return 2
	}
	recs, err := recordHistory(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos linworker:", err)
		return 1
	}
	b, _ := json.Marshal(recs)
	if err := os.WriteFile(os.Getenv("CHAOS_LIN_OUT"), b, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "chaos linworker:", err)
		return 1
	}
	return 0
}

// Acquire, Extend and Release from 3 processes (this one and two re-executed
// children), 2 drivers on their own clients and 6 goroutines per process,
// against one real Redis that is paused for 150ms in every 600ms epoch, so
// that many calls time out with unknown outcomes. The history is checked
// against the sequential lease model (lease_model_test.go) with porcupine.
// -lin.ops sets the number of operations (make chaos: 60000).
func TestLinearizable(t *testing.T) {
	srv := redistest.Start(t)
	const procsN = 3
	start := time.Now()
	cfg := recorderConfig{Addr: srv.Addr(), Start: start.UnixNano(), Epoch: 600 * time.Millisecond, Keys: 8,
		Drivers: 2, Workers: 6, Ops: int64(*linOps) / procsN, OpTimeout: 80 * time.Millisecond}
	cfg.Until = start.Add(5 * cfg.Epoch).UnixNano()

	// Children first, so they record while this process does.
	type child struct {
		cmd  *exec.Cmd
		out  string
		done chan error
	}
	var children []child
	for i := 1; i < procsN; i++ {
		c := cfg
		c.ClientBase = i * 100
		b, _ := json.Marshal(c)
		ch := child{out: filepath.Join(t.TempDir(), "history.json"), done: make(chan error, 1)}
		ch.cmd = exec.Command(os.Args[0], "-test.run=^$")
		ch.cmd.Env = append(os.Environ(), roleEnv+"="+roleLinWorker, "CHAOS_LIN_CONFIG="+string(b), "CHAOS_LIN_OUT="+ch.out)
		ch.cmd.Stderr = os.Stderr
		ch.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := ch.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { ch.done <- ch.cmd.Wait() }()
		t.Cleanup(func() { _ = ch.cmd.Process.Kill() })
		children = append(children, ch)
	}

	// Faults: a pause in the middle of every epoch, until every process is
	// done.
	stop := make(chan struct{})
	var pauses atomic.Int64
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		for e := int64(0); ; e++ {
			at := time.Unix(0, cfg.Start).Add(time.Duration(e)*cfg.Epoch + cfg.Epoch/3)
			select {
			case <-stop:
				return
			case <-time.After(time.Until(at)):
			}
			srv.Pause()
			pauses.Add(1)
			select {
			case <-stop:
			case <-time.After(150 * time.Millisecond):
			}
			srv.Resume()
		}
	}()

	history, err := recordHistory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range children {
		select {
		case err := <-ch.done:
			if err != nil {
				t.Fatalf("linearizability worker %d: %v", i+1, err)
			}
		case <-time.After(5 * time.Minute):
			t.Fatalf("linearizability worker %d did not finish", i+1)
		}
		var recs []record
		b, err := os.ReadFile(ch.out)
		if err == nil {
			err = json.Unmarshal(b, &recs)
		}
		if err != nil {
			t.Fatalf("history of worker %d: %v", i+1, err)
		}
		history = append(history, recs...)
	}
	close(stop)
	<-faults

	counts := map[string]int{}
	ops := make([]porcupine.Operation, len(history))
	for i, r := range history {
		ops[i] = porcupine.Operation{ClientId: r.Client, Input: r.In, Output: r.Out, Call: r.Call, Return: r.Return}
		counts[leaseModel.DescribeOperation(r.In, output{Result: r.Out.Result})[:3]+" "+[...]string{"ok", "not acquired", "lease lost", "unknown"}[r.Out.Result]]++
	}
	t.Logf("%d operations from %d processes, %d Redis pauses: %v", len(ops), procsN, pauses.Load(), counts)
	if len(ops) < *linOps || pauses.Load() < 4 || counts["acq ok"] == 0 || counts["acq not acquired"] == 0 || counts["acq unknown"] == 0 {
		t.Fatalf("the history does not exercise the model: %d operations, %d pauses, %v", len(ops), pauses.Load(), counts)
	}
	checkLinearizable(t, ops)
}

// checkLinearizable fails t unless ops are linearizable in the lease model,
// and then writes porcupine's visualisation next to the test's temp files.
func checkLinearizable(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	model := leaseModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 3*time.Minute)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Fatalf("porcupine timed out on %d operations", len(ops))
	}
	f, err := os.CreateTemp("", "chaos-linearizability-*.html")
	if err == nil {
		err = porcupine.Visualize(model, info, f)
		_ = f.Close()
	}
	t.Fatalf("history of %d operations is not linearizable in the lease model; visualisation: %s (%v)", len(ops), f.Name(), err)
}
