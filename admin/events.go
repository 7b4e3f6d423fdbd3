package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ndigo/ndigo/scheduling"
)

// IdempotencyHeader is the request header whose value a control request
// is kept under in the trail (scheduling.WithKey): a client that sends a
// request again after an answer it did not get, with the same value, has
// it kept once. The CLI sends one per command.
const IdempotencyHeader = "Idempotency-Key"

// controlOptions are the trail's options of a control request authorized
// for actor: by actor, under the request's idempotency key if it has one.
func controlOptions(r *http.Request, actor string) []scheduling.ControlOption {
	opts := []scheduling.ControlOption{scheduling.By(actor)}
	if k := r.Header.Get(IdempotencyHeader); k != "" {
		opts = append(opts, scheduling.WithKey(k))
	}
	return opts
}

// EventJSON is one control action in GET /events (taskstate.Event).
type EventJSON struct {
	Seq    int64     `json:"seq"` // its number: increasing in the order the actions were kept
	Key    string    `json:"key"` // its idempotency key
	At     time.Time `json:"at"`
	Node   string    `json:"node"`   // the node that made it
	Actor  string    `json:"actor"`  // who: the token's holder, then what the client said
	Action string    `json:"action"` // pause, resume, run, backfill, cancel-backfill, create-schedule, ...
	Target string    `json:"target"` // the task, schedule or calendar
	Note   string    `json:"note"`
	Before any       `json:"before"` // what it replaced, as JSON; null if nothing
	After  any       `json:"after"`  // what it made; null if nothing
}

// EventsJSON is the body of GET /events.
type EventsJSON struct {
	Node   string      `json:"node"`   // the node answering
	Events []EventJSON `json:"events"` // oldest first
	// Last is the seq of the last event listed, or the after asked for if
	// none: ask again with after=Last for the events kept since.
	Last int64 `json:"last"`
}

// DefaultEvents is how many events GET /events lists without limit.
const DefaultEvents = 100

// events serves GET /events?after=SEQ&limit=N.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit := int64(0), DefaultEvents
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query: after %q must be a seq, an integer from 0 (the events after it)", v))
			return
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > scheduling.MaxEvents {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query: limit %q must be an integer from 1 to %d (scheduling.MaxEvents); %d without it",
				v, scheduling.MaxEvents, DefaultEvents))
			return
		}
		limit = n
	}
	evs, err := h.s.Events(r.Context(), after, limit)
	if err != nil {
		writeError(w, errorCode(err), err.Error())
		return
	}
	out := EventsJSON{Node: h.s.Node(), Events: make([]EventJSON, len(evs)), Last: after}
	for i, e := range evs {
		out.Events[i] = EventJSON{Seq: e.Seq, Key: e.Key, At: e.At.UTC(), Node: e.Node, Actor: e.Actor, Action: e.Action, Target: e.Target,
			Note: e.Note, Before: rawOrNil(e.Before), After: rawOrNil(e.After)}
		out.Last = e.Seq
	}
	writeJSON(w, http.StatusOK, out)
}

// rawOrNil is a trail value as JSON, nil for none.
func rawOrNil(v string) any {
	if v == "" {
		return nil
	}
	return jsonRaw(v)
}

// jsonRaw is JSON text written as it is.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }
