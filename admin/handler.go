package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// ErrInvalid reports a bad [Options] value; the wrapping error names the
// field, the value and the rule.
var ErrInvalid = errors.New("admin: invalid options")

// Options configures a [Handler].
type Options struct {
	// Scheduler is the scheduler whose tasks and leases are shown. Required.
	Scheduler *scheduling.Scheduler
	// Checks are the dependencies /healthz probes, in this order.
	Checks []Check
	// CheckTimeout bounds each check; zero means DefaultCheckTimeout.
	CheckTimeout time.Duration
	// StateTimeout bounds each request's calls of the shared task state
	// (and of the scheduler's driver); zero means DefaultStateTimeout. A
	// store that does not answer (a hung server: etcd stopped, a network
	// that drops packets) then costs an operator that long: the task list
	// answers with this node's view and says why (stateError), the other
	// endpoints with an error, none hangs.
	StateTimeout time.Duration
	// Routes are extra endpoints served beside the built-in ones, such as
	// /metrics.
	Routes []Route
	// Token is the bearer token that POST /scheduledtasks/{name}/run, pause,
	// resume, backfill and cancel-backfill require, compared in constant
	// time; without one they are refused with 403. Leading and trailing
	// whitespace (spaces, tabs, CR, LF, such as a secret file's final
	// newline) is ignored, with a warning on Logger: no client can send it
	// in a header. The ndigo CLI and the web console trim it from the token
	// they send the same way. A request with it is by [DefaultActor],
	// "admin".
	Token Token
	// Tokens are further bearer tokens of the control endpoints, by the
	// name of their holder (a person, a team, a CI job): a request with one
	// is by that name, which its log line, a pause's "by" and the task
	// list show. Names follow [CheckTokenName]; each token must be its
	// own (two holders with one token could not be told apart), and
	// whitespace at its ends is ignored as Token's is.
	Tokens map[string]Token
	// Logger receives one line per control request, with the task, the
	// action and the remote address (never the token); nil means
	// slog.Default().
	Logger *slog.Logger
}

// A Route is an extra endpoint of a [Handler].
type Route struct {
	// Pattern is an http.ServeMux pattern, e.g. "GET /metrics".
	Pattern string
	Handler http.Handler
}

