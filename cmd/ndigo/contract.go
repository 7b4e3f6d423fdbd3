package main

import (
	"encoding/json"
	"time"
)

// The types below mirror the JSON of package admin's API types, field by
// field, with only what the CLI reads; TestContractMatchesAdmin keeps them
// in agreement.

// taskList is the answer to GET /scheduledtasks.
type taskList struct {
	Tasks      []task `json:"tasks"`
	StateError string `json:"stateError"`
}

// task is one task of GET /scheduledtasks. Paused is nil when the node's
// handler predates the control API.
type task struct {
	Name           string     `json:"name"`
	Cron           string     `json:"cron"`
	Lock           string     `json:"lock"`
	Retries        int        `json:"retries"` // 0 if it does not retry, or the node predates retries
	Next           *time.Time `json:"next"`
	RetryAt        *time.Time `json:"retryAt"` // when the retry this node's last run left is due; nil if none is pending (a fire waiting for the run going, overlap buffer-one, is no retry)
	Paused         *bool      `json:"paused"`
	LastRun        *nodeFire  `json:"lastRun"`
	ClusterLastRun *taskRun   `json:"clusterLastRun"`
	LastFire       *nodeFire  `json:"lastFire"`  // this node's last fire, run or not
	Failures       uint64     `json:"failures"`  // this node's failed fires
	Backfill       *backfill  `json:"backfill"`  // the task's last backfill as the node's last poll read it; nil if none, or the node predates backfills
	Handler        string     `json:"handler"`   // the handler of the stored schedule the task runs; "" for a task declared in code, or from a node that predates stored schedules
	Completed      bool       `json:"completed"` // it fires no more: past its endAt, its one-off instant or its maxRuns; false from a node that predates them
	Health         *health    `json:"health"`    // nil from a node that predates health states
}

// health is a task's health: in GET /scheduledtasks, and the answer to GET
// /scheduledtasks/{name}/health.
type health struct {
	State  string     `json:"state"` // ok, late, failing, overrun, down, paused, completed, unknown
	Since  *time.Time `json:"since"`
	Reason string     `json:"reason"`
}

