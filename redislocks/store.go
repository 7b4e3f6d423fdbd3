package redislocks

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ndigo/ndigo/taskstate"
)

// historyTTL is how long a task's run history outlives its last run, so
// that the histories of tasks no longer declared do not pile up.
const historyTTL = 90 * 24 * time.Hour

// takenTTL is how long the last take of each task is remembered for a
// retry of it: as tombstoneTTL, far longer than go-redis's retries take.
const takenTTL = time.Minute

var (
	//go:embed record.lua
	recordSource string
	//go:embed take.lua
	takeSource string

	recordScript = redis.NewScript(recordSource)
	takeScript   = redis.NewScript(takeSource)
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
}

// A Store is a taskstate.Store in Redis, shared by every node on the same
// Redis and namespace. Make one with NewStore; it is safe for concurrent
// use. For namespace ns and task name t it uses
//
//	ndigo:{ns:t}:task:paused   "1" while the task is paused; no expiry
//	ndigo:{ns:t}:task:runs     the newest runs, JSON each, newest first; it expires 90 days after the last
//	ndigo:{ns:t}:task:recorded the nonce of the last Record call; it expires with the runs
//	ndigo:{ns}:requests        the pending manual-run requests: task name -> Unix nanoseconds
//	ndigo:{ns}:taken           the last take of each task: task name -> "<nonce>:<instant>"; a minute
//
// Task names travel as keys and arguments, never in script text. Each
// operation is one round trip (recording a run pushes and trims the list in
// one script). Record and TakeRequest send a nonce made for the call, so
// that a call go-redis retries after its first attempt ran (the reply was
// lost) answers what that attempt did: the run is recorded once, and the
// request taken is the caller's.
type Store struct {
	client   redis.Cmdable
	ns       string
	history  int
	requests string
	taken    string
	nonce    string        // random prefix of the nonces of this store's calls
	calls    atomic.Uint64 // numbers the calls that carry a nonce
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
	return &Store{client: opts.Client, ns: opts.Namespace, history: n, requests: "ndigo:{" + opts.Namespace + "}:requests",
		taken: "ndigo:{" + opts.Namespace + "}:taken", nonce: strconv.FormatUint(rand.Uint64(), 36) + "."}, nil
}

// callNonce returns a nonce for one call, the same for go-redis's retries
// of it.
func (s *Store) callNonce() string {
	return s.nonce + strconv.FormatUint(s.calls.Add(1), 36)
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

// SetPaused sets task's paused flag.
func (s *Store) SetPaused(ctx context.Context, task string, paused bool) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	var err error
	if paused {
		err = s.client.Set(ctx, s.key(task, "paused"), "1", 0).Err()
	} else {
		err = s.client.Del(ctx, s.key(task, "paused")).Err()
	}
	if err != nil {
		return fail("SetPaused", task, err)
	}
	return nil
}

// Paused reports task's paused flag.
func (s *Store) Paused(ctx context.Context, task string) (bool, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return false, err
	}
	err := s.client.Get(ctx, s.key(task, "paused")).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, fail("Paused", task, err)
}

// RequestRun records a pending run of task, merged into one already
// pending.
func (s *Store) RequestRun(ctx context.Context, task string, at time.Time) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	if err := s.client.HSetNX(ctx, s.requests, task, strconv.FormatInt(at.UnixNano(), 10)).Err(); err != nil {
		return fail("RequestRun", task, err)
	}
	return nil
}

// Requests returns the pending requests.
func (s *Store) Requests(ctx context.Context) (map[string]time.Time, error) {
	if err := taskstate.CheckContext(ctx); err != nil {
		return nil, err
	}
	m, err := s.client.HGetAll(ctx, s.requests).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: Requests in namespace %q: %w", ErrRedis, s.ns, err)
	}
	out := make(map[string]time.Time, len(m))
	for task, v := range m {
		out[task] = unixNano(v)
	}
	return out, nil
}

// TakeRequest removes task's pending request.
func (s *Store) TakeRequest(ctx context.Context, task string) (time.Time, bool, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return time.Time{}, false, err
	}
	v, err := takeScript.Run(ctx, s.client, []string{s.requests, s.taken}, task, s.callNonce(), takenTTL.Milliseconds()).Text()
	switch {
	case err == nil:
		return unixNano(v), true, nil
	case errors.Is(err, redis.Nil):
		return time.Time{}, false, nil
	}
	return time.Time{}, false, fail("TakeRequest", task, err)
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

// Record adds r to task's runs.
func (s *Store) Record(ctx context.Context, task string, r taskstate.Run) error {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("redislocks: Record of task %q: %w", task, err)
	}
	err = recordScript.Run(ctx, s.client, []string{s.key(task, "runs"), s.key(task, "recorded")}, b, s.history,
		historyTTL.Milliseconds(), s.callNonce()).Err()
	if err != nil {
		return fail("Record", task, err)
	}
	return nil
}

// Runs returns task's runs, newest first. A run that does not decode
// (written by another version) is left out.
func (s *Store) Runs(ctx context.Context, task string) ([]taskstate.Run, error) {
	if err := taskstate.CheckTask(ctx, task); err != nil {
		return nil, err
	}
	vs, err := s.client.LRange(ctx, s.key(task, "runs"), 0, int64(s.history-1)).Result()
	if err != nil {
		return nil, fail("Runs", task, err)
	}
	out := make([]taskstate.Run, 0, len(vs))
	for _, v := range vs {
		var r taskstate.Run
		if json.Unmarshal([]byte(v), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}