// A Handler serves the introspection and control endpoints:
//
//	GET  /scheduledtasks                         the node, its driver and zone; every task: spec, next fire, last fires here and in the cluster, paused, last backfill
//	GET  /scheduledtasks/{name}/runs             the task's last recorded fires on any node, newest first
//	GET  /scheduledtasks/{name}/audit            each instant of its schedule: ran, skipped, failed, missed, excluded, pending
//	GET  /scheduledtasks/{name}/next?n=10        its next n instants (1 to scheduling.MaxNextFires, 10 without n): start, skip, dst
//	POST /scheduledtasks/{name}/run              one run of the task in the cluster, as soon as a node can (202)
//	POST /scheduledtasks/{name}/pause            pause the task on every node
//	POST /scheduledtasks/{name}/resume           resume it
//	POST /scheduledtasks/{name}/backfill         run the task once for each instant of its schedule in a range, cluster-wide (202, the backfill)
//	POST /scheduledtasks/{name}/cancel-backfill  cancel its running backfill
//	     /scheduledtasks/{action}?name=N         the same eight, with the name in the query (for "." and "..")
//	GET  /events?after=SEQ&limit=N               the trail of control actions after SEQ, oldest first: who, what, when, before and after
//	GET  /schedules                              the stored schedules (tasks declared at runtime)
//	POST /schedules                              store one (201); PUT and DELETE /schedules/{name} replace and delete it
//	GET  /calendars                              the calendars: named exclusions that tasks name (the option calendar)
//	POST /calendars                              define one (201); GET, PUT and DELETE /calendars/{name} read, replace and delete it
//	GET  /locks                                  the leases this node holds for runs in flight
//	GET  /healthz                                200 if every check passes, 503 naming the failing ones (run at once)
//
// The POST, PUT and DELETE endpoints need the header "Authorization: Bearer <token>" with
// [Options].Token or one of [Options].Tokens (401 without one or with
// another, 403 when no token is configured), and each is logged with its
// actor, the name of the token's holder, and kept in the trail (GET
// /events) under the request's Idempotency-Key header, if it has one
// (a request sent again with it is kept once). Responses are JSON, errors
// {"error": "..."} (404 for an unknown task, 405 with an Allow header for a
// wrong method); timestamps are RFC 3339 in UTC.
//
// POST .../backfill takes the JSON body [BackfillRequestJSON], {"from":
// RFC 3339, "to": RFC 3339, "force": bool, "overlap": string} (from and to
// required, the range inclusive; see scheduling.Scheduler.Backfill), and
// answers 202 with the backfill as started ([BackfillJSON]), which each
// task of GET /scheduledtasks then shows as "backfill", with its progress,
// from the node's next poll of the task state (every second). It answers
// 400 for a body that is not such an object or a range or overlap the task
// cannot take (the message names the field, the value and the rule), and
// 409 while the task's last backfill is still running. POST
// .../cancel-backfill answers 200, or 409 when the task has no backfill
// running (the task exists: it is its state that conflicts, as for a
// second backfill).
//
// Task names go in the path escaped (url.PathEscape), except "." and
// "..", which no client can send as a path segment (URL resolution removes
// them, and browsers their %2E escapes too): those go in the query, as
// /scheduledtasks/runs?name=.. and POST /scheduledtasks/pause?name=.
// (any name may). Mount it on a mux of your own under a prefix with
// http.StripPrefix:
//
//	mux.Handle("/admin/", http.StripPrefix("/admin", h))
type Handler struct {
	s            *scheduling.Scheduler
	checks       []Check
	timeout      time.Duration
	stateTimeout time.Duration // Options.StateTimeout
	mux          *http.ServeMux
	tokens       []actorToken // Options.Token and Tokens; none refuses the control endpoints
	log          *slog.Logger
}

// New returns a Handler for opts.
func New(opts Options) (*Handler, error) {
	if opts.Scheduler == nil {
		return nil, fmt.Errorf("%w: Scheduler is nil: pass the application's *scheduling.Scheduler", ErrInvalid)
	}
	if opts.CheckTimeout < 0 {
		return nil, fmt.Errorf("%w: CheckTimeout %v must not be negative", ErrInvalid, opts.CheckTimeout)
	}
	if opts.StateTimeout < 0 {
		return nil, fmt.Errorf("%w: StateTimeout %v must not be negative", ErrInvalid, opts.StateTimeout)
	}
	seen := map[string]int{}
	for i, c := range opts.Checks {
		if c.Name == "" || c.Check == nil {
			return nil, fmt.Errorf("%w: Checks[%d] (name %q): needs a name and a Check func", ErrInvalid, i, c.Name)
		}
		// Names key /healthz's answer: a second check of a name would hide
		// the first's failure.
		if j, dup := seen[c.Name]; dup {
			return nil, fmt.Errorf("%w: Checks[%d] (name %q): the name of Checks[%d] too; each check needs its own", ErrInvalid, i, c.Name, j)
		}
		seen[c.Name] = i
	}
	h := &Handler{s: opts.Scheduler, checks: opts.Checks, timeout: opts.CheckTimeout, stateTimeout: opts.StateTimeout,
		mux: http.NewServeMux(), log: opts.Logger}
	if h.timeout == 0 {
		h.timeout = DefaultCheckTimeout
	}
	if h.stateTimeout == 0 {
		h.stateTimeout = DefaultStateTimeout
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	token := opts.Token.trimmed()
	switch {
	case token == opts.Token:
	case token == "":
		h.log.Warn("admin: the admin token (admin.token, or admin.Options.Token) is only whitespace: "+
			"task control is off, as with no token", "setting", "admin.token")
	default:
		h.log.Warn("admin: the admin token (admin.token, or admin.Options.Token) has leading or trailing whitespace, "+
			"such as a secret file's final newline, which no client can send: it is ignored, and clients send the token without it",
			"setting", "admin.token", "trimmed_bytes", len(opts.Token)-len(token))
	}
	tokens, err := actorTokens(opts, h.log)
	if err != nil {
		return nil, err
	}
	h.tokens = tokens
	h.mux.HandleFunc("/scheduledtasks", func(w http.ResponseWriter, r *http.Request) {
		if allow(w, r, http.MethodGet) {
			h.tasks(w, r)
		}
	})
	h.mux.HandleFunc("/scheduledtasks/{name}/{action}", h.scheduledTaskByPath)
	h.mux.HandleFunc("/scheduledtasks/{action}", h.scheduledTaskByQuery)
	h.mux.HandleFunc("GET /events", h.events)
	h.mux.HandleFunc("GET /schedules", h.schedules)
	h.mux.HandleFunc("POST /schedules", h.createSchedule)
	h.mux.HandleFunc("/schedules/{name}", h.scheduleByName)
	h.mux.HandleFunc("GET /calendars", h.calendars)
	h.mux.HandleFunc("POST /calendars", h.createCalendar)
	h.mux.HandleFunc("/calendars/{name}", h.calendarByName)
	h.mux.HandleFunc("GET /locks", h.locks)
	h.mux.HandleFunc("GET /healthz", h.health)
	h.mux.HandleFunc("GET /{$}", h.console)
	for i, r := range opts.Routes {
		if r.Pattern == "" || r.Handler == nil {
			return nil, fmt.Errorf("%w: Routes[%d] (pattern %q): needs a pattern and a handler", ErrInvalid, i, r.Pattern)
		}
		if err := register(h.mux, r); err != nil {
			return nil, fmt.Errorf("%w: Routes[%d]: %v", ErrInvalid, i, err)
		}
	}
	return h, nil
}

// register adds r to mux, turning the mux's panic on a bad or conflicting
// pattern into an error.
func register(mux *http.ServeMux, r Route) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pattern %q: %v", r.Pattern, p)
		}
	}()
	mux.Handle(r.Pattern, r.Handler)
	return nil
}

// DefaultStateTimeout bounds each request's calls of the task state when
// [Options.StateTimeout] is zero: as long as go-redis's default read
// timeouts let a call to a hung Redis take.
const DefaultStateTimeout = 5 * time.Second

// ServeHTTP serves the endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.stateTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// No route: the mux's own 404 or 405 (Allow kept), as JSON.
		w = &jsonError{ResponseWriter: w, method: r.Method, path: r.URL.Path}
	}
	h.mux.ServeHTTP(w, r)
}

// jsonError turns the plain-text error that the mux writes for a request no
// route takes into an ErrorJSON.
type jsonError struct {
	http.ResponseWriter
	method, path string
	wrote        bool
}

func (j *jsonError) WriteHeader(code int) {
	if j.wrote {
		return
	}
	j.wrote = true
	j.Header().Del("X-Content-Type-Options")
	msg := fmt.Sprintf("no route for %s %s", j.method, j.path)
	if code == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("%s is not allowed on %s (allowed: %s)", j.method, j.path, j.Header().Get("Allow"))
	}
	writeError(j.ResponseWriter, code, msg)
}

func (j *jsonError) Write(b []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	return len(b), nil // the mux's text: the JSON is written instead
}

// PauseJSON is a task's last pause or resume.
type PauseJSON struct {
	Paused bool       `json:"paused"`
	Note   string     `json:"note,omitempty"` // why, as given
	By     string     `json:"by,omitempty"`   // who: "scheduler" for pauseAfterFailures, as given otherwise
	At     *time.Time `json:"at"`             // when, on the node's clock; null if not known
}

// TaskJSON is one task in GET /scheduledtasks. Every field is always
// present, "" or null where it does not apply, but owner and backfill,
// which are absent then.
type TaskJSON struct {
	Name            string       `json:"name"`
	Type            string       `json:"type"`   // the controller type; "" for a plain func
	Method          string       `json:"method"` // the method, or the func's name
	Cron            string       `json:"cron"`
	Lock            string       `json:"lock"`       // "" if unlocked
	LockTTL         string       `json:"lockTtl"`    // "" if unlocked
	LockWait        string       `json:"lockWait"`   // "" if it does not wait
	MaxRunTime      string       `json:"maxRunTime"` // "" if none
	Renew           bool         `json:"renew"`
	Retries         int          `json:"retries"`         // how many times a failed run of a fire is retried (scheduling.Retry): at most retries+1 attempts; 0 if none
	RetryBackoff    string       `json:"retryBackoff"`    // the backoff before the first retry, doubled for each next one; "" if it does not retry
	RetryMaxBackoff string       `json:"retryMaxBackoff"` // the cap of the doubling backoff; "" if it does not retry
	Overlap         string       `json:"overlap"`         // what a fire does when a run of the task is going (scheduling.Overlap): skip (the default), buffer-one, cancel-previous, allow
	MaxConcurrent   int          `json:"maxConcurrent"`   // with overlap allow, how many runs may go at once in the cluster; 0 otherwise
	Next            *time.Time   `json:"next"`            // null when the schedule has no further fire
	RetryAt         *time.Time   `json:"retryAt"`         // when the task's pending retry (attempt 2 or later) is due, as this node knows it (its last poll, or its own failed run since); null if none
	WaitingFire     *time.Time   `json:"waitingFire"`     // the instant of the fire that waits for the run going (overlap buffer-one, cancel-previous: the pending run of attempt 1), as this node knows it; it runs once that run ends; null if none
	Running         bool         `json:"running"`         // a fire is in flight on this node: running or waiting for its lock
	Waiting         bool         `json:"waiting"`         // that fire waits for its lock
	Owner           string       `json:"owner,omitempty"` // the node this one takes to own the task (spreading); absent otherwise
	Handler         string       `json:"handler"`         // the handler of the stored schedule the task runs (POST /schedules); "" for a task declared in code
	Runs            uint64       `json:"runs"`
	Skips           uint64       `json:"skips"`
	Failures        uint64       `json:"failures"`
	LastFire        *LastRunJSON `json:"lastFire"` // the last fire, run or skipped; null before the first
	LastRun         *LastRunJSON `json:"lastRun"`  // the last fire that ran; null before the first run
	Paused          bool         `json:"paused"`   // paused cluster-wide
	// PauseNote is the task's last pause or resume, with its note and who
	// made it (POST .../pause with {"note": ...}); null if it was never
	// paused, or without the shared state.
	PauseNote *PauseJSON `json:"pauseNote"`
	// Completed: the task fires no more, being past its endAt, its one-off
	// instant (@at) or its maxRuns; next is then null. A state, not an
	// error: it stays listed with its history.
	Completed          bool   `json:"completed"`
	Calendar           string `json:"calendar"`           // the calendars whose exclusions its fires skip, comma-separated as written; "" if none
	StartAt            string `json:"startAt"`            // its first fire's bound, as written; "" if none
	EndAt              string `json:"endAt"`              // the bound it fires before, as written; "" if none
	MaxRuns            int    `json:"maxRuns"`            // the runs it makes in the cluster; 0 for no bound
	PauseAfterFailures int    `json:"pauseAfterFailures"` // the failed fires in a row that pause it; 0 never
	// ClusterLastRun is the newest fire recorded on any node (a run, or a
	// paused, failed or missed fire); null before the first.
	ClusterLastRun *RunJSON `json:"clusterLastRun"`
	// RecentFires are the newest fires recorded on any node, newest first,
	// at most scheduling.RecentFires; [] without the shared state.
	RecentFires []RunJSON `json:"recentFires"`
	// Backfill is the task's last backfill, running, done or cancelled
	// (POST .../backfill), as this node's last poll of the task state read
	// it; absent if it never had one.
	Backfill *BackfillJSON `json:"backfill,omitempty"`
	// Health is the task's health (scheduling.Scheduler.Health): unknown,
	// with the reason, without the shared state.
	Health TaskHealthJSON `json:"health"`
	// The health options as set; "" or 0 for their defaults.
	LateAfter    string `json:"lateAfter,omitempty"`
	DownAfter    string `json:"downAfter,omitempty"`
	FailingAfter int    `json:"failingAfter,omitempty"`
	RunBudget    string `json:"runBudget,omitempty"`
}

