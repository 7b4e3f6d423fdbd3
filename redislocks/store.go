package redislocks

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/taskstate"
)

// historyTTL is how long a task's run history outlives its last run, so
// that the histories of tasks no longer declared do not pile up.
const historyTTL = 90 * 24 * time.Hour

// callTTL is how long a mutating call is remembered for a retry of it: as
// the release tombstone's minute, far longer than go-redis's retries take
// with its defaults (MaxRetries 3, a backoff of at most 512 ms, a read
// timeout of 3 s each).
const callTTL = time.Minute

var (
	//go:embed record.lua
	recordSource string
	//go:embed take.lua
	takeSource string
	//go:embed takeretry.lua
	takeRetrySource string
	//go:embed leavewaiting.lua
	leaveWaitingSource string
	//go:embed request.lua
	requestSource string
	//go:embed pause.lua
	pauseSource string
	//go:embed takerun.lua
	takeRunSource string
	//go:embed trail.lua
	trailSource string

	recordScript    = redis.NewScript(recordSource)
	takeScript      = redis.NewScript(takeSource)
	takeRetryScript = redis.NewScript(takeRetrySource)
	requestScript   = redis.NewScript(requestSource)
	pauseScript     = redis.NewScript(pauseSource)
	takeRunScript   = redis.NewScript(takeRunSource)
	// trailScript carries no call's nonce: an event's Key is its own.
	trailScript = redis.NewScript(trailSource)
	// leaveWaitingScript carries no call's nonce: its answer is read from
	// the retries hash, the same for a resend.
	leaveWaitingScript = redis.NewScript(leaveWaitingSource)
)

// StoreOptions configures a Store made by NewStore.
type StoreOptions struct {
	// Client is the Redis client to borrow. Required.
	Client redis.Cmdable
	// Namespace isolates this store's tasks from those of other
	// environments sharing the Redis, as the driver's Options.Namespace
	// does for locks. Required, with the same rule.
	Namespace string
	// History is how many runs per task the store keeps; zero means
	// taskstate.DefaultHistory.
	History int
	// Trail is how many events of the trail of control actions the store
	// keeps, the newest; zero means taskstate.DefaultTrail, at most
	// taskstate.MaxTrail.
	Trail int
}

