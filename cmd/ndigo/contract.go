package main

import "time"

// task is one task of GET /scheduledtasks. Paused is nil when the node's
// handler predates the control API.
type task struct {
	Name           string     `json:"name"`
	Cron           string     `json:"cron"`
	Lock           string     `json:"lock"`
	Next           *time.Time `json:"next"`
	Paused         *bool      `json:"paused"`
	LastRun        *taskRun   `json:"lastRun"`
	ClusterLastRun *taskRun   `json:"clusterLastRun"`
	LastFire       *taskRun   `json:"lastFire"` // this node's last fire, run or not
	Failures       uint64     `json:"failures"` // this node's failed fires
}

// taskRun is one run of a task in the cluster.
type taskRun struct {
	Fire     time.Time  `json:"fire"`
	Manual   bool       `json:"manual"`
	Node     string     `json:"node"`
	Token    uint64     `json:"token"`
	Start    *time.Time `json:"start"`
	Duration string     `json:"duration"`
	Outcome  string     `json:"outcome"`
	Error    string     `json:"error"`
}

// action is the answer to POST /scheduledtasks/{name}/run, pause or
// resume.
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
	LastMissed *time.Time  `json:"lastMissed"`
	Fires      []auditFire `json:"fires"`
}

// auditFire is one instant of an audit.
type auditFire struct {
	Fire    time.Time `json:"fire"`
	Status  string    `json:"status"`
	Outcome string    `json:"outcome"`
	Node    string    `json:"node"`
	Detail  string    `json:"detail"`
}
