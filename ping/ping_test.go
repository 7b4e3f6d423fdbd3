package ping_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/ndigo/ndigo/internal/syncbuf"
	"github.com/ndigo/ndigo/ping"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// secret is the part of a healthchecks URL that must never be logged.
const secret = "0f1d2c3b-4a59-6877-8695-a4b3c2d1e0f9"

// receiver is a monitor's ping endpoint: it counts the GETs on its secret
// path, answering with answer.
type receiver struct {
	srv    *httptest.Server
	gets   atomic.Int64
	agents chan string
}

func newReceiver(t *testing.T, answer http.HandlerFunc) *receiver {
	r := &receiver{agents: make(chan string, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || req.URL.Path != "/"+secret {
			t.Errorf("the receiver got %s %s", req.Method, req.URL.Path)
		}
		r.gets.Add(1)
		r.agents <- req.Header.Get("User-Agent")
		answer(w, req)
	}))
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/" + secret }

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) }

// waitPings waits until p has sent n pings, whatever their outcome.
func waitPings(t *testing.T, p *ping.Pinger, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Pings < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings sent, want %d", p.Stats().Pings, n)
		}
		time.Sleep(time.Millisecond) // polls a condition; the pings run on the fake clock
	}
}

func newPinger(t *testing.T, cfg ping.Config) *ping.Pinger {
	t.Helper()
	p, err := ping.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

// A node pings at Start and once a period after, and is silent once
// stopped, however far its clock runs.
func TestPingsEveryPeriodUntilStop(t *testing.T) {
	r := newReceiver(t, ok)
	defer r.srv.Close()
	fc := clockwork.NewFakeClock()
	p := newPinger(t, ping.Config{URL: r.url(), Every: time.Minute, Clock: fc, Node: "billing-1"})

	waitPings(t, p, 1)
	first := fc.Now()
	for i := uint64(2); i <= 4; i++ {
		fc.Advance(59 * time.Second)
		if got := r.gets.Load(); got != int64(i-1) {
			t.Fatalf("after %d periods less a second: %d pings received, want %d", i-2, got, i-1)
		}
		fc.Advance(time.Second)
		waitPings(t, p, i)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	fc.Advance(10 * time.Minute)
	r.srv.Close() // waits for every request it received
	if got := r.gets.Load(); got != 4 {
		t.Errorf("%d pings received in 3 periods and 10 minutes after Stop, want 4", got)
	}
	s := p.Stats()
	if s.Pings != 4 || s.Failures != 0 || !s.LastSuccess.Equal(first.Add(3*time.Minute)) {
		t.Errorf("stats %+v, want 4 pings, no failure, last success at %s", s, first.Add(3*time.Minute))
	}
	if ua := <-r.agents; ua != "ndigo-ping (node billing-1)" {
		t.Errorf("User-Agent %q", ua)
	}
}

// A ping that the monitor does not answer within the timeout, by the
// Pinger's clock, fails; the failure is logged and counted, and the log
// does not show the URL's secret.
func TestPingTimesOutOnTheClock(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-req.Context().Done():
		}
	})
	defer r.srv.Close()
	defer close(release)
	fc := clockwork.NewFakeClock()
	var log syncbuf.Buffer
	p := newPinger(t, ping.Config{URL: r.url(), Every: time.Minute, Timeout: 10 * time.Second, Clock: fc,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	<-arrived
	fc.Advance(9 * time.Second)
	if s := p.Stats(); s.Pings != 0 {
		t.Fatalf("stats %+v before the timeout", s)
	}
	fc.Advance(time.Second)
	waitPings(t, p, 1)
	if s := p.Stats(); s.Failures != 1 || !s.LastSuccess.IsZero() {
		t.Errorf("stats %+v, want the ping failed", s)
	}
	out := log.String()
	if !strings.Contains(out, "ping failed") || !strings.Contains(out, "no answer within the timeout (10s)") {
		t.Errorf("log %q: want the failure and its timeout", out)
	}
	if strings.Contains(out, secret) || !strings.Contains(out, r.srv.URL+"/[REDACTED]") {
		t.Errorf("log %q: want the URL with its path redacted", out)
	}
}

// A ping answered with an error status, or not answered at all, fails
// without showing the secret.
func TestPingFailures(t *testing.T) {
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	defer r.srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, tc := range map[string]struct{ url, want string }{
		"status":  {r.url(), "answered 500 Internal Server Error"},
		"refused": {closed.URL + "/" + secret + "?create=1", "connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			var log syncbuf.Buffer
			p := newPinger(t, ping.Config{URL: tc.url, Clock: clockwork.NewFakeClock(),
				Logger: slog.New(slog.NewJSONHandler(&log, nil))})
			waitPings(t, p, 1)
			if s := p.Stats(); s.Failures != 1 {
				t.Errorf("stats %+v, want 1 failure", s)
			}
			if out := log.String(); !strings.Contains(out, tc.want) || strings.Contains(out, secret) {
				t.Errorf("log %q: want %q, and not the secret", out, tc.want)
			}
		})
	}
}

// Stop cancels a ping in flight at once, which counts as no failure.
func TestStopCancelsAPingInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	r := newReceiver(t, func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		<-req.Context().Done()
	})
	defer r.srv.Close()
	p := newPinger(t, ping.Config{URL: r.url(), Clock: clockwork.NewFakeClock()})
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Pings != 0 || s.Failures != 0 {
		t.Errorf("stats %+v, want the cancelled ping not counted", s)
	}
	if err := p.Start(); err == nil {
		t.Error("Start after Stop: no error")
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "hc-ping.com/" + secret, "ftp://hc-ping.com/" + secret, "https:///" + secret, "http://[::1/" + secret} {
		_, err := ping.New(ping.Config{URL: u})
		if err == nil {
			t.Errorf("New(%q): no error", u)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("New(%q): %v shows the secret", u, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://hc-ping.com/" + secret:            "https://hc-ping.com/[REDACTED]",
		"https://hc-ping.com/ping/key/" + secret:   "https://hc-ping.com/[REDACTED]",
		"https://push.example/api?token=" + secret: "https://push.example/[REDACTED]",
		"https://u:" + secret + "@monitor.example": "https://monitor.example/[REDACTED]",
		"https://monitor.example/":                 "https://monitor.example",
		"not a url " + secret:                      "[REDACTED]",
	} {
		if got := ping.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