// A Store is a taskstate.Store in Redis, shared by every node on the same
// Redis and namespace. Make one with NewStore; it is safe for concurrent
// use. For namespace ns and task name t it uses
//
//	ndigo:{ns:t}:task:paused     while the task is paused: its taskstate.Pause, JSON ("1" if paused by a version before notes); no expiry
//	ndigo:{ns:t}:task:resumed    the task's last resume with a note, by or at, while it is not paused: its taskstate.Pause, JSON; no expiry
//	ndigo:{ns:t}:task:call:<n>   a SetPaused call's nonce n, for a minute
//	ndigo:{ns}:requests          the pending manual-run requests: task name -> Unix nanoseconds; no expiry
//	ndigo:{ns}:retries           each task's last retry or waiting fire (attempt 1): task name -> "<fire> <attempt> <due> <manual>[ t]" (Unix nanoseconds zero-padded to 20 digits, the attempt to 10, 0 or 1; " t" once taken); no expiry: a task's field stays once it had a retry
//	ndigo:{ns}:runcounts         each task's runs taken (TakeRun): task name -> "<taken> <fire> <n> <fire> <n> ..." (how many, then the last taskstate.MaxRunTakes takes, oldest first: a fire in Unix nanoseconds and the number it took); no expiry: a task's field stays once it took a run
//	ndigo:{ns}:backfills         each task's last backfill: task name -> "<cursor> <taken> <refused> <state> <JSON>" (see backfilltake.lua); no expiry: a task's field stays once it had a backfill
//	ndigo:{ns}:ran:t             the instants of t known to have run (taken by a backfill, or in the history when one started): a set of Unix nanoseconds zero-padded to 20 digits; it expires 90 days after the last
//	ndigo:{ns}:pauses            the pause generation (taskstate.Poll.Pauses): INCR after each SetPaused; no expiry
//	ndigo:{ns}:schedules         the stored schedules: name -> taskstate.EncodeSchedule's bytes; no expiry
//	ndigo:{ns}:schedules:gen     the schedules' generation (taskstate.Poll.Schedules): INCR by each schedule call that changed them; no expiry
//	ndigo:{ns}:runs:t            the newest runs, JSON each (a recorded run's ends with the ID it was recorded with, "id"), newest first; it expires 90 days after the last
//	ndigo:{ns}:trail             the trail of control actions (AppendEvent): a sorted set, score the entry's Seq, member "<seq> <taskstate.Event JSON>"; no expiry, the newest StoreOptions.Trail entries
//	ndigo:{ns}:trail:keys        the Keys of the trail's entries: Key -> Seq; no expiry, as many as the trail holds (a dropped entry's Key is forgotten)
//	ndigo:{ns}:trail:seq         the last Seq given (INCR by each append that stored one); no expiry
//	ndigo:{ns}:call:<n>          a RequestRun, TakeRequest, TakeRetry, TakeRun, Record, backfill or schedule call's nonce n (a take's: what it took; a recorded run's with an ID: record:<ID>), for a minute
//
// The runs are in the namespace's hash slot, with the requests and the
// retries, so that a take removes the request or retry and adds its
// placeholder run, and a record leaves its retry, in one script on a
// Redis Cluster too; a namespace's requests and histories are thus on one
// Cluster node, while its locks and paused flags spread by task. (Before,
// the runs were at ndigo:{ns:t}:task:runs; runs recorded there are no
// longer read and expire with their TTL.) A
// placeholder's JSON has "fire_ns", the request's instant in Unix
// nanoseconds, in place of "fire": the script copies the instant the
// request holds.
//
// Task names and schedule names travel as keys and arguments, never in
// script text. Each operation is one round trip (a Record of many runs
// too: one pipeline), but SetPaused, two (the flag and the pause generation
// are in different Cluster slots). Every mutating call (SetPaused,
// RequestRun, TakeRequest, TakeRetry, TakeRun, Record, the backfills' and
// the schedules') is a script that first looks for the key of the call's
// nonce, made for the call and the same for go-redis's retries of it
// (go-redis resends a command whose reply was lost, by default up to 3
// times): a retry whose first attempt ran answers what that attempt did and
// changes nothing again, whatever other nodes did in between; but
// LeaveWaiting (leavewaiting.lua: an HGET of the retries hash and at most
// an HSET), whose answer is read from the task's last retry, pending or
// taken, and so is the same for a resend, carries none. A SetPaused
// does not undo a later one, a RequestRun requests at most once, a
// TakeRequest returns the request its first attempt took (or none) and never
// a later one, a TakeRun answers the number its first attempt took (or 0)
// and takes nothing again, a Record records once, a CreateSchedule answers
// nil (it stored the schedule), an UpdateSchedule does not undo a later
// one, and a DeleteSchedule answers true and does not delete a schedule
// created since.
// AppendEvent (trail.lua) carries no nonce: the event's Key is its own,
// and the script answers the entry stored for a Key held, so that a resend
// (go-redis's or the caller's) stores nothing again. It numbers the entry
// with an INCR in the script: scripts run one at a time, so that the Seqs
// increase in the order the appends took effect.
// A schedule call (schedule.lua) changes the schedules hash and moves their
// generation on in one script, and Poll reads the generation with the rest.
// A call whose every attempt lost its reply returns an error wrapping
// ErrRedis, and may have taken effect (once).
type Store struct {
	client   redis.Cmdable
	ns       string
	history  int
	requests string
	retries  string
	// backfills is the hash of each task's last backfill.
	backfills string
	// runCounts is the hash of each task's runs taken (TakeRun).
	runCounts string
	pauses    string        // the pause generation's key
	nonce     string        // random prefix of the nonces of this store's calls
	calls     atomic.Uint64 // numbers the calls that carry a nonce
	// schedules is the hash of the stored schedules, scheduleGen their
	// generation's key.
	schedules, scheduleGen string
	// trail, trailKeys and trailSeq are the trail of control actions, the
	// Keys it holds, its last Seq; keep is how many entries it keeps.
	trail, trailKeys, trailSeq string
	keep                       int
}

