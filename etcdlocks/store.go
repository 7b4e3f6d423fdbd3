package etcdlocks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ndigo/ndigo/taskstate"
)

// StoreOptions configure a Store made by NewStore. Client and Namespace are
// required.
type StoreOptions struct {
	// Client is the etcd client; the store never closes it.
	Client *clientv3.Client
	// Namespace isolates this store's tasks from those of other
	// environments on the same etcd, as Options.Namespace does for locks,
	// with the same rule: every key starts with "ndigo/<namespace>/state/".
	Namespace string
	// History is how many runs per task the store keeps; zero means
	// taskstate.DefaultHistory.
	History int
	// Trail is how many events of the namespace's trail of control
	// actions the store keeps, the newest; zero means
	// taskstate.DefaultTrail, at most taskstate.MaxTrail.
	Trail int
}

// A Store is a taskstate.Store on etcd, shared by every node on the same
// etcd cluster and namespace. Make one with [NewStore]; it is safe for
// concurrent use. The package documentation (Store) gives its key layout
// and what each call costs.
//
// Every mutating call is one etcd transaction, or an optimistic loop of a
// read and a transaction whose compares check that what it read is
// unchanged (the mod revisions of the keys it read), run again when
// another node changed them in between. The etcd client never resends a
// mutating request once sent, so a call whose reply is lost returns an
// error wrapping ErrEtcd, and the state is as if the call ran once or not
// at all (taskstatetest.Failed).
type Store struct {
	client  *clientv3.Client
	ns      string
	history int
	keep    int    // the trail's length
	prefix  string // "ndigo/<ns>/state/"
}

var _ taskstate.Store = (*Store)(nil)

// NewStore returns a store on opts.Client. It does not contact etcd. A nil
// Client, a History out of [0, taskstate.MaxHistory], or a Trail out of
// [0, taskstate.MaxTrail], is an error
// wrapping taskstate.ErrInvalid; a bad Namespace, one wrapping
// ErrInvalidNamespace and taskstate.ErrInvalid.
func NewStore(opts StoreOptions) (*Store, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: etcdlocks: StoreOptions.Client must not be nil", taskstate.ErrInvalid)
	}
	if err := CheckNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: StoreOptions.Namespace %q %v (%w)", ErrInvalidNamespace, opts.Namespace, err, taskstate.ErrInvalid)
	}
	n, err := taskstate.CheckHistory("etcdlocks: StoreOptions.History", opts.History)
	if err != nil {
		return nil, err
	}
	keep, err := taskstate.CheckTrail("etcdlocks: StoreOptions.Trail", opts.Trail)
	if err != nil {
		return nil, err
	}
	return &Store{client: opts.Client, ns: opts.Namespace, history: n, keep: keep, prefix: "ndigo/" + opts.Namespace + "/state/"}, nil
}

// String names the store and its namespace, for logs: "etcdlocks store
// (namespace prod)".
func (s *Store) String() string { return "etcdlocks store (namespace " + s.ns + ")" }

// taskKey is the key of kind ("paused", "requests", ...) for task: the
// task's name as name gives it, after its length, so that no task's keys
// are a prefix of another's.
func (s *Store) taskKey(kind, task string) string {
	n := name(task)
	return s.prefix + kind + "/" + strconv.Itoa(len(n)) + ":" + n
}

// runsPrefix is the prefix of task's run keys.
func (s *Store) runsPrefix(task string) string { return s.taskKey("runs", task) + "/" }

// The keys of the generations.
func (s *Store) pausesKey() string    { return s.prefix + "pauses" }
func (s *Store) schedulesKey() string { return s.prefix + "schedules" }

// storeFail wraps an etcd error with ErrEtcd and the operation's task.
func storeFail(op, task string, err error) error {
	return fmt.Errorf("%w: %s of task %q: %w", ErrEtcd, op, task, err)
}

// storeCorrupt reports a stored value that does not decode.
func storeCorrupt(what, key string, err error) error {
	return fmt.Errorf("etcdlocks: the stored %s at %q does not decode: %w", what, key, err)
}

// read gets ops in one read-only transaction (one round trip) and returns
// each op's kvs, nil for none.
func (s *Store) read(ctx context.Context, ops ...clientv3.Op) ([][]*mvccpb.KeyValue, error) {
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		out[i] = r.GetResponseRange().GetKvs()
	}
	return out, nil
}

// firstKV returns the first kv of kvs, or nil.
func firstKV(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// kvModRev is the mod revision of kv, 0 for a missing key: a compare of a
// missing key's mod revision with 0 holds.
func kvModRev(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

// unchangedCmp is the compare that key is as read (kv, nil when missing).
func unchangedCmp(key string, kv *mvccpb.KeyValue) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(key), "=", kvModRev(kv))
}

// SetPaused sets task's pause and rewrites the pause generation's key in
// one transaction: one round trip. Poll.Pauses is that key's mod revision,
// which every SetPaused moves on. A pause puts its JSON as the flag's value
// and deletes the last resume; a resume deletes the flag and puts its
// JSON, if it has a note, a by or an at, as the last resume (else deletes
// it). A node of a version before notes reads a flag's presence and puts
// "1", and so reads and sets the same flags; but its resume leaves the
// last resume of this version, which Paused then returns, until the next
// SetPaused of this version.
func (s *Store) SetPaused(ctx context.Context, task string, p taskstate.Pause) error {
	if err := taskstate.CheckSetPaused(ctx, task, p); err != nil {
		return err
	}
	p.At = p.At.UTC()
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("%w: task %q: pause %+v: %v", taskstate.ErrInvalid, task, p, err)
	}
	flag, resumed := s.taskKey("paused", task), s.taskKey("resumed", task)
	ops := []clientv3.Op{clientv3.OpPut(flag, string(v)), clientv3.OpDelete(resumed)}
	switch {
	case !p.Paused && (p.Note != "" || p.By != "" || !p.At.IsZero()):
		ops = []clientv3.Op{clientv3.OpDelete(flag), clientv3.OpPut(resumed, string(v))}
	case !p.Paused:
		ops = []clientv3.Op{clientv3.OpDelete(flag), clientv3.OpDelete(resumed)}
	}
	if _, err := s.client.Txn(ctx).Then(append(ops, clientv3.OpPut(s.pausesKey(), ""))...).Commit(); err != nil {
		return storeFail("SetPaused", task, err)
	}
	return nil
}

// Paused returns task's pause: one transaction of two Gets, the flag and
// the last resume. A flag whose value is not a pause's JSON ("1", put by a
// version before notes, or by hand) is a pause without note, and a last
// resume that is not (put by hand), a resume without note: the flag alone
// decides whether the task runs.
func (s *Store) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return taskstate.Pause{}, err
	}
	kvs, err := s.read(ctx, clientv3.OpGet(s.taskKey("paused", task)), clientv3.OpGet(s.taskKey("resumed", task)))
	if err != nil {
		return taskstate.Pause{}, storeFail("Paused", task, err)
	}
	if kv := firstKV(kvs[0]); kv != nil {
		var p taskstate.Pause
		if json.Unmarshal(kv.Value, &p) != nil {
			p = taskstate.Pause{}
		}
		p.Paused = true
		return p, nil
	}
	if kv := firstKV(kvs[1]); kv != nil {
		var p taskstate.Pause
		if json.Unmarshal(kv.Value, &p) != nil {
			p = taskstate.Pause{}
		}
		p.Paused = false
		return p, nil
	}
	return taskstate.Pause{}, nil
}

// storedRequest is the value of a pending request's key.
type storedRequest struct {
	Task string    `json:"task"`
	At   time.Time `json:"at"`
}

// RequestRun records a pending run of task, merged into one already
// pending: one transaction that puts the request's key if it does not
// exist.
func (s *Store) RequestRun(ctx context.Context, task string, at time.Time) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	v, err := json.Marshal(storedRequest{Task: task, At: at.UTC()})
	if err != nil {
		return fmt.Errorf("%w: task %q: request instant %v: %v", taskstate.ErrInvalid, task, at, err)
	}
	k := s.taskKey("requests", task)
	if _, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(v))).Commit(); err != nil {
		return storeFail("RequestRun", task, err)
	}
	return nil
}

// retryValue is the value of a task's retry key: its last retry or waiting
// fire, pending or taken.
type retryValue struct {
	Task    string    `json:"task"`
	Fire    time.Time `json:"fire"`
	Manual  bool      `json:"manual,omitempty"`
	Attempt int       `json:"attempt"`
	Due     time.Time `json:"due"`
	Taken   bool      `json:"taken,omitempty"`
}

