package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ndigo/ndigo/internal/admintest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// dotNames are task names that are, or look like, dot segments.
var dotNames = []string{".", "..", "...", "a/..", "%2E"}

// dotHandler serves a real Handler, mounted under /admin, on a scheduler
// whose tasks are dotNames.
func dotHandler(t *testing.T, token Token) (*scheduling.Scheduler, *httptest.Server) {
	t.Helper()
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Logger: slog.New(slog.DiscardHandler), State: store,
		Driver: locks.NewInProcessDriver()})
	for _, n := range dotNames {
		if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@yearly"),
			scheduling.Lock("dots"), scheduling.Name(n))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Options{Scheduler: s, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv
}

// send sends method url (as is: Go's client removes no dot segment) and
// returns the status and the JSON body.
func send(t *testing.T, method, url, token string) (int, map[string]any) {
	t.Helper()
	code, raw := admintest.Send(t, method, url, token)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%s %s: %d, %v", method, url, code, err)
	}
	return code, body
}

// "." and ".." reach their tasks in the query (the form clients use) and,
// from a client that keeps the segment as sent, as %2E in the path.
func TestDotNamesReachTheirTasks(t *testing.T) {
	s, srv := dotHandler(t, secret)
	defer http.DefaultClient.CloseIdleConnections()
	base := srv.URL + "/admin/scheduledtasks/"
	for _, tc := range []struct{ name, runs, pause string }{
		{".", "runs?name=.", "pause?name=."},
		{"..", "runs?name=..", "pause?name=.."},
		{".", "%2E/runs", "%2e/pause"},
		{"..", "%2E%2E/runs", ".%2E/pause"},
		{"...", ".../runs", ".../pause"},
		{"a/..", "a%2F../runs", "pause?name=a%2F.."},
		{"%2E", "%252E/runs", "pause?name=%252E"},
	} {
		if code, body := send(t, http.MethodGet, base+tc.runs, ""); code != http.StatusOK || body["task"] != tc.name {
			t.Errorf("GET %s: %d %v; want the runs of %q", tc.runs, code, body, tc.name)
		}
		if err := s.Resume(context.Background(), tc.name); err != nil {
			t.Fatal(err)
		}
		if code, body := send(t, http.MethodPost, base+tc.pause, secret); code != http.StatusOK || body["task"] != tc.name {
			t.Errorf("POST %s: %d %v; want %q paused", tc.pause, code, body, tc.name)
		}
		tasks, err := s.ClusterTasks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tasks {
			if ti.Paused != (ti.Name == tc.name) {
				t.Errorf("after POST %s: %q paused %v", tc.pause, ti.Name, ti.Paused)
			}
		}
		if err := s.Resume(context.Background(), tc.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodGet, "runs", http.StatusBadRequest, "0 task names in the query, want one"},
		{http.MethodGet, "runs?name=.&name=..", http.StatusBadRequest, "2 task names in the query, want one"},
		{http.MethodGet, "bogus?name=.", http.StatusNotFound, "no such endpoint"},
		{http.MethodGet, "runs?name=nope", http.StatusNotFound, `unknown task: "nope"`},
		{http.MethodPost, "pause?name=.", http.StatusUnauthorized, "bearer token"},
		{http.MethodGet, "pause?name=.", http.StatusMethodNotAllowed, "use POST"},
	} {
		if code, body := send(t, tc.method, base+tc.path, ""); code != tc.code || !strings.Contains(body["error"].(string), tc.want) {
			t.Errorf("%s %s: %d %v; want %d saying %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}