// TaskHealthJSON is a task's health: GET /scheduledtasks/{name}/health, and
// each task's in GET /scheduledtasks.
type TaskHealthJSON struct {
	// State is ok, late, failing, overrun, down, paused, completed or
	// unknown (scheduling.Health).
	State  string     `json:"state"`
	Since  *time.Time `json:"since"`  // when the state began; null for ok, completed and unknown
	Reason string     `json:"reason"` // why; "" for ok
}

// taskHealthJSON returns h as JSON.
func taskHealthJSON(h scheduling.TaskHealth) TaskHealthJSON {
	j := TaskHealthJSON{State: string(cmp.Or(h.State, scheduling.HealthUnknown)), Reason: h.Reason}
	if !h.Since.IsZero() {
		j.Since = utc(h.Since)
	}
	return j
}

// durationText is d as JSON's text: "" for zero.
func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// TasksJSON is the body of GET /scheduledtasks.
type TasksJSON struct {
	Node   string     `json:"node"`   // the node answering
	Driver string     `json:"driver"` // its lock driver, as /healthz names it
	Zone   string     `json:"zone"`   // the zone its schedules are evaluated in
	Tasks  []TaskJSON `json:"tasks"`
	// StateError is why the shared state could not be read: paused and
	// the cluster's fires are then this node's view. Absent otherwise.
	StateError string `json:"stateError,omitempty"`
}

// LastRunJSON is one fire of a task on this node.
type LastRunJSON struct {
	Fire            time.Time  `json:"fire"`
	Manual          bool       `json:"manual"`   // an operator asked for it (POST .../run)
	Backfill        bool       `json:"backfill"` // a run of a backfill (POST .../backfill); fire is the instant it ran for
	Start           *time.Time `json:"start"`    // null if it did not run
	Duration        string     `json:"duration"`
	DurationSeconds float64    `json:"durationSeconds"`
	Outcome         string     `json:"outcome"`
	Node            string     `json:"node"`
	Attempt         int        `json:"attempt"` // the attempt at the fire: 1 for its first run (a fire that waited for the run before it too), k+1 for its k-th retry (scheduling.Retry)
	Token           uint64     `json:"token,omitempty"`
	Error           string     `json:"error,omitempty"`
}

// LeaseJSON is one lease in GET /locks.
type LeaseJSON struct {
	Key   string    `json:"key"`
	Token uint64    `json:"token"`
	Task  string    `json:"task"`
	Fire  time.Time `json:"fire"`
	Since time.Time `json:"since"`
}