func (v retryValue) retry() taskstate.Retry {
	return taskstate.Retry{Fire: v.Fire, Manual: v.Manual, Attempt: v.Attempt, Due: v.Due}
}

func newRetryValue(task string, r taskstate.Retry) retryValue {
	return retryValue{Task: task, Fire: r.Fire.UTC(), Manual: r.Manual, Attempt: r.Attempt, Due: r.Due.UTC()}
}

// decodeRetry decodes kv's retry; nil kv gives nil.
func decodeRetry(kv *mvccpb.KeyValue) (*retryValue, error) {
	if kv == nil {
		return nil, nil
	}
	var v retryValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return nil, storeCorrupt("retry", string(kv.Key), err)
	}
	return &v, nil
}

// Poll returns the pending requests and retries, the backfills, the runs
// taken and both generations: one transaction of four prefix Gets
// (requests, retries, backfills, runcounts) and two Gets (the
// generations' keys), one round trip.
// Poll.Pauses and Poll.Schedules are the mod revisions of the
// generations' keys (0 before the first change).
func (s *Store) Poll(ctx context.Context) (taskstate.Poll, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return taskstate.Poll{}, err
	}
	got, err := s.read(ctx, clientv3.OpGet(s.prefix+"requests/", clientv3.WithPrefix()),
		clientv3.OpGet(s.prefix+"retries/", clientv3.WithPrefix()),
		clientv3.OpGet(s.prefix+"backfills/", clientv3.WithPrefix()),
		clientv3.OpGet(s.pausesKey()), clientv3.OpGet(s.schedulesKey()),
		clientv3.OpGet(s.prefix+"runcounts/", clientv3.WithPrefix()))
	if err != nil {
		return taskstate.Poll{}, fmt.Errorf("%w: Poll in namespace %q: %w", ErrEtcd, s.ns, err)
	}
	out := taskstate.Poll{Requests: make(map[string]time.Time, len(got[0])),
		Pauses: kvModRev(firstKV(got[3])), Schedules: kvModRev(firstKV(got[4]))}
	for _, kv := range got[0] {
		var r storedRequest
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return taskstate.Poll{}, storeCorrupt("request", string(kv.Key), err)
		}
		out.Requests[r.Task] = r.At
	}
	for _, kv := range got[1] {
		v, err := decodeRetry(kv)
		if err != nil {
			return taskstate.Poll{}, err
		}
		if !v.Taken {
			if out.Retries == nil {
				out.Retries = make(map[string]taskstate.Retry)
			}
			out.Retries[v.Task] = v.retry()
		}
	}
	for _, kv := range got[2] {
		var b taskstate.Backfill
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return taskstate.Poll{}, storeCorrupt("backfill", string(kv.Key), err)
		}
		if out.Backfills == nil {
			out.Backfills = make(map[string]taskstate.Backfill)
		}
		out.Backfills[b.Task] = b
	}
	for _, kv := range got[5] {
		v, err := decodeRunCounts(kv)
		if err != nil {
			return taskstate.Poll{}, err
		}
		if out.Runs == nil {
			out.Runs = make(map[string]int)
		}
		out.Runs[v.Task] = v.Taken
	}
	return out, nil
}

// runCountsValue is the value of a task's runcounts key: how many runs it
// took (TakeRun), and its last taskstate.MaxRunTakes takes, oldest first.
type runCountsValue struct {
	Task  string    `json:"task"`
	Taken int       `json:"taken"`
	Takes []runTake `json:"takes"`
}

// A runTake is a fire, in Unix nanoseconds, and the number of the run it
// took.
type runTake struct {
	Fire int64 `json:"fire"`
	N    int   `json:"n"`
}

// decodeRunCounts decodes kv's counts; nil kv gives the zero value.
func decodeRunCounts(kv *mvccpb.KeyValue) (runCountsValue, error) {
	var v runCountsValue
	if kv == nil {
		return v, nil
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return v, storeCorrupt("run counts", string(kv.Key), err)
	}
	return v, nil
}