// backfill is a backfill: the answer to POST
// /scheduledtasks/{name}/backfill, and a task's last one in GET
// /scheduledtasks.
type backfill struct {
	ID      string    `json:"id"`
	Task    string    `json:"task"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Force   bool      `json:"force"`
	Overlap string    `json:"overlap"` // "" for the task's own
	Total   int       `json:"total"`   // the instants of the range
	Taken   int       `json:"taken"`   // the instants taken to run
	Refused int       `json:"refused"` // the instants refused as already run
	State   string    `json:"state"`   // running, done, cancelled
	Node    string    `json:"node"`    // the node that started it
	Created time.Time `json:"created"`
}

// backfillRequest is the body of POST /scheduledtasks/{name}/backfill.
type backfillRequest struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Force   bool   `json:"force,omitempty"`
	Overlap string `json:"overlap,omitempty"`
}

// taskRun is one run of a task in the cluster. Attempt is 0 when the
// node's handler predates retries: the fire's first run; the run of a
// fire that waited for the run before it (overlap buffer-one) is attempt
// 1 too.
type taskRun struct {
	Fire     time.Time  `json:"fire"`
	Manual   bool       `json:"manual"`
	Backfill bool       `json:"backfill"` // a run of a backfill; false from a node that predates backfills
	Node     string     `json:"node"`
	Attempt  int        `json:"attempt"`
	Token    uint64     `json:"token"`
	Start    *time.Time `json:"start"`
	Duration string     `json:"duration"`
	Outcome  string     `json:"outcome"`
	Error    string     `json:"error"`
}

// nodeFire is one fire of a task on the node answering: a task's lastFire
// or lastRun.
type nodeFire struct {
	Fire     time.Time  `json:"fire"`
	Manual   bool       `json:"manual"`
	Start    *time.Time `json:"start"`
	Duration string     `json:"duration"`
	Outcome  string     `json:"outcome"`
	Node     string     `json:"node"`
	Attempt  int        `json:"attempt"`
	Token    uint64     `json:"token"`
	Error    string     `json:"error"`
}

// runs is the answer to GET /scheduledtasks/{name}/runs.
type runs struct {
	Retries int       `json:"retries"` // the task's retries on the node: a fire has at most retries+1 attempts
	Runs    []taskRun `json:"runs"`
}

// action is the answer to POST /scheduledtasks/{name}/run, pause, resume
// or cancel-backfill, and to DELETE /schedules/{name}.
type action struct {
	Task   string `json:"task"`
	Action string `json:"action"`
	Status string `json:"status"`
	Paused *bool  `json:"paused"`
}

// audit is the answer to GET /scheduledtasks/{name}/audit.
type audit struct {
	From       *time.Time  `json:"from"`
	To         time.Time   `json:"to"`
	Ran        int         `json:"ran"`
	Skipped    int         `json:"skipped"`
	Failed     int         `json:"failed"`
	Missed     int         `json:"missed"`
	Excluded   int         `json:"excluded"` // the instants its calendars excluded; 0 from a node that predates calendars
	LastMissed *time.Time  `json:"lastMissed"`
	Fires      []auditFire `json:"fires"`
	Note       string      `json:"note"`
}

// auditFire is one instant of an audit.
type auditFire struct {
	Fire    time.Time `json:"fire"`
	Status  string    `json:"status"`
	Outcome string    `json:"outcome"`
	Node    string    `json:"node"`
	Detail  string    `json:"detail"`
}

// scheduleList is the answer to GET /schedules.
type scheduleList struct {
	Node      string     `json:"node"` // the node answering
	Schedules []schedule `json:"schedules"`
}

// schedule is one stored schedule of GET /schedules, and the answer to
// POST /schedules and PUT /schedules/{name}.
type schedule struct {
	Name    string            `json:"name"`
	Handler string            `json:"handler"`
	Cron    string            `json:"cron"`
	Lock    string            `json:"lock"`
	Options map[string]string `json:"options"`
	Args    json.RawMessage   `json:"args"` // null if none
	Node    string            `json:"node"` // the node that created or last updated it
	Updated time.Time         `json:"updated"`
	From    time.Time         `json:"from"`    // when its spec comes or came in force on every node
	Problem string            `json:"problem"` // why the node answering does not run it; "" if it does
}

// scheduleRequest is the body of POST /schedules and PUT /schedules/{name}:
// the whole schedule, which a PUT replaces.
type scheduleRequest struct {
	Name    string            `json:"name"`
	Handler string            `json:"handler"`
	Cron    string            `json:"cron"`
	Lock    string            `json:"lock,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
}

// calendarList is the answer to GET /calendars.
type calendarList struct {
	Node      string     `json:"node"` // the node answering
	Calendars []calendar `json:"calendars"`
}

// calendar is one calendar of GET /calendars, and the answer to GET, PUT
// /calendars/{name} and POST /calendars.
type calendar struct {
	Name     string    `json:"name"`
	Dates    []string  `json:"dates"`
	Weekdays []string  `json:"weekdays"`
	Windows  []string  `json:"windows"`
	Cron     []string  `json:"cron"`
	Include  []string  `json:"include"`
	Note     string    `json:"note"`
	Node     string    `json:"node"` // the node that created or last updated it
	From     time.Time `json:"from"` // when its rules come or came in force on every node
	UsedBy   []string  `json:"usedBy"`
	Problem  string    `json:"problem"` // why the node answering cannot apply it; "" if it does
}

// calendarRequest is the body of POST /calendars and PUT /calendars/{name}:
// the whole calendar, which a PUT replaces. It is also what calendar
// create --file reads.
type calendarRequest struct {
	Name     string   `json:"name"`
	Dates    []string `json:"dates,omitempty"`
	Weekdays []string `json:"weekdays,omitempty"`
	Windows  []string `json:"windows,omitempty"`
	Cron     []string `json:"cron,omitempty"`
	Include  []string `json:"include,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// calendarAction is the answer to DELETE /calendars/{name}.
type calendarAction struct {
	Calendar string `json:"calendar"`
	Action   string `json:"action"`
	Status   string `json:"status"`
}

// nextFires is the answer to GET /scheduledtasks/{name}/next.
type nextFires struct {
	Task  string     `json:"task"`
	Fires []nextFire `json:"fires"`
}

// nextFire is one instant of a task's next fires.
type nextFire struct {
	Fire  time.Time `json:"fire"`
	Start time.Time `json:"start"`
	Skip  string    `json:"skip"` // why no node will run it; "" if one will
	DST   string    `json:"dst"`  // what a change of the clocks does to it; "" if nothing
}