var _ taskstate.Store = (*Store)(nil)

// NewStore returns a store on opts.Client. It does not contact Redis.
func NewStore(opts StoreOptions) (*Store, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("%w: redislocks: StoreOptions.Client must not be nil", taskstate.ErrInvalid)
	}
	if err := CheckNamespace(opts.Namespace); err != nil {
		return nil, fmt.Errorf("%w: redislocks: StoreOptions.Namespace %q %v", taskstate.ErrInvalid, opts.Namespace, err)
	}
	n, err := taskstate.CheckHistory("redislocks: StoreOptions.History", opts.History)
	if err != nil {
		return nil, err
	}
	keep, err := taskstate.CheckTrail("redislocks: StoreOptions.Trail", opts.Trail)
	if err != nil {
		return nil, err
	}
	return &Store{client: opts.Client, ns: opts.Namespace, history: n, requests: "ndigo:{" + opts.Namespace + "}:requests",
		retries:     "ndigo:{" + opts.Namespace + "}:retries",
		backfills:   "ndigo:{" + opts.Namespace + "}:backfills",
		runCounts:   "ndigo:{" + opts.Namespace + "}:runcounts",
		pauses:      "ndigo:{" + opts.Namespace + "}:pauses",
		schedules:   "ndigo:{" + opts.Namespace + "}:schedules",
		scheduleGen: "ndigo:{" + opts.Namespace + "}:schedules:gen",
		trail:       "ndigo:{" + opts.Namespace + "}:trail",
		trailKeys:   "ndigo:{" + opts.Namespace + "}:trail:keys",
		trailSeq:    "ndigo:{" + opts.Namespace + "}:trail:seq",
		keep:        keep,
		nonce:       strconv.FormatUint(rand.Uint64(), 36) + "."}, nil
}

// callNonce returns a nonce for one call, the same for go-redis's retries
// of it.
func (s *Store) callNonce() string {
	return s.nonce + strconv.FormatUint(s.calls.Add(1), 36)
}

// call returns the key that remembers a call in the namespace's slot.
func (s *Store) call() string {
	return "ndigo:{" + s.ns + "}:call:" + s.callNonce()
}

// runs returns the key of task's runs list.
func (s *Store) runs(task string) string {
	return "ndigo:{" + s.ns + "}:runs:" + task
}

// String names the store and its namespace.
func (s *Store) String() string { return "redislocks store (namespace " + s.ns + ")" }

func (s *Store) key(task, suffix string) string {
	return "ndigo:{" + s.ns + ":" + task + "}:task:" + suffix
}

// fail wraps a client error with ErrRedis and the operation's task.
func fail(op, task string, err error) error {
	return fmt.Errorf("%w: %s of task %q: %w", ErrRedis, op, task, err)
}

// SetPaused sets task's pause, once per call (pause.lua: the flag and the
// last resume, in the task's slot, in one script), then moves the pause
// generation on: two round trips, the flag and the generation being in
// different Cluster slots. A retried INCR moves it twice, which tells the
// pollers the same. The INCR follows every flag script that may have run
// (it succeeded, or its reply did not come), on a context that the
// caller's end does not end (bounded by generationTimeout): a flag changed
// without the generation would stay unseen by the nodes that keep the
// flags they read until the next SetPaused.
//
// A pause keeps its JSON as the flag's value and deletes the last resume;
// a resume deletes the flag and keeps its JSON, if it has a note, a by or
// an at, as the last resume. A node of a version before notes reads a
// flag's presence and sets it to "1", and so reads and sets the same
// flags; but its resume leaves the last resume of this version, which
// Paused then returns, until the next SetPaused of this version.
func (s *Store) SetPaused(ctx context.Context, task string, p taskstate.Pause) error {
	if err := taskstate.CheckSetPaused(ctx, task, p); err != nil {
		return err
	}
	flag, note := "0", ""
	if p.Paused || p.Note != "" || p.By != "" || !p.At.IsZero() {
		p.At = p.At.UTC()
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("%w: task %q: pause %+v: %v", taskstate.ErrInvalid, task, p, err)
		}
		note = string(b)
	}
	if p.Paused {
		flag = "1"
	}
	err := pauseScript.Run(ctx, s.client, []string{s.key(task, "paused"), s.key(task, "resumed"), s.key(task, "call:"+s.callNonce())},
		flag, note, callTTL.Milliseconds()).Err()
	var reply redis.Error // Redis answered an error: the script did not change the flag
	if err == nil || !errors.As(err, &reply) {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), generationTimeout)
		incr := s.client.Incr(gctx, s.pauses).Err()
		cancel()
		if err == nil {
			err = incr
		}
	}
	if err != nil {
		return fail("SetPaused", task, err)
	}
	return nil
}

// generationTimeout bounds the move of the pause generation that follows
// a SetPaused whose caller's context ended: go-redis's own timeouts bound
// it first with its default options.
const generationTimeout = 10 * time.Second

// Paused returns task's pause: one MGET of the flag and the last resume
// (one slot). A flag whose value is not a pause's JSON ("1", set by a
// version before notes, or by hand) is a pause without note, and a last
// resume that is not (set by hand), a resume without note: the flag alone
// decides whether the task runs.
func (s *Store) Paused(ctx context.Context, task string) (taskstate.Pause, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return taskstate.Pause{}, err
	}
	vals, err := s.client.MGet(ctx, s.key(task, "paused"), s.key(task, "resumed")).Result()
	if err != nil {
		return taskstate.Pause{}, fail("Paused", task, err)
	}
	if len(vals) != 2 {
		return taskstate.Pause{}, fail("Paused", task, fmt.Errorf("MGET of 2 keys answered %d values", len(vals)))
	}
	if v, ok := vals[0].(string); ok {
		var p taskstate.Pause
		if json.Unmarshal([]byte(v), &p) != nil {
			p = taskstate.Pause{}
		}
		p.Paused = true
		return p, nil
	}
	if v, ok := vals[1].(string); ok {
		var p taskstate.Pause
		if json.Unmarshal([]byte(v), &p) != nil {
			p = taskstate.Pause{}
		}
		p.Paused = false
		return p, nil
	}
	return taskstate.Pause{}, nil
}

// RequestRun records a pending run of task, merged into one already
// pending, once per call.
func (s *Store) RequestRun(ctx context.Context, task string, at time.Time) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	err := requestScript.Run(ctx, s.client, []string{s.requests, s.call()}, task, strconv.FormatInt(at.UnixNano(), 10),
		callTTL.Milliseconds()).Err()
	if err != nil {
		return fail("RequestRun", task, err)
	}
	return nil
}

// Poll returns the pending requests and retries, the backfills, the runs
// taken, the pause generation and the schedules' generation: four
// HGETALLs and two GETs in one pipeline, one round trip (the keys are in
// the namespace's slot). A retry, backfill or count whose value does not
// read (written by hand) is left out.
func (s *Store) Poll(ctx context.Context) (taskstate.Poll, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return taskstate.Poll{}, err
	}
	var reqs, retries, backfills, runCounts *redis.MapStringStringCmd
	var gen, scheduleGen *redis.StringCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		reqs, retries, gen = p.HGetAll(ctx, s.requests), p.HGetAll(ctx, s.retries), p.Get(ctx, s.pauses)
		backfills, scheduleGen = p.HGetAll(ctx, s.backfills), p.Get(ctx, s.scheduleGen)
		runCounts = p.HGetAll(ctx, s.runCounts)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return taskstate.Poll{}, fmt.Errorf("%w: Poll in namespace %q: %w", ErrRedis, s.ns, err)
	}
	out := taskstate.Poll{Requests: make(map[string]time.Time, len(reqs.Val()))}
	for task, v := range reqs.Val() {
		out.Requests[task] = unixNano(v)
	}
	for task, v := range retries.Val() {
		if r, ok := readRetry(v); ok {
			if out.Retries == nil {
				out.Retries = make(map[string]taskstate.Retry)
			}
			out.Retries[task] = r
		}
	}
	for task, v := range backfills.Val() {
		if b, ok := readBackfill(task, v); ok {
			if out.Backfills == nil {
				out.Backfills = make(map[string]taskstate.Backfill)
			}
			out.Backfills[task] = b
		}
	}
	for task, v := range runCounts.Val() {
		taken, _, _ := strings.Cut(v, " ")
		if n, err := strconv.Atoi(taken); err == nil && n > 0 {
			if out.Runs == nil {
				out.Runs = make(map[string]int)
			}
			out.Runs[task] = n
		}
	}
	out.Pauses, _ = gen.Int64() // none yet: 0
	out.Schedules, _ = scheduleGen.Int64()
	return out, nil
}

// TakeRequest removes task's pending request and adds node's placeholder
// run, in one script.
func (s *Store) TakeRequest(ctx context.Context, task, node string) (time.Time, bool, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	if err := taskstate.CheckNode(node); err != nil {
		return time.Time{}, false, err
	}
	before, after := placeholder(node)
	v, err := takeScript.Run(ctx, s.client, []string{s.requests, s.call(), s.runs(task)}, task, callTTL.Milliseconds(),
		before, after, s.history, historyTTL.Milliseconds()).Text()
	switch {
	case err == nil:
		return unixNano(v), true, nil
	case errors.Is(err, redis.Nil):
		return time.Time{}, false, nil
	}
	return time.Time{}, false, fail("TakeRequest", task, err)
}

// TakeRetry marks task's pending retry taken if it is r and adds node's
// placeholder run, in one script.
func (s *Store) TakeRetry(ctx context.Context, task, node string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckTakeRetry(ctx, task, node, r); err != nil {
		return false, err
	}
	n, err := takeRetryScript.Run(ctx, s.client, []string{s.retries, s.call(), s.runs(task)}, task, callTTL.Milliseconds(),
		retryName(r), retryPlaceholder(r.Fire, r.Manual, r.Attempt, node), s.history, historyTTL.Milliseconds()).Int()
	if err != nil {
		return false, fail("TakeRetry", task, err)
	}
	return n == 1, nil
}

// LeaveWaiting makes r task's pending retry unless another is pending or
// the last one taken is later, in one script (leavewaiting.lua: an HGET of
// the retries hash and at most an HSET, one round trip). It carries no
// nonce: a resend of a call whose reply was lost finds r the task's last
// retry, pending or taken since by another node, and answers true.
func (s *Store) LeaveWaiting(ctx context.Context, task string, r taskstate.Retry) (bool, error) {
	if err := taskstate.CheckLeaveWaiting(ctx, task, r); err != nil {
		return false, err
	}
	n, err := leaveWaitingScript.Run(ctx, s.client, []string{s.retries}, task, retryValue(r), retryNameLen).Int()
	if err != nil {
		return false, fail("LeaveWaiting", task, err)
	}
	return n == 1, nil
}

// TakeRun takes the next of task's runs for fire unless fire took one
// among the task's last takes (its number) or max were taken (0), in one
// script (takerun.lua) that carries the call's nonce.
func (s *Store) TakeRun(ctx context.Context, task string, fire time.Time, max int) (int, error) {
	if err := taskstate.CheckTakeRun(ctx, task, fire, max); err != nil {
		return 0, err
	}
	n, err := takeRunScript.Run(ctx, s.client, []string{s.runCounts, s.call()}, task, callTTL.Milliseconds(),
		strconv.FormatInt(fire.UnixNano(), 10), max, taskstate.MaxRunTakes).Int()
	if err != nil {
		return 0, fail("TakeRun", task, err)
	}
	return n, nil
}

// AppendEvent appends e to the namespace's trail in one script
// (trail.lua), which answers the entry stored for e.Key if the trail holds
// one.
func (s *Store) AppendEvent(ctx context.Context, e taskstate.Event) (taskstate.Event, error) {
	if err := taskstate.CheckEvent(ctx, e); err != nil {
		return taskstate.Event{}, err
	}
	b, err := json.Marshal(taskstate.StoredEvent(e, 0))
	if err != nil {
		return taskstate.Event{}, fmt.Errorf("redislocks: event %q: %w", e.Key, err)
	}
	m, err := trailScript.Run(ctx, s.client, []string{s.trail, s.trailKeys, s.trailSeq}, e.Key, b, s.keep).Text()
	if err != nil {
		return taskstate.Event{}, fmt.Errorf("%w: AppendEvent of event %q: %w", ErrRedis, e.Key, err)
	}
	return trailEntry(m)
}

// trailEntry decodes a member of the trail, "<seq> <JSON>".
func trailEntry(m string) (taskstate.Event, error) {
	seq, js, ok := strings.Cut(m, " ")
	n, err := strconv.ParseInt(seq, 10, 64)
	var e taskstate.Event
	if ok && err == nil {
		err = json.Unmarshal([]byte(js), &e)
	}
	if !ok || err != nil {
		return taskstate.Event{}, fmt.Errorf("%w: a trail entry %.64q is not \"<seq> <JSON>\": %v", ErrRedis, m, err)
	}
	return taskstate.StoredEvent(e, n), nil
}

// Events reads the trail's entries of Seq above after, oldest first, at
// most limit: one ZRANGEBYSCORE.
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]taskstate.Event, error) {
	if err := taskstate.CheckEvents(ctx, after, limit); err != nil {
		return nil, err
	}
	ms, err := s.client.ZRangeByScore(ctx, s.trail, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(after, 10), Max: "+inf",
		Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: Events after %d: %w", ErrRedis, after, err)
	}
	var out []taskstate.Event
	for _, m := range ms {
		e, err := trailEntry(m)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// retryName is the start of r's value in the retries hash that names it:
// its fire and attempt, zero-padded so that later retries compare greater
// as text (record.lua orders them so; Lua's numbers would round the
// nanoseconds).
func retryName(r taskstate.Retry) string {
	return fmt.Sprintf("%020d %010d ", r.Fire.UnixNano(), r.Attempt)
}

// retryNameLen is the length of every retryName.
const retryNameLen = 32

// retryValue is r's value in the retries hash.
func retryValue(r taskstate.Retry) string {
	manual := "0"
	if r.Manual {
		manual = "1"
	}
	return retryName(r) + strconv.FormatInt(r.Due.UnixNano(), 10) + " " + manual
}

// readRetry reads a value of the retries hash: false for a taken retry or
// an unreadable value.
func readRetry(v string) (taskstate.Retry, bool) {
	var fire, due int64
	var attempt, manual int
	if strings.HasSuffix(v, " t") {
		return taskstate.Retry{}, false
	}
	if _, err := fmt.Sscanf(v, "%d %d %d %d", &fire, &attempt, &due, &manual); err != nil {
		return taskstate.Retry{}, false
	}
	return taskstate.Retry{Fire: time.Unix(0, fire).UTC(), Manual: manual == 1, Attempt: attempt, Due: time.Unix(0, due).UTC()}, true
}

// retryPlaceholder returns the JSON of node's placeholder run for its take
// of a retry. Record builds the same text to find it.
func retryPlaceholder(fire time.Time, manual bool, attempt int, node string) string {
	return runJSON(taskstate.Run{Fire: fire.UTC(), Manual: manual, Attempt: attempt, Node: node, Outcome: taskstate.OutcomeTaken})
}

// runJSON is r's JSON, as the runs list keeps it.
func runJSON(r taskstate.Run) string {
	b, _ := json.Marshal(r)
	return string(b) // a Run always encodes
}

// placeholder returns the JSON of node's placeholder run before and after
// the request's instant (Unix nanoseconds), which take.lua puts between
// them. Record builds the same text to find it.
func placeholder(node string) (before, after string) {
	n, _ := json.Marshal(node) // a string always encodes
	return `{"fire_ns":`, `,"manual":true,"node":` + string(n) + `,"outcome":"` + taskstate.OutcomeTaken + `"}`
}

// storedRun is a run as the list keeps it: a Run's JSON and the ID it was
// recorded with (last, so that record.lua finds it at the end of the
// text), or a placeholder, whose instant is FireNano.
type storedRun struct {
	taskstate.Run
	FireNano *int64 `json:"fire_ns,omitempty"`
	ID       string `json:"id,omitempty"`
}

// unixNano reads an instant the store wrote; an unreadable one (written by
// hand) reads as the zero time rather than hiding the request.
func unixNano(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Record adds the runs, each in place of its placeholder if it is manual or
// a retry, and leaves their retries pending:
// one record script per run, each with its call's nonce, in one pipeline
// (one round trip; the runs' keys are all in the namespace's slot, so one
// Cluster node serves them). go-redis resends a pipeline whose replies
// were lost whole, and each script's nonce keeps it from recording twice;
// a run with an ID has it for its nonce, so that a caller's resend within
// the nonce's minute records nothing again either, and keeps it in its
// JSON: a resend after the minute finds it among the task's kept runs
// (the script reads them: at most the history length) and adds no run.
func (s *Store) Record(ctx context.Context, runs ...taskstate.TaskRun) error {
	if err := taskstate.CheckRecord(ctx, runs); err != nil || len(runs) == 0 {
		return err
	}
	args, keys := make([][]any, len(runs)), make([][]string, len(runs))
	for i, tr := range runs {
		nonce := s.call() // one nonce per run, for every attempt
		if tr.ID != "" {
			nonce = "ndigo:{" + s.ns + "}:call:record:" + tr.ID // and for the caller's resends
		}
		keys[i] = []string{s.runs(tr.Task), nonce, s.retries}
		r := tr.Run
		r.Fire, r.Error = r.Fire.UTC(), taskstate.CutError(r.Error) // a backfill's take finds it by its instant's text
		b, err := json.Marshal(storedRun{Run: r, ID: tr.ID})
		if err != nil {
			return fmt.Errorf("redislocks: Record of task %q: %w", tr.Task, err)
		}
		var replaced, retry, idSuffix string
		if tr.ID != "" {
			id, _ := json.Marshal(tr.ID) // a string always encodes
			idSuffix = `,"id":` + string(id) + `}`
		}
		switch {
		case r.Backfill:
			replaced = runJSON(taskstate.BackfillPlaceholder(r.Fire, r.Node))
		case r.Attempt >= 1:
			replaced = retryPlaceholder(r.Fire, r.Manual, r.Attempt, r.Node)
		case r.Manual:
			before, after := placeholder(r.Node)
			replaced = before + strconv.FormatInt(r.Fire.UnixNano(), 10) + after
		}
		if tr.Retry != nil {
			retry = retryValue(*tr.Retry)
		}
		args[i] = []any{b, taskstate.KeepOf(s.history, tr.Keep), historyTTL.Milliseconds(), replaced, callTTL.Milliseconds(), tr.Task, retry, retryNameLen, idSuffix}
	}
	if len(runs) == 1 {
		if err := recordScript.Run(ctx, s.client, keys[0], args[0]...).Err(); err != nil {
			return fail("Record", runs[0].Task, err)
		}
		return nil
	}
	// A pipeline's EVALSHA cannot fall back to EVAL one command at a time:
	// load the script on a NOSCRIPT reply and send the pipeline again.
	send := func() error {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range runs {
				recordScript.EvalSha(ctx, p, keys[i], args[i]...)
			}
			return nil
		})
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = recordScript.Load(ctx, s.client).Err(); err == nil {
			err = send()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: Record of %d runs (of task %q first): %w", ErrRedis, len(runs), runs[0].Task, err)
	}
	return nil
}

// Runs returns task's newest runs, newest first, reading only those. A run
// that does not decode (written by another version) is left out.
func (s *Store) Runs(ctx context.Context, task string, limit int) ([]taskstate.Run, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return nil, err
	}
	if err := taskstate.CheckLimit(limit); err != nil {
		return nil, err
	}
	vs, err := s.client.LRange(ctx, s.runs(task), 0, int64(limit-1)).Result() // limit 0: every kept run
	if err != nil {
		return nil, fail("Runs", task, err)
	}
	out := make([]taskstate.Run, 0, len(vs))
	for _, v := range vs {
		var r storedRun
		if json.Unmarshal([]byte(v), &r) != nil {
			continue
		}
		if r.FireNano != nil {
			r.Fire = time.Unix(0, *r.FireNano).UTC()
		}
		out = append(out, r.Run)
	}
	return out, nil
}

// History returns how many runs per task the store keeps
// (taskstate.HistoryKeeper).
func (s *Store) History() int { return s.history }
