package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndigo/ndigo/internal/nodetest"
	"github.com/ndigo/ndigo/internal/pgtest"
	"github.com/ndigo/ndigo/notify"
)

// hooks is a webhook receiver: it checks each message's signature and
// idempotency key and keeps every delivery, duplicates included. While a
// hold is set, the first message that it matches is kept and its request
// left unanswered until the sender goes away.
type hooks struct {
	t      *testing.T
	secret string

	mu       sync.Mutex
	got      []notify.Message
	hold     func(notify.Message) bool
	held     chan notify.Message
	arrived  chan struct{} // closed and replaced at each delivery
	monitor  *monitor      // the pings, at /ping
	badSigns int
}

func newHooks(t *testing.T, secret string) *hooks {
	return &hooks{t: t, secret: secret, arrived: make(chan struct{}), monitor: &monitor{pings: map[string][]time.Time{}}}
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ping" {
		h.monitor.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var m notify.Message
	h.mu.Lock()
	if notify.Verify(h.secret, r.Header.Get(notify.SignatureHeader), body, time.Now(), time.Minute) != nil ||
		json.Unmarshal(body, &m) != nil || r.Header.Get(notify.IdempotencyHeader) != m.ID {
		h.badSigns++
		h.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.got = append(h.got, m)
	close(h.arrived)
	h.arrived = make(chan struct{})
	held := h.hold != nil && h.hold(m)
	if held {
		h.hold = nil
		h.held <- m
	}
	h.mu.Unlock()
	if held {
		<-r.Context().Done() // the sender is killed while it waits
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// holdNext holds the first delivery that match takes.
func (h *hooks) holdNext(match func(notify.Message) bool) <-chan notify.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.held = match, make(chan notify.Message, 1)
	return h.held
}

// from returns the deliveries from the n-th on.
func (h *hooks) from(n int) []notify.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notify.Message(nil), h.got[min(n, len(h.got)):]...)
}

// waitFor waits until ok holds of the deliveries from the n-th on.
func (h *hooks) waitFor(what string, n int, within time.Duration, ok func([]notify.Message) bool) {
	h.t.Helper()
	deadline := time.After(within)
	for {
		h.mu.Lock()
		ch := h.arrived
		h.mu.Unlock()
		if ok(h.from(n)) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("waited %v for %s; messages: %s", within, what, show(h.from(n)))
		}
	}
}

// show prints messages one per line.
func show(ms []notify.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n  %s %s %s from %s (%s)", m.Task, m.Event, m.ID, m.Node, m.Detail)
	}
	return b.String()
}

// episodes returns each task's messages, one per ID (a message delivered
// again under its ID is the receiver's to drop), in the order they first
// arrived; it fails the test if two deliveries of one ID differ.
func episodes(t *testing.T, ms []notify.Message) map[string][]notify.Message {
	t.Helper()
	seen := map[string]notify.Message{}
	out := map[string][]notify.Message{}
	for _, m := range ms {
		if first, ok := seen[m.ID]; ok {
			if first.Task != m.Task || first.Event != m.Event || !first.At.Equal(m.At) {
				t.Errorf("ID %s delivered as %s %s at %v, then as %s %s at %v", m.ID, first.Task, first.Event, first.At, m.Task, m.Event, m.At)
			}
			continue
		}
		seen[m.ID] = m
		out[m.Task] = append(out[m.Task], m)
	}
	return out
}

func eventsOf(ms []notify.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Event)
	}
	return out
}

