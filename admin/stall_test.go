package admin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/backendnode"
	"github.com/ndigo/ndigo/internal/etcdtest"
)

// With its etcd hung (SIGSTOP: connections open, nothing answered), a
// node's task list answers within the handler's state timeout with the
// node's own tasks and says the cluster's state is unavailable, and the
// runs endpoint answers an error: before the state calls were bounded,
// neither had answered after a minute.
func TestReadsAnswerWithAHungStore(t *testing.T) {
	c := backendnode.Etcd(t, "hung", epoch, 1)
	h, err := New(Options{Scheduler: c.Nodes[0].S, StateTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	member := c.Server.(*etcdtest.Member)
	member.Pause()
	t.Cleanup(member.Resume) // before the nodes stop, whose calls would wait for it
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(srv.URL + "/scheduledtasks")
	if err != nil {
		t.Fatalf("GET /scheduledtasks with etcd hung: %v", err)
	}
	var tasks TasksJSON
	err = json.NewDecoder(resp.Body).Decode(&tasks)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !slices.ContainsFunc(tasks.Tasks, func(t TaskJSON) bool { return t.Name == backendnode.Task }) ||
		!strings.Contains(tasks.StateError, "task state unavailable") {
		t.Fatalf("GET /scheduledtasks with etcd hung: %d %+v (%v); want this node's tasks and a stateError", resp.StatusCode, tasks, err)
	}
	resp, err = client.Get(srv.URL + "/scheduledtasks/" + backendnode.Task + "/runs")
	if err != nil {
		t.Fatalf("GET .../runs with etcd hung: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 500 {
		t.Fatalf("GET .../runs with etcd hung = %d, want an error status", resp.StatusCode)
	}
}
