package admintest

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Task is one scheduled task of the fixture's cluster.
type Task struct {
	Name string
	Cron string
	Lock string // "" if unlocked
	// Next is the next fire; zero when the schedule has no further fire.
	Next   time.Time
	Paused bool
	// Health is the task's health state, as admin's health.state says
	// it; "" for "ok" (a paused task's is "paused").
	Health string
	// Runs is the cluster-wide history, newest first.
	Runs []Run
}

// A Run is one run of a task somewhere in the cluster.
type Run struct {
	Fire     time.Time
	Manual   bool
	Node     string
	Token    uint64
	Start    time.Time
	Duration time.Duration
	Outcome  string // "ok", "error", "panic", "lost", ...
	Error    string
}

// A Request is one request a fixture node answered, as it arrived.
type Request struct {
	Node   string
	Method string
	// Path is the escaped path, as the client sent it.
	Path string
	// Task is the task name the server decoded from the path, or from the
	// query's name parameter on /scheduledtasks/{action}?name=NAME; "" on
	// /scheduledtasks.
	Task string
	// Authorization is the request's Authorization header.
	Authorization string
}

// A Cluster is the state every node of the fixture shares: tasks, their
// paused flags and histories, and the requests the nodes answered.
type Cluster struct {
	token string

	mu       sync.Mutex // protects the fields below
	tasks    []*Task
	requests []Request
	runNow   map[string]int
}

// NewCluster returns a cluster of tasks whose mutations need token as a
// bearer token; "" leaves mutations disabled (403), as a node without
// admin.token does.
func NewCluster(token string, tasks ...Task) *Cluster {
	// As admin.Handler does, a token's ends lose their whitespace.
	c := &Cluster{token: strings.Trim(token, " \t\r\n\v\f"), runNow: map[string]int{}}
	for _, t := range tasks {
		t.Runs = slices.Clone(t.Runs)
		c.tasks = append(c.tasks, &t)
	}
	return c
}

// Node returns the HTTP handler of one node of the cluster: lastRun in
// its task list is the newest run whose Node is name.
func (c *Cluster) Node(name string) http.Handler {
	n := &node{c: c, name: name, mux: http.NewServeMux()}
	n.mux.HandleFunc("/scheduledtasks", n.tasks)
	n.mux.HandleFunc("/scheduledtasks/{name}/runs", n.runs)
	n.mux.HandleFunc("/scheduledtasks/{name}/{action}", n.act)
	// The names "." and ".." travel in the query: ?name=..
	n.mux.HandleFunc("/scheduledtasks/runs", n.runs)
	n.mux.HandleFunc("/scheduledtasks/{action}", n.act)
	return n
}

// Task returns a copy of the named task's state, and false if there is
// none.
func (c *Cluster) Task(name string) (Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.find(name)
	if t == nil {
		return Task{}, false
	}
	cp := *t
	cp.Runs = slices.Clone(t.Runs)
	return cp, true
}

// AddRun records r as the newest run of the named task, as if a node had
// run it; it reports false if there is no such task.
func (c *Cluster) AddRun(task string, r Run) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.find(task)
	if t == nil {
		return false
	}
	t.Runs = slices.Insert(t.Runs, 0, r)
	return true
}

// RunRequests returns how many accepted run-now requests the named task
// got.
func (c *Cluster) RunRequests(task string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runNow[task]
}

// Requests returns every request the cluster's nodes answered, in order.
func (c *Cluster) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

// find returns the named task or nil; c.mu is held.
func (c *Cluster) find(name string) *Task {
	for _, t := range c.tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}
