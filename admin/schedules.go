package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// ScheduleJSON is one stored schedule in GET /schedules, and the body of a
// successful POST /schedules or PUT /schedules/{name}: a task declared at
// runtime, which every node with its handler runs (see
// scheduling.Scheduler.CreateSchedule). Every field is always present.
type ScheduleJSON struct {
	Name    string            `json:"name"`
	Handler string            `json:"handler"` // the handler that runs it, registered in code by name
	Cron    string            `json:"cron"`
	Lock    string            `json:"lock"`    // "" if unlocked
	Options map[string]string `json:"options"` // its other options, by the Scheduled tag's keys; {} if none
	Args    json.RawMessage   `json:"args"`    // the JSON value handed to each run; null if none
	Node    string            `json:"node"`    // the node that created or last updated it
	Updated time.Time         `json:"updated"` // when
	// From is when this spec came, or comes, in force on every node: an
	// update's is two of the updating node's polls after it, the replaced
	// spec running the fires before (taskstate.Schedule.From); the zero
	// time for a schedule stored without it.
	From time.Time `json:"from"`
	// Problem is why the node answering does not run it: its handler is not
	// registered there (a rolling deploy), its name is a task's declared in
	// code there, or it breaks a rule there; "" when it runs it.
	Problem string `json:"problem"`
}

// SchedulesJSON is the body of GET /schedules.
type SchedulesJSON struct {
	Node      string         `json:"node"`      // the node answering
	Schedules []ScheduleJSON `json:"schedules"` // ordered by name
}