// TakeRun takes the next of task's runs for fire unless fire took one
// among the task's last takes (its number) or max were taken (0): a Get of
// the task's runcounts key, then at most a transaction that puts it if its
// mod revision is unchanged (one or two round trips; again on a conflict,
// so that of the fires racing for the last run exactly one commits it).
func (s *Store) TakeRun(ctx context.Context, task string, fire time.Time, max int) (int, error) {
	if err := taskstate.CheckTakeRun(ctx, task, fire, max); err != nil {
		return 0, err
	}
	k, at := s.taskKey("runcounts", task), fire.UnixNano()
	for {
		resp, err := s.client.Get(ctx, k)
		if err != nil {
			return 0, storeFail("TakeRun", task, err)
		}
		kv := firstKV(resp.Kvs)
		v, err := decodeRunCounts(kv)
		if err != nil {
			return 0, err
		}
		if i := slices.IndexFunc(v.Takes, func(r runTake) bool { return r.Fire == at }); i >= 0 {
			return v.Takes[i].N, nil
		}
		if v.Taken >= max {
			return 0, nil
		}
		v.Task, v.Taken = task, v.Taken+1
		v.Takes = append(v.Takes, runTake{Fire: at, N: v.Taken})
		if n := len(v.Takes) - taskstate.MaxRunTakes; n > 0 {
			v.Takes = v.Takes[n:]
		}
		b, _ := json.Marshal(v) // always encodes
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv)}, []clientv3.Op{clientv3.OpPut(k, string(b))})
		if err != nil {
			return 0, storeFail("TakeRun", task, err)
		}
		if ok {
			return v.Taken, nil
		}
	}
}

// placeholderID names a placeholder run in its key, so that the record of
// its run finds it among the keys alone: a digest of what
// taskstate.Store.Record matches (fire, manual, attempt, backfill, node).
func placeholderID(r taskstate.Run) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d %t %d %t %s", r.Fire.UnixNano(), r.Manual, r.Attempt, r.Backfill, r.Node))
	return hex.EncodeToString(sum[:8])
}

// recordIDKey is the end of the key of a run recorded with ID id
// (taskstate.TaskRun.ID), so that a record sent again finds the run among
// the keys alone: "/id-" and a digest of the ID.
func recordIDKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "/id-" + hex.EncodeToString(sum[:8])
}

// hasPlaceholder reports whether the record of r replaces a placeholder.
func hasPlaceholder(r taskstate.Run) bool { return r.Manual || r.Attempt >= 1 || r.Backfill }

// A runEntry is one run key of a task's history, as a history edit sees it.
type runEntry struct {
	key   string
	value string // "" for an existing key, whose value is not read
	isNew bool
}

// A historyEdit changes a task's runs in memory and gives the transaction's
// compares and ops: the task's sequence key (its last run's number) is
// rewritten by every change of its runs, so that one compare of its mod
// revision checks that the runs are as read.
type historyEdit struct {
	s       *Store
	task    string
	seqKey  string
	prefix  string
	seqKV   *mvccpb.KeyValue
	seq     uint64
	kept    []runEntry // oldest first
	removed []string   // existing keys removed (placeholders replaced)
	// keep is how many runs the edit keeps: the history length, or as many
	// as the task had if more (a placeholder never shortens the history),
	// or a record's taskstate.KeepOf.
	keep int
}

// historyReads are the reads a historyEdit of task needs: the sequence key
// and the run keys (keys only, oldest first).
func (s *Store) historyReads(task string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(s.taskKey("seq", task)),
		clientv3.OpGet(s.runsPrefix(task), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))}
}

// newHistoryEdit starts an edit of task's runs from what historyReads read.
func (s *Store) newHistoryEdit(task string, seq, runs []*mvccpb.KeyValue) (*historyEdit, error) {
	e := &historyEdit{s: s, task: task, seqKey: s.taskKey("seq", task), prefix: s.runsPrefix(task), seqKV: firstKV(seq)}
	if e.seqKV != nil {
		n, err := strconv.ParseUint(string(e.seqKV.Value), 10, 64)
		if err != nil {
			return nil, storeCorrupt("run sequence", e.seqKey, err)
		}
		e.seq = n
	}
	for _, kv := range runs {
		e.kept = append(e.kept, runEntry{key: string(kv.Key)})
	}
	e.keep = max(s.history, len(e.kept))
	return e, nil
}

