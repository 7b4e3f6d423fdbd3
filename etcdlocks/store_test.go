package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ndigo/ndigo/etcdlocks"
	"github.com/ndigo/ndigo/internal/etcdtest"
	"github.com/ndigo/ndigo/taskstate"
	"github.com/ndigo/ndigo/taskstate/taskstatetest"
)

// storeNamespaces numbers the namespaces of the stores the tests make.
var storeNamespaces atomic.Int64

// storeNamespace returns a namespace no other store of the shared member
// has (go test -count=n included).
func storeNamespace() string {
	return fmt.Sprintf("store-%d-%d", time.Now().UnixNano(), storeNamespaces.Add(1))
}

// newStore returns a store on c in namespace ns keeping history runs.
func newStore(t *testing.T, c *clientv3.Client, ns string, history int) *etcdlocks.Store {
	t.Helper()
	s, err := etcdlocks.NewStore(etcdlocks.StoreOptions{Client: c, Namespace: ns, History: history, Trail: taskstatetest.Trail})
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return s
}

// storeClientWith returns a client of the shared member whose unary calls go
// through interceptor (inside the client's own retry interceptor: gRPC
// runs the single grpc.WithUnaryInterceptor that clientv3 sets before the
// chained ones), dialled with opts too, closed by t.Cleanup.
func storeClientWith(t *testing.T, interceptor grpc.UnaryClientInterceptor, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cfg := etcdtest.Config(etcdtest.Start(t).Endpoints()...)
	cfg.DialOptions = append(append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(interceptor)), opts...)
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("client of the shared member: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mutatingRequest reports whether req is an etcd request that changes something:
// a Put, a DeleteRange, a Txn with one of those in either branch, a
// LeaseGrant, a LeaseRevoke, a keep-alive (sent on a stream). A Txn of Gets
// alone (the store's reads) is not.
func mutatingRequest(req any) bool {
	switch r := req.(type) {
	case *pb.PutRequest, *pb.DeleteRangeRequest, *pb.LeaseGrantRequest, *pb.LeaseRevokeRequest, *pb.LeaseKeepAliveRequest:
		return true
	case *pb.TxnRequest:
		for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
			for _, op := range ops {
				switch o := op.Request.(type) {
				case *pb.RequestOp_RequestPut, *pb.RequestOp_RequestDeleteRange:
					return true
				case *pb.RequestOp_RequestTxn:
					if mutatingRequest(o.RequestTxn) {
						return true
					}
				}
			}
		}
	}
	return false
}

// A replyLoser loses the reply of the next mutating call once armed (of
// the one after skip others, with armAfter): the call runs on the server,
// then the armed func runs, then the caller gets the context's error if
// the func ended it, else codes.Unavailable, which clientv3's retry
// interceptor does not resend for a mutating call (isSafeRetryMutableRPC
// resends only the "no address available" and "no connection available"
// errors of a call never sent).
type replyLoser struct {
	mu   sync.Mutex // protects the fields below
	then func()
	skip int // mutating calls to let through before the loss
}

func (l *replyLoser) arm(then func()) { l.armAfter(0, then) }

func (l *replyLoser) armAfter(skip int, then func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.then, l.skip = then, skip
}

// take returns the armed func if req is the mutating call whose reply is
// to be lost, and disarms it; otherwise nil.
func (l *replyLoser) take(req any) func() {
	if !mutatingRequest(req) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	then := l.then
	if then != nil && l.skip > 0 {
		then = nil
		l.skip--
	} else {
		l.then = nil
	}
	return then
}

// lost runs then and returns what the caller of a call whose reply was lost
// gets.
func lost(ctx context.Context, then func()) error {
	then()
	if err := ctx.Err(); err != nil {
		// The context ended while the reply was awaited: what gRPC answers.
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, "taskstatetest: reply lost")
}

func (l *replyLoser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if then := l.take(req); then != nil && err == nil {
		return lost(ctx, then)
	}
	return err
}

// interceptStream loses, as intercept does for a unary call, the reply to
// a keep-alive that a LeaseKeepAlive stream sends (KeepAliveOnce: one
// each): the keep-alive renewed the lease, then the armed func runs, then
// the stream's reader gets the error.
func (l *replyLoser) interceptStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
		return s, err
	}
	return &lossyStream{ClientStream: s, ctx: ctx, l: l}, nil
}

// A lossyStream is a keep-alive stream whose replyLoser may lose a reply.
type lossyStream struct {
	grpc.ClientStream
	ctx context.Context
	l   *replyLoser

	mu   sync.Mutex // protects then
	then []func()   // per keep-alive sent and not answered: the func of its loss, or nil
}

func (s *lossyStream) SendMsg(m any) error {
	s.mu.Lock()
	s.then = append(s.then, s.l.take(m))
	s.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

func (s *lossyStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.mu.Lock()
	var then func()
	if len(s.then) > 0 {
		then, s.then = s.then[0], s.then[1:]
	}
	s.mu.Unlock()
	if then != nil && err == nil {
		return lost(s.ctx, then)
	}
	return err
}

func TestStoreConformance(t *testing.T) {
	c := etcdtest.Start(t).Client()
	taskstatetest.Run(t, func(t *testing.T, history int) taskstatetest.Stores {
		ns := storeNamespace()
		l := &replyLoser{}
		before, err := leaseIDs(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		return taskstatetest.Stores{A: newStore(t, storeClientWith(t, l.intercept), ns, history), B: newStore(t, c, ns, history),
			Loss: taskstatetest.Failed, LoseNextReply: l.arm, Trail: taskstatetest.Trail,
			Leaks: func(t *testing.T) error { return storeLeaks(context.Background(), c, ns, history, before) }}
	})
}

// leaseIDs returns the leases the etcd of c holds.
func leaseIDs(ctx context.Context, c *clientv3.Client) (map[clientv3.LeaseID]bool, error) {
	resp, err := c.Leases(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[clientv3.LeaseID]bool, len(resp.Leases))
	for _, l := range resp.Leases {
		ids[l.ID] = true
	}
	return ids, nil
}

// storeLeaks returns an error naming the leases granted since before that
// hold no key (the Store grants none; no other test runs beside the
// conformance suite's), and the tasks of namespace ns that keep more runs
// than history (0: taskstate.DefaultHistory), which a Store trims in the
// transaction that adds them; and a trail over the stores' length
// (taskstatetest.Trail), which an append trims before it returns.
func storeLeaks(ctx context.Context, c *clientv3.Client, ns string, history int, before map[clientv3.LeaseID]bool) error {
	var problems []string
	now, err := leaseIDs(ctx, c)
	if err != nil {
		return err
	}
	for id := range now {
		if before[id] {
			continue
		}
		ttl, err := c.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
		if err != nil {
			return err
		}
		if ttl.TTL > 0 && len(ttl.Keys) == 0 {
			problems = append(problems, fmt.Sprintf("lease %x holds no key (TTL %d s left)", int64(id), ttl.TTL))
		}
	}
	if history == 0 {
		history = taskstate.DefaultHistory
	}
	prefix := "ndigo/" + ns + "/state/runs/"
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	runs := map[string]int{}
	for _, kv := range resp.Kvs {
		// "<len>:<name>/<seq>...": the name may hold '/'.
		rest := strings.TrimPrefix(string(kv.Key), prefix)
		n, name, _ := strings.Cut(rest, ":")
		l, err := strconv.Atoi(n)
		if err != nil || l > len(name) {
			return fmt.Errorf("run key %q does not read as <len>:<name>/<seq>", kv.Key)
		}
		runs[n+":"+name[:l]]++
	}
	for task, n := range runs {
		// A record's TaskRun.Keep may keep up to taskstate.MaxHistory runs.
		if n > max(history, taskstate.MaxHistory) {
			problems = append(problems, fmt.Sprintf("task %s keeps %d runs, history %d, taskstate.MaxHistory %d", task, n, history, taskstate.MaxHistory))
		}
	}
	events, err := c.Get(ctx, "ndigo/"+ns+"/state/events/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if events.Count > taskstatetest.Trail {
		problems = append(problems, fmt.Sprintf("the trail holds %d entries, over the stores' Trail %d", events.Count, taskstatetest.Trail))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Bad options name the field, the value and the rule.
func TestNewStoreRefusesBadOptions(t *testing.T) {
	c := etcdtest.Start(t).Client()
	for _, o := range []struct {
		opts etcdlocks.StoreOptions
		want string
	}{
		{etcdlocks.StoreOptions{Namespace: "ns"}, "StoreOptions.Client"},
		{etcdlocks.StoreOptions{Client: c}, `StoreOptions.Namespace "" must not be empty`},
		{etcdlocks.StoreOptions{Client: c, Namespace: "a/b"}, `has '/' at byte 1`},
		{etcdlocks.StoreOptions{Client: c, Namespace: "ns", History: -1}, "History -1"},
		{etcdlocks.StoreOptions{Client: c, Namespace: "ns", History: taskstate.MaxHistory + 1}, "History 1001"},
		{etcdlocks.StoreOptions{Client: c, Namespace: "ns", Trail: -1}, "Trail -1"},
		{etcdlocks.StoreOptions{Client: c, Namespace: "ns", Trail: taskstate.MaxTrail + 1}, "Trail 100001"},
	} {
		if _, err := etcdlocks.NewStore(o.opts); !errors.Is(err, taskstate.ErrInvalid) || !strings.Contains(err.Error(), o.want) {
			t.Errorf("NewStore(%+v) = %v, want taskstate.ErrInvalid naming %q", o.opts, err, o.want)
		}
	}
	if _, err := etcdlocks.NewStore(etcdlocks.StoreOptions{Client: c, Namespace: "a/b"}); !errors.Is(err, etcdlocks.ErrInvalidNamespace) {
		t.Errorf("NewStore with a bad namespace = %v, want ErrInvalidNamespace", err)
	}
}

// A Poll is one round trip: one Txn of prefix Gets, whatever is pending.
func TestStorePollIsOneRoundTrip(t *testing.T) {
	var calls atomic.Int64
	var methods sync.Map
	c := storeClientWith(t, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		methods.Store(method, true)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	s := newStore(t, c, storeNamespace(), 0)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := taskstate.Retry{Fire: at, Attempt: 2, Due: at.Add(time.Minute)}
	b := taskstate.Backfill{ID: "b1", Task: "t2", From: at, To: at.Add(time.Hour), Total: 2, Node: "node-a", Created: at}
	for _, err := range []error{s.RequestRun(ctx, "t1", at), s.SetPaused(ctx, "t1", taskstate.Pause{Paused: true}),
		s.Record(ctx, taskstate.TaskRun{Task: "t2", Run: taskstate.Run{Fire: at, Node: "n", Outcome: "error"}, Retry: &r}),
		s.StartBackfill(ctx, b, nil),
		s.CreateSchedule(ctx, taskstate.Schedule{Name: "sc", Handler: "h", Cron: "* * * * *"}),
		func() error { _, err := s.TakeRun(ctx, "t3", at, 1); return err }()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	calls.Store(0)
	methods.Clear()
	p, err := s.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Requests) != 1 || len(p.Retries) != 1 || len(p.Backfills) != 1 || p.Runs["t3"] != 1 || p.Pauses == 0 || p.Schedules == 0 {
		t.Fatalf("Poll = %+v; want a request, a retry, a backfill, a run taken and both generations", p)
	}
	var names []string
	methods.Range(func(k, _ any) bool { names = append(names, k.(string)); return true })
	if n := calls.Load(); n != 1 || len(names) != 1 || names[0] != "/etcdserverpb.KV/Txn" {
		t.Fatalf("Poll made %d calls (%v), want one Txn", n, names)
	}
}

// The history stays bounded: 100 records with History 5 leave 5 run keys,
// the newest, whatever placeholders were among them.
func TestStoreHistoryStaysBounded(t *testing.T) {
	c := etcdtest.Start(t).Client()
	ns := storeNamespace()
	s := newStore(t, c, ns, 5)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 100 {
		fire := at.Add(time.Duration(i) * time.Minute)
		if i%10 == 3 { // a manual run: its take's placeholder, then its record
			if err := s.RequestRun(ctx, "task", fire); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := s.TakeRequest(ctx, "task", "node-a"); err != nil || !ok {
				t.Fatalf("TakeRequest = %v, %v", ok, err)
			}
		}
		r := taskstate.Run{Fire: fire, Manual: i%10 == 3, Node: "node-a", Token: uint64(i), Outcome: "ok"}
		if err := s.Record(ctx, taskstate.TaskRun{Task: "task", Run: r}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Get(ctx, "ndigo/"+ns+"/state/runs/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 5 {
		t.Fatalf("%d run keys after 100 records with History 5, want 5", resp.Count)
	}
	runs, err := s.Runs(ctx, "task", 0)
	if err != nil {
		t.Fatal(err)
	}
	for j, r := range runs {
		if want := uint64(99 - j); r.Token != want {
			t.Errorf("Runs()[%d].Token = %d, want %d (newest first)", j, r.Token, want)
		}
	}
}

// The store's keys are under "state/", apart from the driver's: a lock
// held in the namespace and a store's calls do not meet.
func TestStoreKeysApartFromTheDriver(t *testing.T) {
	c := etcdtest.Start(t).Client()
	ns := storeNamespace()
	s := newStore(t, c, ns, 0)
	d := newDriver(t, c, ns)
	ctx := context.Background()
	l, err := d.Acquire(ctx, "state/runs/x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if err := s.Record(ctx, taskstate.TaskRun{Task: "x", Run: taskstate.Run{Fire: time.Now(), Node: "n", Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, "ndigo/"+ns+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), "ndigo/"+ns+"/")
		if !strings.HasPrefix(k, "state/") && !strings.HasPrefix(k, "lock/") {
			t.Errorf("key %q is neither the store's nor the driver's", kv.Key)
		}
	}
}

// A Record of more runs than one etcd transaction takes (etcd's default
// --max-txn-ops, 128) records them all, in transactions of whole tasks.
func TestStoreRecordManyTasks(t *testing.T) {
	c := etcdtest.Start(t).Client()
	s := newStore(t, c, storeNamespace(), 3)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var batch []taskstate.TaskRun
	for i := range 60 {
		task := fmt.Sprintf("task-%02d", i)
		for j := range 4 {
			r := taskstate.Retry{Fire: at.Add(time.Duration(j) * time.Minute), Attempt: 2, Due: at.Add(time.Hour)}
			batch = append(batch, taskstate.TaskRun{Task: task, Retry: &r,
				Run: taskstate.Run{Fire: r.Fire, Node: "node-a", Token: uint64(j), Outcome: "error"}})
		}
	}
	if err := s.Record(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	p, err := s.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Retries) != 60 {
		t.Fatalf("%d retries pending after a Record of 60 tasks' failures, want 60", len(p.Retries))
	}
	for i := range 60 {
		task := fmt.Sprintf("task-%02d", i)
		runs, err := s.Runs(ctx, task, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 3 || runs[0].Token != 3 || runs[2].Token != 1 {
			t.Fatalf("Runs(%q) = %+v, want tokens 3, 2, 1", task, runs)
		}
		if r := p.Retries[task]; !r.Fire.Equal(at.Add(3 * time.Minute)) {
			t.Errorf("pending retry of %q = %+v, want the last fire's", task, r)
		}
	}
}

// A call whose reply is lost returns an error wrapping ErrEtcd that names
// the task, and ran once: the client did not resend it.
func TestStoreLostReplyIsErrEtcd(t *testing.T) {
	l := &replyLoser{}
	ns := storeNamespace()
	s := newStore(t, storeClientWith(t, l.intercept), ns, 0)
	other := newStore(t, etcdtest.Start(t).Client(), ns, 0)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	l.arm(func() {})
	err := s.RequestRun(ctx, "Payroll.Close", at)
	if !errors.Is(err, etcdlocks.ErrEtcd) || !strings.Contains(err.Error(), `"Payroll.Close"`) || !strings.Contains(err.Error(), "reply lost") {
		t.Fatalf("RequestRun whose reply was lost = %v, want ErrEtcd naming the task", err)
	}
	if got, ok, err := other.TakeRequest(ctx, "Payroll.Close", "node-b"); err != nil || !ok || !got.Equal(at) {
		t.Fatalf("TakeRequest after the lost reply = %v, %v, %v; want the request: it ran", got, ok, err)
	}
}

// A Record of 60 tasks is three transactions; the reply of the second is
// lost after it committed, so the first two parts are recorded and the
// third is not. Sent again with the same IDs, after another node recorded
// a run of a task of each part, it records the third part and keeps each
// run once: the first two parts' runs before the other node's, the
// third's after.
func TestStoreRecordSplitResentAfterItsSecondPartLost(t *testing.T) {
	l := &replyLoser{}
	ns := storeNamespace()
	s := newStore(t, storeClientWith(t, l.intercept), ns, 0)
	other := newStore(t, etcdtest.Start(t).Client(), ns, 0)
	ctx := context.Background()
	var batch []taskstate.TaskRun
	for i := range 60 {
		batch = append(batch, taskstate.TaskRun{Task: fmt.Sprintf("Task.%02d", i), ID: fmt.Sprintf("node-a.%d", i),
			Run: taskstate.Run{Node: "node-a", Token: uint64(100 + i), Outcome: "ok"}})
	}
	theirs := func(task string) taskstate.TaskRun {
		return taskstate.TaskRun{Task: task, ID: "node-b." + task, Run: taskstate.Run{Node: "node-b", Token: 1, Outcome: "ok"}}
	}
	first, second, third := batch[0].Task, batch[30].Task, batch[59].Task
	l.armAfter(1, func() {
		if err := other.Record(ctx, theirs(first), theirs(second), theirs(third)); err != nil {
			t.Error(err)
		}
	})
	if err := s.Record(ctx, batch...); err == nil {
		t.Fatal("Record whose second part's reply was lost returned nil; want an error")
	}
	if t.Failed() {
		t.FailNow()
	}
	if err := s.Record(ctx, batch...); err != nil {
		t.Fatalf("Record sent again: %v", err)
	}
	for _, r := range batch {
		runs, err := other.Runs(ctx, r.Task, 0)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, x := range runs {
			nodes = append(nodes, x.Node)
		}
		want := []string{"node-a"}
		switch r.Task {
		case first, second:
			want = []string{"node-b", "node-a"} // recorded before the other node's
		case third:
			want = []string{"node-a", "node-b"} // recorded by the resend
		}
		if !slices.Equal(nodes, want) {
			t.Errorf("runs of %s, newest first, by %q; want %q", r.Task, nodes, want)
		}
	}
}
