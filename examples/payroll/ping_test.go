package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/redistest"
)

// monitor is a healthchecks-style receiver: it records when each node's
// pings arrive, by the node its User-Agent names.
type monitor struct {
	mu    sync.Mutex
	pings map[string][]time.Time
}

func (m *monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node := strings.TrimSuffix(strings.TrimPrefix(r.UserAgent(), "ndigo-ping (node "), ")")
	m.mu.Lock()
	m.pings[node] = append(m.pings[node], time.Now())
	m.mu.Unlock()
	_, _ = w.Write([]byte("OK"))
}

// since returns how many pings node sent after t, and the last one's time.
func (m *monitor) since(node string, t time.Time) (n int, last time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, at := range m.pings[node] {
		if at.After(t) {
			n++
		}
		if at.After(last) {
			last = at
		}
	}
	return n, last
}

// waitPings waits until node has pinged twice after t.
func (m *monitor) waitPings(t *testing.T, node string, after time.Time) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := m.since(node, after); n >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s pinged fewer than twice in 30s after %s", node, after.Format(time.TimeOnly))
		}
	}
}

// Two nodes on Redis ping the monitor (ping.url, every second) while they
// run: one stopped, the other's pings go on and the stopped one's end;
// both stopped, the monitor hears nothing within two periods, which is the
// silence it alarms on.
func TestPingsStopWithTheCluster(t *testing.T) {
	const every = time.Second
	m := &monitor{pings: map[string][]time.Time{}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	t.Setenv("PAYROLL_PING_URL", srv.URL+"/0f1d2c3b-4a59-6877-8695-a4b3c2d1e0f9")
	t.Setenv("PAYROLL_PING_EVERY", every.String())
	t.Setenv("PAYROLL_PING_TIMEOUT", "500ms")
	redis := redistest.Start(t)
	p := nodetest.New(t)
	start := time.Now()
	for _, n := range []string{"n0", "n1"} {
		p.StartPayroll(n, redis.Addr(), "ping", "5s")
	}
	for _, n := range []string{"n0", "n1"} {
		m.waitPings(t, n, start)
	}

	stop := func(node string) time.Time {
		p.Signal(node, syscall.SIGTERM)
		if err := p.WaitExit(node, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		return time.Now()
	}
	gone := stop("n0")
	m.waitPings(t, "n1", gone)
	if n, _ := m.since("n0", gone); n != 0 {
		t.Errorf("n0 pinged %d times after it exited", n)
	}
	gone = stop("n1")
	time.Sleep(2 * every) // the monitor's window: it must hear nothing in it
	for _, n := range []string{"n0", "n1"} {
		if k, last := m.since(n, gone); k != 0 {
			t.Errorf("%s pinged %d times after the cluster stopped, the last at %s", n, k, last.Format(time.TimeOnly))
		}
	}
	_, last := m.since("n1", time.Time{})
	t.Logf("the last ping arrived %v before the last node exited", gone.Sub(last))
}