// add appends run r (a placeholder if placeholder) as the newest; id is
// the ID it is recorded with, "" for none.
func (e *historyEdit) add(r taskstate.Run, placeholder bool, id string) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: task %q: run %+v: %v", taskstate.ErrInvalid, e.task, r, err)
	}
	e.seq++
	k := e.prefix + fmt.Sprintf("%020d", e.seq)
	switch {
	case placeholder:
		k += "/" + placeholderID(r)
	case id != "":
		k += recordIDKey(id)
	}
	e.kept = append(e.kept, runEntry{key: k, value: string(v), isNew: true})
	return nil
}

// has reports whether a run recorded with ID id is among the kept runs;
// no ID is never kept.
func (e *historyEdit) has(id string) bool {
	if id == "" {
		return false
	}
	suffix := recordIDKey(id)
	for _, r := range e.kept {
		if len(r.key) > len(e.prefix)+20 && r.key[len(e.prefix)+20:] == suffix {
			return true
		}
	}
	return false
}

// replace removes the newest kept placeholder that r's record replaces.
func (e *historyEdit) replace(r taskstate.Run) {
	suffix := "/" + placeholderID(r)
	for i := len(e.kept) - 1; i >= 0; i-- {
		k := e.kept[i].key
		if len(k) > len(e.prefix)+20 && k[len(e.prefix)+20:] == suffix {
			if !e.kept[i].isNew {
				e.removed = append(e.removed, k)
			}
			e.kept = append(e.kept[:i], e.kept[i+1:]...)
			return
		}
	}
}

// txn returns the edit's compare and ops: the newest history runs are
// kept, the older existing keys deleted with one range delete, the new
// ones put, the sequence key rewritten.
func (e *historyEdit) txn() (clientv3.Cmp, []clientv3.Op) {
	kept := e.kept
	var dropOld bool
	if n := len(kept) - e.keep; n > 0 {
		for _, d := range kept[:n] {
			dropOld = dropOld || !d.isNew
		}
		kept = kept[n:]
	}
	var ops []clientv3.Op
	first := ""
	if len(kept) > 0 {
		first = kept[0].key
	}
	if dropOld {
		ops = append(ops, clientv3.OpDelete(e.prefix, clientv3.WithRange(first)))
	}
	for _, k := range e.removed {
		if !dropOld || k >= first {
			ops = append(ops, clientv3.OpDelete(k))
		}
	}
	for _, r := range kept {
		if r.isNew {
			ops = append(ops, clientv3.OpPut(r.key, r.value))
		}
	}
	ops = append(ops, clientv3.OpPut(e.seqKey, strconv.FormatUint(e.seq, 10)))
	return unchangedCmp(e.seqKey, e.seqKV), ops
}

// commit runs one optimistic transaction: If cmps Then ops. It reports
// whether the compares held; an error is the client's.
func (s *Store) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (bool, error) {
	resp, err := s.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// TakeRequest removes task's pending request and adds node's placeholder
// run: a read of the request and the task's run keys, then a transaction
// that checks both unchanged (two round trips; again on a conflict).
func (s *Store) TakeRequest(ctx context.Context, task, node string) (time.Time, bool, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	if err := taskstate.CheckNode(node); err != nil {
		return time.Time{}, false, err
	}
	k := s.taskKey("requests", task)
	for {
		got, err := s.read(ctx, append([]clientv3.Op{clientv3.OpGet(k)}, s.historyReads(task)...)...)
		if err != nil {
			return time.Time{}, false, storeFail("TakeRequest", task, err)
		}
		kv := firstKV(got[0])
		if kv == nil {
			return time.Time{}, false, nil
		}
		var r storedRequest
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return time.Time{}, false, storeCorrupt("request", k, err)
		}
		e, err := s.newHistoryEdit(task, got[1], got[2])
		if err != nil {
			return time.Time{}, false, err
		}
		if err := e.add(taskstate.Run{Fire: r.At, Manual: true, Node: node, Outcome: taskstate.OutcomeTaken}, true, ""); err != nil {
			return time.Time{}, false, err
		}
		cmp, ops := e.txn()
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv), cmp}, append(ops, clientv3.OpDelete(k)))
		if err != nil {
			return time.Time{}, false, storeFail("TakeRequest", task, err)
		}
		if ok {
			return r.At, true, nil
		}
	}
}

