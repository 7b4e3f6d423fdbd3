package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ndigo/ndigo/internal/redact"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// A Token is the bearer token that the control endpoints (run, pause,
// resume, backfill, cancel-backfill) require. It never shows its value
// when printed, logged or marshaled, so that a Config or Options can be.
type Token string

// tokenSpace is the whitespace a token's ends lose (Options.Token): what a
// file's final newline, CRLF included, or a pasted token's edges carry.
// cmd/ndigo and console.html trim the same bytes.
const tokenSpace = " \t\r\n\v\f"

// trimmed returns t without leading and trailing tokenSpace.
func (t Token) trimmed() Token { return Token(strings.Trim(string(t), tokenSpace)) }

// String returns "[REDACTED]", or "" for no token.
func (t Token) String() string {
	if t == "" {
		return ""
	}
	return redact.Mark
}

// GoString redacts the %#v form too.
func (t Token) GoString() string { return `"` + t.String() + `"` }

// LogValue redacts the token in slog records.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalText redacts the token in JSON and YAML.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// RunJSON is one run of a task on any node, in GET
// /scheduledtasks/{name}/runs and as a task's clusterLastRun.
type RunJSON struct {
	Fire            time.Time  `json:"fire"`     // the scheduled instant; for a manual run, when it was requested
	Manual          bool       `json:"manual"`   // an operator asked for it (POST .../run)
	Backfill        bool       `json:"backfill"` // a run of a backfill (POST .../backfill); fire is the instant it ran for
	Node            string     `json:"node"`
	Attempt         int        `json:"attempt"` // the attempt at the fire: 1 for its first run (a fire that waited for the run before it too), k+1 for its k-th retry (scheduling.Retry)
	Token           uint64     `json:"token"`   // the lease's fencing token; 0 if unlocked
	Start           *time.Time `json:"start"`   // null for a fire that did not run
	Duration        string     `json:"duration"`
	DurationSeconds float64    `json:"durationSeconds"`
	Outcome         string     `json:"outcome"` // ok, error, panic, cancelled (also superseded by a later fire); buffered, skipped: one waiting, skipped: paused, skipped: missed, skipped: retrying, excluded (error "calendar NAME"), failed: lock, taken (Start null)
	Error           string     `json:"error,omitempty"`
}

func runJSON(r taskstate.Run) RunJSON {
	// The history keeps 0 for a fire's first run, and 1 for the run of a
	// fire that waited for the run before it (taken from the store's
	// pending runs, as a retry is): a first run all the same.
	j := RunJSON{Fire: r.Fire.UTC(), Manual: r.Manual, Backfill: r.Backfill, Node: r.Node, Attempt: max(r.Attempt, 1), Token: r.Token,
		Duration: r.Duration.String(), DurationSeconds: r.Duration.Seconds(), Outcome: r.Outcome, Error: r.Error}
	if !r.Start.IsZero() {
		j.Start = utc(r.Start)
	}
	return j
}

