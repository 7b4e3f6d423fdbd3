package admintest

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// node is one fixture node: its name chooses which runs are its own.
type node struct {
	c    *Cluster
	name string
	mux  *http.ServeMux
}

func (n *node) ServeHTTP(w http.ResponseWriter, r *http.Request) { n.mux.ServeHTTP(w, r) }

// record appends r to the cluster's requests, once the mux has set its
// path values.
func (n *node) record(r *http.Request) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	n.c.requests = append(n.c.requests, Request{Node: n.name, Method: r.Method, Path: r.URL.EscapedPath(),
		Task: taskName(r), Authorization: r.Header.Get("Authorization")})
}

// taskName returns the task name of r: its path's {name}, or the query's
// name on /scheduledtasks/{action}?name=NAME, as admin.Handler reads it.
func taskName(r *http.Request) string {
	if name := r.PathValue("name"); name != "" {
		return name
	}
	return r.URL.Query().Get("name")
}

type taskJSON struct {
	Name           string     `json:"name"`
	Type           string     `json:"type"`
	Method         string     `json:"method"`
	Cron           string     `json:"cron"`
	Lock           string     `json:"lock"`
	LockTTL        string     `json:"lockTtl"`
	LockWait       string     `json:"lockWait"`
	MaxRunTime     string     `json:"maxRunTime"`
	Renew          bool       `json:"renew"`
	Next           *time.Time `json:"next"`
	Running        bool       `json:"running"`
	Waiting        bool       `json:"waiting"`
	Runs           uint64     `json:"runs"`
	Skips          uint64     `json:"skips"`
	Failures       uint64     `json:"failures"`
	LastFire       *runJSON   `json:"lastFire"`
	LastRun        *runJSON   `json:"lastRun"`
	Paused         bool       `json:"paused"`
	ClusterLastRun *runJSON   `json:"clusterLastRun"`
	Health         healthJSON `json:"health"`
}

type healthJSON struct {
	State  string     `json:"state"`
	Since  *time.Time `json:"since"`
	Reason string     `json:"reason"`
}

type runJSON struct {
	Fire            time.Time `json:"fire"`
	Manual          bool      `json:"manual"`
	Node            string    `json:"node"`
	Token           uint64    `json:"token"`
	Start           time.Time `json:"start"`
	Duration        string    `json:"duration"`
	DurationSeconds float64   `json:"durationSeconds"`
	Outcome         string    `json:"outcome"`
	Error           string    `json:"error,omitempty"`
}

func toJSON(r Run) *runJSON {
	return &runJSON{Fire: r.Fire.UTC(), Manual: r.Manual, Node: r.Node, Token: r.Token, Start: r.Start.UTC(),
		Duration: r.Duration.String(), DurationSeconds: r.Duration.Seconds(), Outcome: r.Outcome, Error: r.Error}
}

func (n *node) tasks(w http.ResponseWriter, r *http.Request) {
	n.record(r)
	if !allow(w, r, http.MethodGet) {
		return
	}
	n.c.mu.Lock()
	out := make([]taskJSON, len(n.c.tasks))
	for i, t := range n.c.tasks {
		j := taskJSON{Name: t.Name, Cron: t.Cron, Lock: t.Lock, Paused: t.Paused, Health: healthJSON{State: t.Health}}
		switch {
		case t.Paused:
			j.Health = healthJSON{State: "paused", Reason: "paused in the cluster"}
		case t.Health == "":
			j.Health.State = "ok"
		case t.Health != "ok":
			j.Health.Reason = "the fixture's task is " + t.Health
		}
		if t.Lock != "" {
			j.LockTTL = "30s"
		}
		if !t.Next.IsZero() {
			next := t.Next.UTC()
			j.Next = &next
		}
		if len(t.Runs) > 0 {
			j.ClusterLastRun = toJSON(t.Runs[0])
		}
		for _, run := range t.Runs {
			if run.Node == n.name {
				j.Runs++
				if j.LastRun == nil {
					j.LastRun = toJSON(run)
					j.LastFire = j.LastRun
				}
			}
		}
		out[i] = j
	}
	n.c.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
}

func (n *node) runs(w http.ResponseWriter, r *http.Request) {
	n.record(r)
	if !allow(w, r, http.MethodGet) {
		return
	}
	name := taskName(r)
	n.c.mu.Lock()
	t := n.c.find(name)
	var out []*runJSON
	if t != nil {
		out = make([]*runJSON, 0, len(t.Runs))
		for _, run := range t.Runs {
			out = append(out, toJSON(run))
		}
	}
	n.c.mu.Unlock()
	if t == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown task %q", name))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task": name, "runs": out})
}

func (n *node) act(w http.ResponseWriter, r *http.Request) {
	n.record(r)
	action := r.PathValue("action")
	if action != "run" && action != "pause" && action != "resume" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: the actions are run, pause and resume", r.URL.EscapedPath()))
		return
	}
	if !allow(w, r, http.MethodPost) || !n.authorized(w, r) {
		return
	}
	name := taskName(r)
	n.c.mu.Lock()
	t := n.c.find(name)
	if t != nil {
		switch action {
		case "run":
			n.c.runNow[name]++
		case "pause":
			t.Paused = true
		case "resume":
			t.Paused = false
		}
	}
	n.c.mu.Unlock()
	switch {
	case t == nil:
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown task %q", name))
	case action == "run":
		writeJSON(w, http.StatusAccepted, map[string]any{"task": name, "action": action, "status": "requested"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"task": name, "action": action, "paused": action == "pause"})
	}
}

// The refusals' messages, as admin.Handler words them.
const (
	NoTokenMessage = "task control is off: this node has no admin token; set admin.token or admin.tokens in its configuration " +
		"(or admin.Options.Token or Tokens) and restart it, then send the token as 'Authorization: Bearer <token>'"
	WrongTokenMessage = "missing or wrong bearer token: send 'Authorization: Bearer <token>' with admin.token or a token of admin.tokens"
)

// authorized answers 403 when the cluster has no token and 401 when the
// request's bearer token is missing or wrong, as admin.Handler does.
func (n *node) authorized(w http.ResponseWriter, r *http.Request) bool {
	if n.c.token == "" {
		writeError(w, http.StatusForbidden, NoTokenMessage)
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(n.c.token)) != 1 {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, WrongTokenMessage)
		return false
	}
	return true
}

// allow answers 405 with an Allow header unless r's method is method.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: method not allowed; use %s", r.Method, r.URL.EscapedPath(), method))
	return false
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