func (h *Handler) tasks(w http.ResponseWriter, r *http.Request) {
	// Without the shared state (its store unreachable) this node's view is
	// still worth showing, with the reason the cluster's is missing.
	var stateErr string
	infos, err := h.s.ClusterTasks(r.Context())
	if err != nil {
		h.log.Warn("admin: task state unavailable; /scheduledtasks shows this node's view", "err", err)
		infos, stateErr = h.s.Tasks(), "task state unavailable, paused, clusterLastRun and health unknown: "+err.Error()
		for i := range infos {
			infos[i].Health.Reason = "the task state could not be read: " + err.Error()
		}
	}
	out := make([]TaskJSON, len(infos))
	for i, ti := range infos {
		t := TaskJSON{Name: ti.Name, Type: ti.Type, Method: ti.Method, Cron: ti.Spec.Cron, Lock: ti.Spec.Lock,
			Renew: ti.Spec.Renew, Running: ti.Running, Waiting: ti.Waiting, Runs: ti.Runs, Skips: ti.Skips,
			Failures: ti.Failures, LastFire: fireJSON(ti.Last), LastRun: fireJSON(ti.LastRan), Paused: ti.Paused, Owner: ti.Owner,
			Completed: ti.Completed, Calendar: ti.Spec.Calendars, StartAt: ti.Spec.StartAt, EndAt: ti.Spec.EndAt, MaxRuns: ti.Spec.MaxRuns,
			PauseAfterFailures: ti.Spec.PauseAfterFailures, Health: taskHealthJSON(ti.Health), LateAfter: durationText(ti.Spec.LateAfter),
			DownAfter: durationText(ti.Spec.DownAfter), FailingAfter: ti.Spec.FailingAfter, RunBudget: durationText(ti.Spec.RunBudget)}
		if ti.Schedule != nil {
			t.Handler = ti.Schedule.Handler
		}
		if p := ti.PauseNote; p != (taskstate.Pause{}) {
			t.PauseNote = &PauseJSON{Paused: p.Paused, Note: p.Note, By: p.By, At: utc(p.At)}
		}
		if ti.ClusterLast != nil {
			r := runJSON(*ti.ClusterLast)
			t.ClusterLastRun = &r
		}
		if ti.Backfill != nil {
			t.Backfill = backfillJSON(*ti.Backfill)
		}
		t.RecentFires = make([]RunJSON, len(ti.ClusterRecent))
		for j, r := range ti.ClusterRecent {
			t.RecentFires[j] = runJSON(r)
		}
		if ti.Spec.Lock != "" {
			t.LockTTL = ti.Spec.LockTTL.String()
			if ti.Spec.LockWait > 0 {
				t.LockWait = ti.Spec.LockWait.String()
			}
		}
		if ti.Spec.MaxRunTime > 0 {
			t.MaxRunTime = ti.Spec.MaxRunTime.String()
		}
		if ti.Spec.Retries > 0 {
			t.Retries, t.RetryBackoff, t.RetryMaxBackoff = ti.Spec.Retries, ti.Spec.RetryBackoff.String(), ti.Spec.RetryMaxBackoff.String()
		}
		if !ti.Next.IsZero() {
			t.Next = utc(ti.Next)
		}
		t.Overlap, t.MaxConcurrent = cmp.Or(ti.Spec.Overlap, scheduling.OverlapSkip), ti.Spec.MaxConcurrent
		// The pending run is a retry of a failed run (attempt 2 or later),
		// or a fire that waits for the run going (attempt 1): due at once,
		// it runs when the lock is free.
		switch r := ti.Retry; {
		case r == nil:
		case r.Attempt >= 2:
			t.RetryAt = utc(r.Due)
		default:
			t.WaitingFire = utc(r.Fire)
		}
		out[i] = t
	}
	writeJSON(w, http.StatusOK, TasksJSON{Node: h.s.Node(), Driver: h.s.DriverName(), Zone: h.s.Zone(), Tasks: out, StateError: stateErr})
}

// fireJSON returns l as JSON, nil for a zero LastRun.
func fireJSON(l scheduling.LastRun) *LastRunJSON {
	if l.Fire.IsZero() {
		return nil
	}
	j := &LastRunJSON{Fire: l.Fire.UTC(), Manual: l.Manual, Backfill: l.Backfill, Duration: l.Duration.String(),
		DurationSeconds: l.Duration.Seconds(), Outcome: string(l.Outcome), Node: l.Node, Attempt: max(l.Attempt, 1), Token: l.Token}
	if !l.Start.IsZero() {
		j.Start = utc(l.Start)
	}
	if l.Err != nil {
		j.Error = l.Err.Error()
	}
	return j
}

func (h *Handler) locks(w http.ResponseWriter, _ *http.Request) {
	leases := h.s.Leases()
	out := make([]LeaseJSON, len(leases))
	for i, l := range leases {
		out[i] = LeaseJSON{Key: l.Key, Token: l.Token, Task: l.Task, Fire: l.Fire.UTC(), Since: l.Since.UTC()}
	}
	writeJSON(w, http.StatusOK, struct {
		Locks []LeaseJSON `json:"locks"`
	}{out})
}

func utc(t time.Time) *time.Time {
	t = t.UTC()
	return &t
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