// TakeRetry marks task's pending retry taken if it is r and adds node's
// placeholder run: a read of the retry and the run keys, then a
// transaction that checks both unchanged (two round trips; again on a
// conflict). A taken retry stays in its key, marked, so that a record sent
// again does not make it pending again.
func (s *Store) TakeRetry(ctx context.Context, task, node string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckTakeRetry(ctx, task, node, r); err != nil {
		return false, err
	}
	k := s.taskKey("retries", task)
	for {
		got, err := s.read(ctx, append([]clientv3.Op{clientv3.OpGet(k)}, s.historyReads(task)...)...)
		if err != nil {
			return false, storeFail("TakeRetry", task, err)
		}
		kv := firstKV(got[0])
		p, err := decodeRetry(kv)
		if err != nil {
			return false, err
		}
		if p == nil || p.Taken || !p.Fire.Equal(r.Fire) || p.Attempt != r.Attempt {
			return false, nil
		}
		e, err := s.newHistoryEdit(task, got[1], got[2])
		if err != nil {
			return false, err
		}
		if err := e.add(taskstate.Run{Fire: p.Fire, Manual: p.Manual, Attempt: p.Attempt, Node: node, Outcome: taskstate.OutcomeTaken}, true, ""); err != nil {
			return false, err
		}
		p.Taken = true
		v, _ := json.Marshal(p)
		cmp, ops := e.txn()
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv), cmp}, append(ops, clientv3.OpPut(k, string(v))))
		if err != nil {
			return false, storeFail("TakeRetry", task, err)
		}
		if ok {
			return true, nil
		}
	}
}

// LeaveWaiting makes r task's pending run unless another is pending or the
// last one taken is later: a Get of the task's retry key, then at most a
// transaction that puts it if unchanged (one or two round trips; again on
// a conflict). A resend finds r the task's last retry, pending or taken,
// and answers true.
func (s *Store) LeaveWaiting(ctx context.Context, task string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckLeaveWaiting(ctx, task, r); err != nil {
		return false, err
	}
	k := s.taskKey("retries", task)
	v, err := json.Marshal(newRetryValue(task, r))
	if err != nil {
		return false, fmt.Errorf("%w: task %q: retry %+v: %v", taskstate.ErrInvalid, task, r, err)
	}
	for {
		resp, err := s.client.Get(ctx, k)
		if err != nil {
			return false, storeFail("LeaveWaiting", task, err)
		}
		kv := firstKV(resp.Kvs)
		p, err := decodeRetry(kv)
		if err != nil {
			return false, err
		}
		switch {
		case p != nil && p.Fire.Equal(r.Fire) && p.Attempt == r.Attempt:
			return true, nil
		case p != nil && (!p.Taken || taskstate.RetryLater(p.retry(), r)):
			return false, nil
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{unchangedCmp(k, kv)}, []clientv3.Op{clientv3.OpPut(k, string(v))})
		if err != nil {
			return false, storeFail("LeaveWaiting", task, err)
		}
		if ok {
			return true, nil
		}
	}
}

// storeMaxTxnOps is etcd's default --max-txn-ops: how many ops a transaction
// may have in each of its branches and compares.
const storeMaxTxnOps = 128

// Record adds each run to its task's runs, in place of its placeholder,
// and leaves the runs' retries: one read of every task's sequence key, run
// keys and (for a run with a retry) retry key, then one transaction that
// checks them unchanged (two round trips for any number of runs and
// tasks; again on a conflict). A batch whose transaction could exceed
// etcd's default --max-txn-ops (128: at most 2 ops per run and 3 per task)
// is recorded in several, each of whole tasks: a task's runs are then
// recorded in one step, and the call's in one per group of tasks. A run
// recorded with an ID ends its key with it (recordIDKey), so that a Record
// sent again, whole or in part committed, finds among the run keys it
// reads the runs already kept, and adds only the others.
func (s *Store) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	if err := taskstate.CheckRecord(ctx, runs); err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil
	}
	byTask := map[string][]taskstate.TaskRun{}
	var order []string
	for _, tr := range runs {
		if _, ok := byTask[tr.Task]; !ok {
			order = append(order, tr.Task)
		}
		byTask[tr.Task] = append(byTask[tr.Task], tr)
	}
	var group []taskstate.TaskRun
	ops := 0
	for _, task := range order {
		// A task's runs go in transactions of at most storeMaxTxnOps ops,
		// in order: a history of up to taskstate.MaxHistory runs may keep
		// every new one (TaskRun.Keep).
		for chunk := range slices.Chunk(byTask[task], (storeMaxTxnOps-3)/2) {
			n := 2*len(chunk) + 3
			if len(group) > 0 && ops+n > storeMaxTxnOps {
				if err := s.record(ctx, group); err != nil {
					return err
				}
				group, ops = nil, 0
			}
			group, ops = append(group, chunk...), ops+n
		}
	}
	return s.record(ctx, group)
}