// ScheduleRequestJSON is the body of POST /schedules and PUT
// /schedules/{name}. Fields it does not name are refused. Name may be left
// out of a PUT, whose path names the schedule; if given, it must be the
// path's. A PUT replaces the whole schedule: a field left out is dropped
// (no lock: every node runs each fire). ndigo schedule update reads the
// schedule first and sends it whole with its flags' changes, so that what
// they do not name is kept.
type ScheduleRequestJSON struct {
	Name    string            `json:"name"`
	Handler string            `json:"handler"`
	Cron    string            `json:"cron"`
	Lock    string            `json:"lock,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
}

// scheduleShape is the body that POST /schedules takes, for its errors.
const scheduleShape = `{"name": string, "handler": string, "cron": string, "lock": string, "options": {key: string}, "args": JSON}`

// maxScheduleBody bounds the body of POST /schedules and PUT: a stored
// schedule's largest encoding.
const maxScheduleBody = taskstate.MaxScheduleLen

func scheduleJSON(i scheduling.ScheduleInfo) ScheduleJSON {
	j := ScheduleJSON{Name: i.Name, Handler: i.Handler, Cron: i.Cron, Lock: i.Lock, Options: i.Options, Args: i.Args,
		Node: i.Node, Updated: i.Updated.UTC(), From: i.From.UTC(), Problem: i.Problem}
	if j.Options == nil {
		j.Options = map[string]string{}
	}
	if len(j.Args) == 0 {
		j.Args = json.RawMessage("null")
	}
	return j
}

// schedules serves GET /schedules.
func (h *Handler) schedules(w http.ResponseWriter, r *http.Request) {
	infos, err := h.s.Schedules(r.Context())
	if err != nil {
		writeError(w, scheduleErrorCode(err), err.Error())
		return
	}
	out := SchedulesJSON{Node: h.s.Node(), Schedules: make([]ScheduleJSON, len(infos))}
	for i, info := range infos {
		out.Schedules[i] = scheduleJSON(info)
	}
	writeJSON(w, http.StatusOK, out)
}

// createSchedule serves POST /schedules.
func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request) {
	actor := h.authorized(w, r, "", "create-schedule")
	if actor == "" {
		return
	}
	sc, err := scheduleRequest(w, r, "")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.putSchedule(w, r, sc, "create-schedule", actor)
}

// scheduleByName serves PUT and DELETE /schedules/{name}.
func (h *Handler) scheduleByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch r.Method {
	case http.MethodPut:
		actor := h.authorized(w, r, name, "update-schedule")
		if actor == "" {
			return
		}
		sc, err := scheduleRequest(w, r, name)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h.putSchedule(w, r, sc, "update-schedule", actor)
	case http.MethodDelete:
		actor := h.authorized(w, r, name, "delete-schedule")
		if actor == "" {
			return
		}
		if err := h.s.DeleteSchedule(r.Context(), name, controlOptions(r, actor)...); err != nil {
			h.log.Warn("admin: task control failed", "task", name, "action", "delete-schedule", "actor", actor, "remote", r.RemoteAddr, "err", err)
			writeError(w, scheduleErrorCode(err), err.Error())
			return
		}
		h.log.Info("admin: task control", "task", name, "action", "delete-schedule", "actor", actor, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, ActionJSON{Task: name, Action: "delete-schedule", Status: "deleted"})
	default:
		w.Header().Set("Allow", "PUT, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+": use PUT to update the schedule, DELETE to delete it")
	}
}

// putSchedule creates or updates sc (action create-schedule or
// update-schedule) for actor, answering with the schedule as stored.
func (h *Handler) putSchedule(w http.ResponseWriter, r *http.Request, sc taskstate.Schedule, action, actor string) {
	ctx := r.Context()
	var err error
	code := http.StatusCreated
	if action == "create-schedule" {
		err = h.s.CreateSchedule(ctx, sc, controlOptions(r, actor)...)
	} else {
		err, code = h.s.UpdateSchedule(ctx, sc, controlOptions(r, actor)...), http.StatusOK
	}
	if err != nil {
		h.log.Warn("admin: task control failed", "task", sc.Name, "action", action, "actor", actor, "remote", r.RemoteAddr, "err", err)
		writeError(w, scheduleErrorCode(err), err.Error())
		return
	}
	h.log.Info("admin: task control", "task", sc.Name, "action", action, "actor", actor, "remote", r.RemoteAddr, "handler", sc.Handler, "cron", sc.Cron)
	infos, err := h.s.Schedules(ctx)
	if err != nil {
		writeError(w, scheduleErrorCode(err), err.Error())
		return
	}
	for _, i := range infos {
		if i.Name == sc.Name {
			writeJSON(w, code, scheduleJSON(i))
			return
		}
	}
	writeError(w, http.StatusConflict, fmt.Sprintf("schedule %q was stored, then deleted by another call before it could be read back", sc.Name))
}

// scheduleRequest decodes r's body, a ScheduleRequestJSON, for the schedule
// named path ("" for POST), or returns an error that names the field, the
// value and the rule.
func scheduleRequest(w http.ResponseWriter, r *http.Request, path string) (taskstate.Schedule, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxScheduleBody))
	dec.DisallowUnknownFields()
	var req ScheduleRequestJSON
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return taskstate.Schedule{}, fmt.Errorf("body: empty; want the JSON object %s", scheduleShape)
		}
		return taskstate.Schedule{}, fmt.Errorf("body: not the JSON object %s: %v", scheduleShape, err)
	}
	if dec.More() {
		return taskstate.Schedule{}, fmt.Errorf("body: more than one JSON value; want the one object %s", scheduleShape)
	}
	switch {
	case path != "" && req.Name == "":
		req.Name = path
	case path != "" && req.Name != path:
		return taskstate.Schedule{}, fmt.Errorf("body: \"name\" %q is not the path's %q: a schedule is renamed by creating the new one and deleting the old", req.Name, path)
	}
	return taskstate.Schedule{Name: req.Name, Handler: req.Handler, Cron: req.Cron, Lock: req.Lock, Options: req.Options, Args: req.Args}, nil
}

// scheduleErrorCode maps a stored schedule's error to its status: 400 for
// a schedule that fails validation or names a handler or a calendar the
// node lacks, 404 for an unknown schedule, 409 for a name already stored or a task's
// declared in code; else as errorCode.
func scheduleErrorCode(err error) int {
	switch {
	case errors.Is(err, scheduling.ErrInvalidSpec), errors.Is(err, scheduling.ErrUnknownHandler), errors.Is(err, scheduling.ErrUnknownCalendar):
		return http.StatusBadRequest
	case errors.Is(err, scheduling.ErrUnknownSchedule):
		return http.StatusNotFound
	case errors.Is(err, taskstate.ErrScheduleExists), errors.Is(err, scheduling.ErrDeclaredInCode):
		return http.StatusConflict
	}
	return errorCode(err)
}
