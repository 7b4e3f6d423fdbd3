package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ndigo/ndigo/internal/browsertest"
	"github.com/ndigo/ndigo/locks"
	"github.com/ndigo/ndigo/scheduling"
	"github.com/ndigo/ndigo/taskstate"
)

// seenRequest is one request that reached the test's server.
type seenRequest struct{ method, uri, auth string }

// The console, on a real handler mounted under /admin, pauses, resumes and
// shows the history of the tasks "." and "..", each its own, and sends
// nothing, the token least of all, outside the handler's endpoints. A
// token typed with spaces around it is sent without them.
func TestConsoleDotNames(t *testing.T) {
	store, err := taskstate.NewInProcess(0)
	if err != nil {
		t.Fatal(err)
	}
	s := scheduling.New(scheduling.Config{Logger: slog.New(slog.DiscardHandler), State: store, Driver: locks.NewInProcessDriver()})
	for _, n := range []string{".", "..", "Payroll.Close"} {
		if err := s.Add(scheduling.NewTask(func(context.Context) error { return nil }, scheduling.Cron("@yearly"),
			scheduling.Lock("console"), scheduling.Name(n))); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Options{Scheduler: s, Token: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	var mu sync.Mutex
	var seen []seenRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization")})
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	paused := func() []string {
		tasks, err := s.ClusterTasks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ti := range tasks {
			if ti.Paused {
				out = append(out, ti.Name)
			}
		}
		return out
	}

	page := browsertest.OpenConsole(t, browsertest.New(t), srv.URL+"/admin/")
	page.Act(".", "pause", "  "+secret+"  ")
	wantMessage(t, page, ". paused: every node skips its fires until it is resumed.", false)
	if got := paused(); !slices.Equal(got, []string{"."}) {
		t.Errorf("after pausing . the paused tasks are %q", got)
	}
	page.WaitCell("the page to show . paused", ".", browsertest.ColPaused, "paused")
	page.Act("..", "pause", "") // the tab kept the token
	wantMessage(t, page, ".. paused: every node skips its fires until it is resumed.", false)
	if got := paused(); !slices.Equal(got, []string{".", ".."}) {
		t.Errorf("after pausing .. the paused tasks are %q", got)
	}
	page.Act(".", "resume", "")
	wantMessage(t, page, ". resumed: it runs again from its next fire.", false)
	if got := paused(); !slices.Equal(got, []string{".."}) {
		t.Errorf("after resuming . the paused tasks are %q", got)
	}
	page.Do("opening the history of ..", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task=".."] button.link`)))
	page.WaitFor("the history of ..", `document.getElementById("history-message").textContent === "No runs recorded yet."`)

	mu.Lock()
	defer mu.Unlock()
	var posts int
	for _, r := range seen {
		switch {
		case r.method == http.MethodGet && (r.uri == "/admin/" || r.uri == "/admin/scheduledtasks" ||
			r.uri == "/admin/scheduledtasks/runs?name=.." || r.uri == "/admin/scheduledtasks/audit?name=.." || r.uri == "/admin/scheduledtasks/next?name=.." ||
			r.uri == "/admin/healthz" || r.uri == "/admin/schedules" || r.uri == "/admin/calendars" || strings.HasPrefix(r.uri, "/admin/events?after=")) && r.auth == "":
		case r.method == http.MethodPost && (r.uri == "/admin/scheduledtasks/pause?name=." || r.uri == "/admin/scheduledtasks/pause?name=.." ||
			r.uri == "/admin/scheduledtasks/resume?name=."):
			posts++
			if r.auth != "Bearer "+secret {
				t.Errorf("%s %s sent Authorization %q, want the token without the spaces typed around it", r.method, r.uri, r.auth)
			}
		case r.uri == "/favicon.ico" && r.auth == "":
		default:
			t.Errorf("a request went to %s %s (Authorization %q)", r.method, r.uri, strings.Repeat("*", len(r.auth)))
		}
	}
	if posts != 3 {
		t.Errorf("%d POSTs reached the task endpoints, want 3", posts)
	}
}
