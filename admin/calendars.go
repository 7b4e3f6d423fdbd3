package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// CalendarJSON is one calendar in GET /calendars and GET /calendars/{name},
// and the body of a successful POST /calendars or PUT /calendars/{name}: a
// named set of exclusions that tasks name (the option calendar) to skip the
// fires it excludes, shared by the cluster (see
// scheduling.Scheduler.CreateCalendar). Every field is always present, the
// lists [] when empty.
type CalendarJSON struct {
	Name     string    `json:"name"`
	Dates    []string  `json:"dates"`    // "2026-12-25": that whole day
	Weekdays []string  `json:"weekdays"` // "sat", "sunday": those whole days
	Windows  []string  `json:"windows"`  // daily "22:00-06:00", or dated "2026-12-24T12:00/2026-12-27T00:00"
	Cron     []string  `json:"cron"`     // 5-field expressions: the minutes they match
	Include  []string  `json:"include"`  // the calendars whose exclusions this one adds
	Note     string    `json:"note"`
	Node     string    `json:"node"`    // the node that created or last updated it
	Updated  time.Time `json:"updated"` // when
	// From is when these rules came, or come, in force on every node: an
	// update's is a little after it, the replaced rules judging the fires
	// before; the zero time for a calendar stored without it.
	From time.Time `json:"from"`
	// UsedBy names what names the calendar: "task NAME" (a task of the
	// node answering, or a stored schedule) and "calendar NAME" (one that
	// includes it); [] if nothing does.
	UsedBy []string `json:"usedBy"`
	// Problem is why the node answering cannot apply it (rules of a later
	// version's); "" when it applies it.
	Problem string `json:"problem"`
}

// CalendarsJSON is the body of GET /calendars.
type CalendarsJSON struct {
	Node      string         `json:"node"`      // the node answering
	Calendars []CalendarJSON `json:"calendars"` // ordered by name
}