// record is Record of runs in one transaction.
func (s *Store) record(ctx context.Context, runs []taskstate.TaskRun) error {
	type taskState struct {
		edit     *historyEdit
		retryKV  *mvccpb.KeyValue
		retry    *retryValue
		read     bool // the retry key was read
		newRetry bool
	}
	var tasks []string
	index := map[string]int{} // the first read op of each task
	withRetry := map[string]bool{}
	var reads []clientv3.Op
	for _, tr := range runs {
		if tr.Retry != nil {
			withRetry[tr.Task] = true
		}
	}
	for _, tr := range runs {
		if _, ok := index[tr.Task]; ok {
			continue
		}
		tasks = append(tasks, tr.Task)
		index[tr.Task] = len(reads)
		reads = append(reads, s.historyReads(tr.Task)...)
		if withRetry[tr.Task] {
			reads = append(reads, clientv3.OpGet(s.taskKey("retries", tr.Task)))
		}
	}
	failed := func(err error) error {
		if len(tasks) == 1 {
			return storeFail("Record", tasks[0], err)
		}
		return fmt.Errorf("%w: Record of tasks %q: %w", ErrEtcd, tasks, err)
	}
	for {
		got, err := s.read(ctx, reads...)
		if err != nil {
			return failed(err)
		}
		states := make(map[string]*taskState, len(tasks))
		for _, task := range tasks {
			i := index[task]
			e, err := s.newHistoryEdit(task, got[i], got[i+1])
			if err != nil {
				return err
			}
			st := &taskState{edit: e}
			if withRetry[task] {
				st.read, st.retryKV = true, firstKV(got[i+2])
				if st.retry, err = decodeRetry(st.retryKV); err != nil {
					return err
				}
			}
			states[task] = st
		}
		for _, tr := range runs {
			st, r := states[tr.Task], tr.Run
			r.Error = taskstate.CutError(r.Error)
			if !st.edit.has(tr.ID) { // else a resend: the run is kept
				if hasPlaceholder(r) {
					st.edit.replace(r)
				}
				if err := st.edit.add(r, false, tr.ID); err != nil {
					return err
				}
				st.edit.keep = taskstate.KeepOf(s.history, tr.Keep)
			}
			if tr.Retry != nil && (st.retry == nil || taskstate.RetryLater(*tr.Retry, st.retry.retry())) {
				v := newRetryValue(tr.Task, *tr.Retry)
				st.retry, st.newRetry = &v, true
			}
		}
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, task := range tasks {
			st := states[task]
			cmp, eops := st.edit.txn()
			cmps, ops = append(cmps, cmp), append(ops, eops...)
			if st.read {
				k := s.taskKey("retries", task)
				cmps = append(cmps, unchangedCmp(k, st.retryKV))
				if st.newRetry {
					v, _ := json.Marshal(st.retry)
					ops = append(ops, clientv3.OpPut(k, string(v)))
				}
			}
		}
		ok, err := s.commit(ctx, cmps, ops)
		if err != nil {
			return failed(err)
		}
		if ok {
			return nil
		}
	}
}

// Runs returns task's newest runs, newest first: one Get of the task's run
// keys, sorted by key descending and limited to limit, so that it reads
// only the runs it returns.
func (s *Store) Runs(ctx context.Context, task string, limit int) ([]taskstate.Run, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return nil, err
	}
	if err := taskstate.CheckLimit(limit); err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, s.runsPrefix(task), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, storeFail("Runs", task, err)
	}
	out := make([]taskstate.Run, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r taskstate.Run
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, storeCorrupt("run", string(kv.Key), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// History returns how many runs per task the store keeps
// (taskstate.HistoryKeeper).
func (s *Store) History() int { return s.history }