// Three payroll nodes on PostgreSQL send their tasks' health changes to a
// webhook. With the database paused past the grace, each task is reported
// late, then down, once; resumed, recovered once. The node sending
// CloseBooks's "recovered" is killed while it waits for the answer: a
// survivor sends it again under the same ID, and no message is lost. Every
// node stopped, the pings stop.
func TestAlertsFromThreeNodesOnPostgres(t *testing.T) {
	if !*failoverAll {
		t.Skip("runs in make chaos (-failover.all)")
	}
	const secret = "the-receivers-shared-secret"
	h := newHooks(t, secret)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for k, v := range map[string]string{
		"PAYROLL_NOTIFY_WEBHOOK_URL": srv.URL + "/hook", "PAYROLL_NOTIFY_WEBHOOK_SECRET": secret,
		"PAYROLL_NOTIFY_EVERY": "1s", "PAYROLL_NOTIFY_TIMEOUT": "5s",
		// The grace is three lock TTLs: a node's death is seen, and its
		// fires taken over, well within it.
		"PAYROLL_LATE_AFTER": "15s", "PAYROLL_DOWN_AFTER": "30s",
		"PAYROLL_PING_URL": srv.URL + "/ping", "PAYROLL_PING_EVERY": "1s", "PAYROLL_PING_TIMEOUT": "500ms",
	} {
		t.Setenv(k, v)
	}
	pg := pgtest.Start(t)
	p := nodetest.New(t)
	nodes := []string{"n0", "n1", "n2"}
	for _, n := range nodes {
		p.StartPayrollOn(n, "--postgres", pg.URL(), "alerts", "5s")
	}
	p.WaitFires("payroll closed", "", 5, 2*time.Minute)
	// A busy machine may make a fire late before the pause; the pause's
	// messages are those after the ones already sent, once they settled.
	mark := len(h.from(0))

	pg.Pause()
	bothDown := func(ms []notify.Message) bool {
		eps := episodes(t, ms)
		down := 0
		for _, e := range eps {
			if ev := eventsOf(e); len(ev) > 0 && ev[len(ev)-1] == "down" {
				down++
			}
		}
		return down == 2
	}
	h.waitFor("both tasks down", mark, 2*time.Minute, bothDown)
	held := h.holdNext(func(m notify.Message) bool { return strings.HasSuffix(m.Task, "CloseBooks") && m.Event == "recovered" })
	pg.Resume()
	var sender notify.Message
	select {
	case sender = <-held:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no recovered of CloseBooks in 2m after the database resumed: %s", show(h.from(mark)))
	}
	p.Signal(sender.Node, syscall.SIGKILL)
	_ = p.WaitExit(sender.Node, 30*time.Second)
	h.waitFor("CloseBooks's recovered from a survivor, and Reconcile's", mark, 2*time.Minute, func(ms []notify.Message) bool {
		again, reconciled := false, false
		for _, m := range ms {
			again = again || (m.ID == sender.ID && m.Node != sender.Node)
			reconciled = reconciled || (m.Task == "Reconcile" && m.Event == "recovered")
		}
		return again && reconciled
	})

	ms := h.from(mark)
	eps := episodes(t, ms)
	if len(eps) != 2 {
		t.Fatalf("messages about %d tasks, want CloseBooks and Reconcile: %s", len(eps), show(ms))
	}
	for task, e := range eps {
		// The pause's late, down and recovered, once each; after them, a
		// task the kill made late again may say so, and recover.
		ev := eventsOf(e)
		if len(ev) < 3 || ev[0] != "late" || ev[1] != "down" || ev[2] != "recovered" {
			t.Errorf("%s: messages %q, want late, down, recovered: %s", task, ev, show(e))
			continue
		}
		for i, x := range ev[3:] {
			if want := []string{"late", "recovered"}[i%2]; x != want && !(want == "recovered" && x == "down") {
				t.Errorf("%s: after the pause's messages, %q: want late then recovered", task, ev[3:])
				break
			}
		}
		if !e[0].At.Before(e[1].At) {
			t.Errorf("%s: late at %v is not before down at %v", task, e[0].At, e[1].At)
		}
	}
	h.mu.Lock()
	if h.badSigns > 0 {
		t.Errorf("%d deliveries with a bad signature or idempotency key", h.badSigns)
	}
	h.mu.Unlock()
	t.Logf("%d deliveries, %d messages after dropping repeated IDs; %s was killed while sending %s", len(ms), len(eps["Reconcile"])+len(eps[sender.Task]), sender.Node, sender.ID)

	// Every node stopped, the monitor hears nothing more.
	var gone time.Time
	for _, n := range nodes {
		if n == sender.Node {
			continue
		}
		p.Signal(n, syscall.SIGTERM)
		if err := p.WaitExit(n, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		gone = time.Now()
	}
	time.Sleep(2 * time.Second) // the monitor's window, two periods: it must hear nothing in it
	for _, n := range nodes {
		if k, last := h.monitor.since(n, gone); k != 0 {
			t.Errorf("%s pinged %d times after the cluster stopped, the last at %s", n, k, last.Format(time.TimeOnly))
		}
	}
}