// CalendarRequestJSON is the body of POST /calendars and PUT
// /calendars/{name}: the fields of a taskstate.Calendar that a client sets
// (the node and the time of the change are the node's). Fields it does not
// name are refused. Name may be left out of a PUT, whose path names the
// calendar; if given, it must be the path's. A PUT replaces the whole
// calendar: a rule or note left out is dropped.
type CalendarRequestJSON struct {
	Name     string   `json:"name"`
	Dates    []string `json:"dates,omitempty"`
	Weekdays []string `json:"weekdays,omitempty"`
	Windows  []string `json:"windows,omitempty"`
	Cron     []string `json:"cron,omitempty"`
	Include  []string `json:"include,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// CalendarActionJSON is the body of a successful DELETE /calendars/{name}.
type CalendarActionJSON struct {
	Calendar string `json:"calendar"`
	Action   string `json:"action"` // delete-calendar
	Status   string `json:"status"` // deleted
}

// calendarShape is the body that POST /calendars takes, for its errors.
const calendarShape = `{"name": string, "dates": [string], "weekdays": [string], "windows": [string], "cron": [string], "include": [string], "note": string}`

// maxCalendarBody bounds the body of POST /calendars and PUT: a calendar's
// rules and note are kept in a stored schedule's arguments.
const maxCalendarBody = taskstate.MaxScheduleLen

// orEmpty returns l, or [] for nil.
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func calendarJSON(i scheduling.CalendarInfo) CalendarJSON {
	return CalendarJSON{Name: i.Name, Dates: orEmpty(i.Dates), Weekdays: orEmpty(i.Weekdays), Windows: orEmpty(i.Windows), Cron: orEmpty(i.Cron),
		Include: orEmpty(i.Include), Note: i.Note, Node: i.Node, Updated: i.Updated.UTC(), From: i.From.UTC(), UsedBy: orEmpty(i.UsedBy),
		Problem: i.Problem}
}

// calendars serves GET /calendars.
func (h *Handler) calendars(w http.ResponseWriter, r *http.Request) {
	infos, err := h.s.Calendars(r.Context())
	if err != nil {
		writeError(w, calendarErrorCode(err), err.Error())
		return
	}
	out := CalendarsJSON{Node: h.s.Node(), Calendars: make([]CalendarJSON, len(infos))}
	for i, info := range infos {
		out.Calendars[i] = calendarJSON(info)
	}
	writeJSON(w, http.StatusOK, out)
}

// createCalendar serves POST /calendars.
func (h *Handler) createCalendar(w http.ResponseWriter, r *http.Request) {
	actor := h.authorized(w, r, "", "create-calendar")
	if actor == "" {
		return
	}
	c, err := calendarRequest(w, r, "")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.putCalendar(w, r, c, "create-calendar", actor)
}

// calendarByName serves GET, PUT and DELETE /calendars/{name}.
func (h *Handler) calendarByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		info, ok, err := h.calendar(r, name)
		switch {
		case err != nil:
			writeError(w, calendarErrorCode(err), err.Error())
		case !ok:
			writeError(w, http.StatusNotFound, fmt.Sprintf("%v: %q (GET /calendars lists them)", scheduling.ErrUnknownCalendar, name))
		default:
			writeJSON(w, http.StatusOK, calendarJSON(info))
		}
	case http.MethodPut:
		actor := h.authorized(w, r, name, "update-calendar")
		if actor == "" {
			return
		}
		c, err := calendarRequest(w, r, name)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h.putCalendar(w, r, c, "update-calendar", actor)
	case http.MethodDelete:
		actor := h.authorized(w, r, name, "delete-calendar")
		if actor == "" {
			return
		}
		if err := h.s.DeleteCalendar(r.Context(), name, controlOptions(r, actor)...); err != nil {
			h.log.Warn("admin: calendar control failed", "calendar", name, "action", "delete-calendar", "actor", actor, "remote", r.RemoteAddr, "err", err)
			writeError(w, calendarErrorCode(err), err.Error())
			return
		}
		h.log.Info("admin: calendar control", "calendar", name, "action", "delete-calendar", "actor", actor, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, CalendarActionJSON{Calendar: name, Action: "delete-calendar", Status: "deleted"})
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+
			": use GET to read the calendar, PUT to update it, DELETE to delete it")
	}
}

// calendar returns the calendar named name as the node answering lists it,
// and whether there is one.
func (h *Handler) calendar(r *http.Request, name string) (scheduling.CalendarInfo, bool, error) {
	infos, err := h.s.Calendars(r.Context())
	if err != nil {
		return scheduling.CalendarInfo{}, false, err
	}
	i := slices.IndexFunc(infos, func(c scheduling.CalendarInfo) bool { return c.Name == name })
	if i < 0 {
		return scheduling.CalendarInfo{}, false, nil
	}
	return infos[i], true, nil
}

// putCalendar creates or updates c (action create-calendar or
// update-calendar) for actor, answering with the calendar as stored.
func (h *Handler) putCalendar(w http.ResponseWriter, r *http.Request, c taskstate.Calendar, action, actor string) {
	ctx := r.Context()
	var err error
	code := http.StatusCreated
	if action == "create-calendar" {
		err = h.s.CreateCalendar(ctx, c, controlOptions(r, actor)...)
	} else {
		err, code = h.s.UpdateCalendar(ctx, c, controlOptions(r, actor)...), http.StatusOK
	}
	if err != nil {
		h.log.Warn("admin: calendar control failed", "calendar", c.Name, "action", action, "actor", actor, "remote", r.RemoteAddr, "err", err)
		status := calendarErrorCode(err)
		if errors.Is(err, scheduling.ErrUnknownCalendar) {
			// The calendar itself is unknown (an update of none): 404. An
			// include that names no calendar is the body's fault: 400.
			status = http.StatusBadRequest
			if _, ok, _ := h.calendar(r, c.Name); !ok && action == "update-calendar" {
				status = http.StatusNotFound
			}
		}
		writeError(w, status, err.Error())
		return
	}
	h.log.Info("admin: calendar control", "calendar", c.Name, "action", action, "actor", actor, "remote", r.RemoteAddr)
	info, ok, err := h.calendar(r, c.Name)
	switch {
	case err != nil:
		writeError(w, calendarErrorCode(err), err.Error())
	case !ok:
		writeError(w, http.StatusConflict, fmt.Sprintf("calendar %q was stored, then deleted by another call before it could be read back", c.Name))
	default:
		writeJSON(w, code, calendarJSON(info))
	}
}

// calendarRequest decodes r's body, a CalendarRequestJSON, for the calendar
// named path ("" for POST), or returns an error that names the field, the
// value and the rule.
func calendarRequest(w http.ResponseWriter, r *http.Request, path string) (taskstate.Calendar, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCalendarBody))
	dec.DisallowUnknownFields()
	var req CalendarRequestJSON
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return taskstate.Calendar{}, fmt.Errorf("body: empty; want the JSON object %s", calendarShape)
		}
		return taskstate.Calendar{}, fmt.Errorf("body: not the JSON object %s: %v", calendarShape, err)
	}
	if dec.More() {
		return taskstate.Calendar{}, fmt.Errorf("body: more than one JSON value; want the one object %s", calendarShape)
	}
	switch {
	case path != "" && req.Name == "":
		req.Name = path
	case path != "" && req.Name != path:
		return taskstate.Calendar{}, fmt.Errorf("body: \"name\" %q is not the path's %q: a calendar is renamed by creating the new one, "+
			"naming it where the old is named, and deleting the old", req.Name, path)
	}
	return taskstate.Calendar{Name: req.Name, CalendarRules: taskstate.CalendarRules{Dates: req.Dates, Weekdays: req.Weekdays,
		Windows: req.Windows, Cron: req.Cron, Include: req.Include}, Note: req.Note}, nil
}

// calendarErrorCode maps a calendar's error to its status: 400 for rules
// that fail validation, 404 for an unknown calendar, 409 for a name
// already defined or a calendar in use; else as errorCode (501 without a
// task state store).
func calendarErrorCode(err error) int {
	switch {
	case errors.Is(err, scheduling.ErrUnknownCalendar):
		return http.StatusNotFound
	case errors.Is(err, scheduling.ErrCalendarExists), errors.Is(err, scheduling.ErrCalendarInUse):
		return http.StatusConflict
	}
	return errorCode(err)
}

// NextFireJSON is one instant of GET /scheduledtasks/{name}/next (see
// scheduling.NextFire).
type NextFireJSON struct {
	Fire  time.Time `json:"fire"`  // the instant: the fire's identity
	Start time.Time `json:"start"` // when it is due to start: fire, shifted by the task's jitter
	// Skip says why no node will run it: "excluded: calendar NAME", or
	// "beyond maxRuns"; "" if one will.
	Skip string `json:"skip"`
	// DST says what a change of the clocks does to it; "" if nothing.
	DST string `json:"dst"`
}

// NextFiresJSON is the body of GET /scheduledtasks/{name}/next.
type NextFiresJSON struct {
	Task string `json:"task"`
	// Fires are the task's next instants after now, oldest first, as many
	// as asked (n) unless its schedule ends sooner (its endAt, a one-off
	// instant): [] for a task that fires no more.
	Fires []NextFireJSON `json:"fires"`
}

// DefaultNextFires is how many instants GET /scheduledtasks/{name}/next
// lists without n.
const DefaultNextFires = 10

// nextParam is the query parameter of GET /scheduledtasks/{name}/next.
const nextParam = "n"

// nextFires serves GET /scheduledtasks/{name}/next?n=N.
func (h *Handler) nextFires(w http.ResponseWriter, r *http.Request, name string) {
	n := DefaultNextFires
	switch vs := r.URL.Query()[nextParam]; len(vs) {
	case 0:
	case 1:
		v, err := strconv.Atoi(vs[0])
		if err != nil || v < 1 || v > scheduling.MaxNextFires {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query: %s %q must be an integer from 1 to %d (scheduling.MaxNextFires), "+
				"the instants to list; %d without it", nextParam, vs[0], scheduling.MaxNextFires, DefaultNextFires))
			return
		}
		n = v
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query: %d values of %s (%q); give one, an integer from 1 to %d",
			len(vs), nextParam, vs, scheduling.MaxNextFires))
		return
	}
	fires, err := h.s.NextFires(name, n)
	if err != nil {
		writeError(w, errorCode(err), err.Error())
		return
	}
	out := NextFiresJSON{Task: name, Fires: make([]NextFireJSON, len(fires))}
	for i, f := range fires {
		out.Fires[i] = NextFireJSON{Fire: f.Fire.UTC(), Start: f.Start.UTC(), Skip: f.Skip, DST: f.DST}
	}
	writeJSON(w, http.StatusOK, out)
}