// AuditJSON is the body of GET /scheduledtasks/{name}/audit: what became of
// each instant of the task's schedule over the history's span (see
// scheduling.Scheduler.Audit).
type AuditJSON struct {
	Task string `json:"task"`
	// From and To bound the instants audited; From is null when none
	// could be yet. Later instants are pending.
	From *time.Time `json:"from"`
	To   time.Time  `json:"to"`
	// The instants of each status in [From, To].
	Ran     int `json:"ran"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	Missed  int `json:"missed"`
	// Excluded counts the instants that the task's calendars excluded: no
	// node runs them, and none is missed.
	Excluded   int        `json:"excluded"`
	LastMissed *time.Time `json:"lastMissed"` // null if none
	// Fires are the instants, newest first, at most
	// scheduling.MaxAuditFires.
	Fires []AuditFireJSON `json:"fires"`
	// Note says why the audit judges fewer instants than it should and
	// what setting would let it (scheduling.Audit.Note); omitted if none.
	Note string `json:"note,omitempty"`
}

// AuditFireJSON is one instant of an audit.
type AuditFireJSON struct {
	Fire    time.Time `json:"fire"`
	Status  string    `json:"status"`            // ran, skipped, failed, missed, excluded, pending
	Outcome string    `json:"outcome,omitempty"` // the record's, or "skipped: lock held" / "skipped: still running"; "excluded" for an excluded instant
	Node    string    `json:"node,omitempty"`
	Detail  string    `json:"detail,omitempty"` // the error, the run that held the lock, or "calendar NAME" for an excluded instant
}

func auditJSON(a scheduling.Audit) AuditJSON {
	j := AuditJSON{Task: a.Task, To: a.To.UTC(), Ran: a.Ran, Skipped: a.Skipped, Failed: a.Failed, Missed: a.Missed, Excluded: a.Excluded,
		Fires: make([]AuditFireJSON, len(a.Fires)), Note: a.Note}
	if !a.From.IsZero() {
		j.From = utc(a.From)
	}
	if !a.LastMissed.IsZero() {
		j.LastMissed = utc(a.LastMissed)
	}
	for i, f := range a.Fires {
		j.Fires[i] = AuditFireJSON{Fire: f.Fire.UTC(), Status: string(f.Status), Outcome: string(f.Outcome), Node: f.Node, Detail: f.Detail}
	}
	return j
}

// RunsJSON is the body of GET /scheduledtasks/{name}/runs.
type RunsJSON struct {
	Task string `json:"task"`
	// Retries is how many times this node retries a failed run of the
	// task (scheduling.Retry): a fire has at most retries+1 attempts. 0 if
	// it does not retry.
	Retries int       `json:"retries"`
	Runs    []RunJSON `json:"runs"` // newest first
}

// ActionJSON is the body of a successful POST /scheduledtasks/{name}/run,
// pause, resume or cancel-backfill, and of DELETE /schedules/{name}.
type ActionJSON struct {
	Task   string `json:"task"`
	Action string `json:"action"`           // run, pause, resume, cancel-backfill, delete-schedule
	Status string `json:"status,omitempty"` // run: "requested"; cancel-backfill: "cancelled"; delete-schedule: "deleted"
	Paused *bool  `json:"paused,omitempty"` // pause, resume: the task's paused flag now
}

// BackfillRequestJSON is the body of POST /scheduledtasks/{name}/backfill.
// Fields it does not name are refused.
type BackfillRequestJSON struct {
	From string `json:"from"` // the range's first instant, RFC 3339; required
	To   string `json:"to"`   // its last, RFC 3339, included; required
	// Force runs the instants that already ran too, which are refused
	// (counted as refused) otherwise.
	Force bool `json:"force,omitempty"`
	// Overlap is how the backfill's instants overlap: "" for the task's
	// own policy, skip, buffer-one (one at a time) or allow (up to the
	// task's maxConcurrent at once); cancel-previous is refused.
	Overlap string `json:"overlap,omitempty"`
}

// BackfillJSON is a backfill in the API: the body of a successful POST
// /scheduledtasks/{name}/backfill, and a task's "backfill" in GET
// /scheduledtasks. It is the JSON of taskstate.Backfill, its times in UTC:
// id, task, from, to, force (absent if false), overlap (absent for the
// task's own), total (the instants of the range), cursor (the last
// instant taken or refused; absent before the first), taken, refused (as
// already run), state (running, done, cancelled), node (the one that
// started it), created. Its progress is (taken+refused)/total.
type BackfillJSON = taskstate.Backfill

// backfillJSON returns b with its times in UTC.
func backfillJSON(b taskstate.Backfill) *BackfillJSON {
	b.From, b.To, b.Created = b.From.UTC(), b.To.UTC(), b.Created.UTC()
	if !b.Cursor.IsZero() {
		b.Cursor = b.Cursor.UTC()
	}
	return &b
}

// ErrorJSON is the body of every error response.
type ErrorJSON struct {
	Error string `json:"error"`
}

// noToken is the 403 message of a mutation when no token is configured.
//
// It names the node's own setting: the CLI's NDIGO_ADMIN_TOKEN is a client's
// variable, which configures no node.
const noToken = "task control is off: this node has no admin token; set admin.token or admin.tokens in its configuration " +
	"(or admin.Options.Token or Tokens) and restart it, then send the token as 'Authorization: Bearer <token>'"

// nameParam is the query parameter of /scheduledtasks/{action}?name=NAME.
const nameParam = "name"

// scheduledTaskByPath serves /scheduledtasks/{name}/{action}.
func (h *Handler) scheduledTaskByPath(w http.ResponseWriter, r *http.Request) {
	h.scheduledTask(w, r, r.PathValue("name"), r.PathValue("action"))
}

// scheduledTaskByQuery serves /scheduledtasks/{action}?name=NAME, for the
// names no client can put in a path: "." and "..", which URL resolution
// removes as dot segments before the request leaves (browsers remove
// "%2E" and "%2E%2E" too, by the WHATWG URL standard).
func (h *Handler) scheduledTaskByQuery(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !taskActions[action] {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+noEndpoint)
		return
	}
	names := r.URL.Query()[nameParam]
	if len(names) != 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s?%s=: %d task names in the query, want one "+
			"(this form is for the names . and ..; others can go in the path, /scheduledtasks/{name}/%s)", r.URL.Path, nameParam, len(names), action))
		return
	}
	h.scheduledTask(w, r, names[0], action)
}

// taskActions are the {action} values of a task's endpoints.
var taskActions = map[string]bool{"runs": true, "audit": true, "health": true, "next": true, "run": true, "pause": true, "resume": true,
	"backfill": true, "cancel-backfill": true}

// noEndpoint is the 404 message of a task path with an unknown action.
const noEndpoint = "; a task has runs, audit, health and next (GET), run, pause, resume, backfill and cancel-backfill (POST)"

// scheduledTask serves a task's endpoints: runs, audit, health and next (GET), and run,
// pause, resume, backfill and cancel-backfill (POST, with the bearer
// token).
func (h *Handler) scheduledTask(w http.ResponseWriter, r *http.Request, name, action string) {
	switch action {
	case "runs":
		if !allow(w, r, http.MethodGet) {
			return
		}
		runs, err := h.s.History(r.Context(), name)
		if err != nil {
			writeError(w, errorCode(err), err.Error())
			return
		}
		out := RunsJSON{Task: name, Retries: h.retries(name), Runs: make([]RunJSON, len(runs))}
		for i, run := range runs {
			out.Runs[i] = runJSON(run)
		}
		writeJSON(w, http.StatusOK, out)
	case "audit":
		if !allow(w, r, http.MethodGet) {
			return
		}
		a, err := h.s.Audit(r.Context(), name)
		if err != nil {
			writeError(w, errorCode(err), err.Error())
			return
		}
		writeJSON(w, http.StatusOK, auditJSON(a))
	case "health":
		if !allow(w, r, http.MethodGet) {
			return
		}
		th, err := h.s.Health(r.Context(), name)
		if err != nil {
			writeError(w, errorCode(err), err.Error())
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Task string `json:"task"`
			TaskHealthJSON
		}{name, taskHealthJSON(th)})
	case "next":
		if allow(w, r, http.MethodGet) {
			h.nextFires(w, r, name)
		}
	case "run", "pause", "resume", "cancel-backfill", "backfill":
		if !allow(w, r, http.MethodPost) {
			return
		}
		actor := h.authorized(w, r, name, action)
		switch {
		case actor == "":
		case action == "backfill":
			h.backfill(w, r, name, actor)
		default:
			h.mutate(w, r, name, action, actor)
		}
	default:
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+noEndpoint)
	}
}

// retries returns the Retry count of the task named name on this node, 0
// if it does not retry (or is gone).
func (h *Handler) retries(name string) int {
	for _, ti := range h.s.Tasks() {
		if ti.Name == name {
			return ti.Spec.Retries
		}
	}
	return 0
}

// mutate performs an action authorized for actor and logs it.
func (h *Handler) mutate(w http.ResponseWriter, r *http.Request, name, action, actor string) {
	ctx := r.Context()
	var err error
	switch action {
	case "run":
		err = h.s.RunNow(ctx, name, controlOptions(r, actor)...)
	case "pause", "resume":
		var opts []scheduling.ControlOption
		if opts, err = pauseRequest(r, actor); err != nil {
			break
		}
		if action == "pause" {
			err = h.s.Pause(ctx, name, opts...)
		} else {
			err = h.s.Resume(ctx, name, opts...)
		}
	case "cancel-backfill":
		err = h.s.CancelBackfill(ctx, name, controlOptions(r, actor)...)
	}
	if err != nil {
		h.log.Warn("admin: task control failed", "task", name, "action", action, "actor", actor, "remote", r.RemoteAddr, "err", err)
		writeError(w, errorCode(err), err.Error())
		return
	}
	h.log.Info("admin: task control", "task", name, "action", action, "actor", actor, "remote", r.RemoteAddr)
	out := ActionJSON{Task: name, Action: action}
	code := http.StatusOK
	switch action {
	case "run":
		out.Status, code = "requested", http.StatusAccepted
	case "cancel-backfill":
		out.Status = "cancelled"
	default:
		paused := action == "pause"
		out.Paused = &paused
	}
	writeJSON(w, code, out)
}

// PauseRequestJSON is the body that POST .../pause and .../resume may
// take: why, and who. Fields it does not name are refused; no body is a
// pause or resume without a note. The pause's "by" is the actor, the name
// of the token's holder ("admin" for admin.token), which By follows as
// what the client says of itself: "ops: ndigo CLI (alice)".
type PauseRequestJSON struct {
	Note string `json:"note"` // at most taskstate.MaxNoteLen bytes of printable text, line breaks allowed
	By   string `json:"by"`   // what the client says of who: the CLI sends "ndigo CLI (USER)"
}

// pauseRequest reads the optional body of a pause or resume by actor.
func pauseRequest(r *http.Request, actor string) ([]scheduling.ControlOption, error) {
	var req PauseRequestJSON
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPauseBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: reading the body: %v", taskstate.ErrInvalid, err)
	case len(body) > maxPauseBody:
		return nil, fmt.Errorf("%w: the body is over %d bytes: want {\"note\": string, \"by\": string}", taskstate.ErrInvalid, maxPauseBody)
	case len(bytes.TrimSpace(body)) > 0:
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, fmt.Errorf("%w: the body must be {\"note\": string, \"by\": string}: %v", taskstate.ErrInvalid, err)
		}
	}
	opts := controlOptions(r, actor)
	if req.By != "" {
		opts = append(opts, scheduling.By(actor+": "+req.By))
	}
	return append(opts, scheduling.WithNote(req.Note)), nil
}

// maxPauseBody bounds the body of a pause or resume: a note and a name.
const maxPauseBody = 8 << 10

// maxBackfillBody bounds the body of POST .../backfill: a few short
// fields.
const maxBackfillBody = 4 << 10

// backfillShape is the body a POST .../backfill takes, for its errors.
const backfillShape = `{"from": RFC 3339, "to": RFC 3339, "force": bool, "overlap": string}`

// backfill starts a backfill of the task named name, authorized for
// actor, from the request's body, and logs it.
func (h *Handler) backfill(w http.ResponseWriter, r *http.Request, name, actor string) {
	from, to, opts, err := backfillRequest(w, r)
	if err != nil {
		h.log.Warn("admin: task control refused: bad backfill request", "task", name, "action", "backfill", "actor", actor, "remote", r.RemoteAddr, "err", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, err := h.s.Backfill(r.Context(), name, from, to, opts, controlOptions(r, actor)...)
	if err != nil {
		h.log.Warn("admin: task control failed", "task", name, "action", "backfill", "actor", actor, "remote", r.RemoteAddr, "err", err)
		writeError(w, errorCode(err), err.Error())
		return
	}
	h.log.Info("admin: task control", "task", name, "action", "backfill", "actor", actor, "remote", r.RemoteAddr, "backfill", b.ID,
		"from", b.From, "to", b.To, "instants", b.Total, "force", b.Force, "overlap", b.Overlap)
	writeJSON(w, http.StatusAccepted, backfillJSON(b))
}

// backfillRequest decodes r's body, a BackfillRequestJSON, or returns an
// error that names the field, the value and the rule.
func backfillRequest(w http.ResponseWriter, r *http.Request) (from, to time.Time, opts scheduling.BackfillOptions, err error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBackfillBody))
	dec.DisallowUnknownFields()
	var req BackfillRequestJSON
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return from, to, opts, fmt.Errorf("body: empty; want the JSON object %s", backfillShape)
		}
		return from, to, opts, fmt.Errorf("body: not the JSON object %s: %v", backfillShape, err)
	}
	if dec.More() {
		return from, to, opts, fmt.Errorf("body: more than one JSON value; want the one object %s", backfillShape)
	}
	if from, err = backfillTime("from", "the range's first instant", req.From); err != nil {
		return from, to, opts, err
	}
	if to, err = backfillTime("to", "the range's last instant, included", req.To); err != nil {
		return from, to, opts, err
	}
	return from, to, scheduling.BackfillOptions{Overlap: req.Overlap, Force: req.Force}, nil
}

// backfillTime parses the RFC 3339 value v of the body's field.
func backfillTime(field, what, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("body: %q is missing: want %s, RFC 3339 such as 2026-01-01T00:00:00Z", field, what)
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("body: %q %q: must be an RFC 3339 time such as 2026-01-01T00:00:00Z (%s)", field, v, what)
	}
	return t, nil
}

// authorized checks the request's bearer token against the configured
// ones, each in constant time, and returns the actor, the name of its
// holder; it answers 403 when none is configured and 401 when the
// request's is missing or wrong, and returns "". Refusals are logged,
// without the token.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request, name, action string) string {
	if len(h.tokens) == 0 {
		h.log.Warn("admin: task control refused: no token configured", "task", name, "action", action, "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, noToken)
		return ""
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	who := actor(h.tokens, got)
	if !ok || who == "" {
		h.log.Warn("admin: task control refused: missing or wrong bearer token", "task", name, "action", action, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="ndigo"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token: send 'Authorization: Bearer <token>' with admin.token or a token of admin.tokens")
		return ""
	}
	return who
}

// allow answers 405 with the Allow header unless r's method is method.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+": use "+method)
	return false
}

// errorCode maps a scheduler error to its status: 404 for an unknown task,
// 400 for a backfill it cannot run (its range or overlap), 409 for a
// backfill while one is running or a cancel with none running, 501
// without a task state store, 503 when the store failed.
func errorCode(err error) int {
	switch {
	case errors.Is(err, scheduling.ErrUnknownTask):
		return http.StatusNotFound
	case errors.Is(err, scheduling.ErrInvalidBackfill), errors.Is(err, taskstate.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, taskstate.ErrBackfillRunning), errors.Is(err, scheduling.ErrNoBackfill):
		return http.StatusConflict
	case errors.Is(err, scheduling.ErrNoState):
		return http.StatusNotImplemented
	}
	return http.StatusServiceUnavailable
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorJSON{Error: msg})
}
