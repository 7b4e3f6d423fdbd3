package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var at = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

var msg = Message{ID: "payroll@2026-01-01T09:00:00Z/late", Task: "payroll", Event: "late", At: at, Detail: "fire 09:00 not started within 1m", Node: "n1"}

// receiver answers each request with the next of codes (the last one
// again once they run out) and keeps what it received.
type receiver struct {
	t     *testing.T
	codes []int
	retry string // Retry-After of a 429 or 503

	mu   sync.Mutex // protects got
	got  []*http.Request
	body [][]byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		rc.t.Error(err)
	}
	rc.mu.Lock()
	rc.got, rc.body = append(rc.got, r), append(rc.body, b)
	code := rc.codes[min(len(rc.got), len(rc.codes))-1]
	rc.mu.Unlock()
	if rc.retry != "" {
		w.Header().Set("Retry-After", rc.retry)
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "answer %d", code)
}

func (rc *receiver) requests() ([]*http.Request, [][]byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got, rc.body
}

func serve(t *testing.T, rc *receiver) string {
	rc.t = t
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return srv.URL
}

// stepClock is a fake clock whose timers fire at once, the clock stepping
// to them: it records the waits asked for.
type stepClock struct {
	*clockwork.FakeClock
	waits []time.Duration
}

func (c *stepClock) NewTimer(d time.Duration) clockwork.Timer {
	c.waits = append(c.waits, d)
	t := c.FakeClock.NewTimer(d)
	c.Advance(d)
	return t
}

// deliver runs Deliver on a stepClock and returns the waits it took and
// its error.
func deliver(t *testing.T, n Notifier, m Message, r Retry) ([]time.Duration, error) {
	t.Helper()
	c := &stepClock{FakeClock: clockwork.NewFakeClockAt(at)}
	r.Clock = c
	err := Deliver(context.Background(), n, m, r)
	return c.waits, err
}

// A webhook posts the message as JSON, signed, with its ID as the
// idempotency key; the receiver's Verify accepts it, and refuses it with
// another secret, another body, or a time beyond the tolerance.
func TestWebhookSignsTheMessage(t *testing.T) {
	rc := &receiver{codes: []int{http.StatusNoContent}}
	url := serve(t, rc) + "/hooks/ndigo"
	fc := clockwork.NewFakeClockAt(at)
	if err := Deliver(context.Background(), Webhook{URL: url, Secret: "s3cret", Clock: fc}, msg, Retry{}); err != nil {
		t.Fatal(err)
	}
	got, bodies := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r, body := got[0], bodies[0]
	if r.Method != http.MethodPost || r.URL.Path != "/hooks/ndigo" || r.Header.Get("Content-Type") != "application/json" ||
		r.Header.Get(IdempotencyHeader) != msg.ID {
		t.Errorf("request %s %s, headers %v", r.Method, r.URL.Path, r.Header)
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil || m != msg {
		t.Errorf("body %s (%v), want the message %+v", body, err, msg)
	}
	sig := r.Header.Get(SignatureHeader)
	if err := Verify("s3cret", sig, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for name, err := range map[string]error{
		"another secret": Verify("other", sig, body, at, time.Minute),
		"another body":   Verify("s3cret", sig, append(body, ' '), at, time.Minute),
		"replayed later": Verify("s3cret", sig, body, at.Add(time.Hour), 5*time.Minute),
		"no time":        Verify("s3cret", "v1=00", body, at, time.Minute),
	} {
		if err == nil {
			t.Errorf("Verify with %s: nil, want an error", name)
		}
	}
	rc = &receiver{codes: []int{http.StatusOK}}
	if err := Deliver(context.Background(), Webhook{URL: serve(t, rc)}, msg, Retry{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := rc.requests(); got[0].Header.Get(SignatureHeader) != "" {
		t.Errorf("a webhook without a secret signed: %q", got[0].Header.Get(SignatureHeader))
	}
}

// Failures a retry can mend are retried with a growing backoff, each
// attempt with the same idempotency key, until one is delivered; the
// attempts run out with an AttemptsError wrapping the last failure; a
// refusal is not retried.
func TestDeliverRetries(t *testing.T) {
	rc := &receiver{codes: []int{500, 502, 408, 200}}
	waits, err := deliver(t, Webhook{URL: serve(t, rc)}, msg, Retry{Backoff: 2 * time.Second, MaxBackoff: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := rc.requests()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4", len(got))
	}
	for i, r := range got {
		if k := r.Header.Get(IdempotencyHeader); k != msg.ID {
			t.Errorf("attempt %d: idempotency key %q, want %q", i+1, k, msg.ID)
		}
	}
	// 2s, 4s, then capped at 5s, each shortened by up to a fifth.
	if len(waits) != 3 || waits[0] < 1600*time.Millisecond || waits[0] > 2*time.Second || waits[1] < 3200*time.Millisecond ||
		waits[1] > 4*time.Second || waits[2] < 4*time.Second || waits[2] > 5*time.Second {
		t.Errorf("waits %v, want about 2s, 4s, 5s", waits)
	}

	rc = &receiver{codes: []int{503}}
	_, err = deliver(t, Webhook{URL: serve(t, rc)}, msg, Retry{Attempts: 3})
	var ae *AttemptsError
	if !errors.As(err, &ae) || ae.Attempts != 3 || !strings.Contains(err.Error(), "503 Service Unavailable: answer 503") || errors.Is(err, ErrPermanent) {
		t.Errorf("Deliver to a receiver that always answers 503: %v, want 3 attempts naming the answer", err)
	}

	rc = &receiver{codes: []int{http.StatusUnauthorized}}
	_, err = deliver(t, Webhook{URL: serve(t, rc)}, msg, Retry{})
	if !errors.As(err, &ae) || ae.Attempts != 1 || !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("Deliver to a receiver that answers 401: %v, want one attempt, refused", err)
	}
}

// A receiver's Retry-After lengthens the next wait, up to MaxBackoff; the
// backoff's shortening stays within a fifth.
func TestPause(t *testing.T) {
	none := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	plain := errors.New("500")
	after := &retryAfterError{err: plain, d: 30 * time.Second}
	for _, tc := range []struct {
		wait, max time.Duration
		err       error
		rnd       func(int64) int64
		want      time.Duration
	}{
		{time.Second, time.Minute, plain, none, time.Second},
		{time.Second, time.Minute, plain, most, 800 * time.Millisecond},
		{time.Second, time.Minute, after, none, 30 * time.Second},
		{time.Second, 10 * time.Second, after, none, 10 * time.Second},
		{time.Minute, time.Minute, after, none, time.Minute}, // the backoff is already longer
	} {
		if got := pause(tc.wait, tc.max, tc.err, tc.rnd); got != tc.want {
			t.Errorf("pause(%v, %v, %v) = %v, want %v", tc.wait, tc.max, tc.err, got, tc.want)
		}
	}
	rc := &receiver{codes: []int{429, 200}, retry: "3"}
	waits, err := deliver(t, Webhook{URL: serve(t, rc)}, msg, Retry{Backoff: time.Second})
	if err != nil || len(waits) != 1 || waits[0] != 3*time.Second {
		t.Errorf("Deliver after a 429 with Retry-After 3: %v, waits %v; want one wait of 3s", err, waits)
	}
}

// A webhook's errors never show its URL's path or query, where its secret
// often is; a URL that is not http(s) is refused before any attempt.
func TestWebhookHidesItsPath(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	const secret = "/services/T000/B000/XXXXSECRET?token=abc"
	_, err := deliver(t, Slack{URL: url + secret}, msg, Retry{Attempts: 2})
	if err == nil || strings.Contains(err.Error(), "XXXXSECRET") || strings.Contains(err.Error(), "token") || !strings.Contains(err.Error(), url) {
		t.Errorf("Deliver to a closed port: %v; want the host named and the path hidden", err)
	}
	for _, bad := range []string{"ftp://h/XXXXSECRET", "hooks.example.com/XXXXSECRET", "http://[::1/XXXXSECRET"} {
		err := Deliver(context.Background(), Webhook{URL: bad}, msg, Retry{})
		var ae *AttemptsError
		if !errors.Is(err, ErrPermanent) || !errors.As(err, &ae) || ae.Attempts != 1 || strings.Contains(err.Error(), "XXXXSECRET") {
			t.Errorf("Deliver to %q: %v; want it refused at once, without the path", bad, err)
		}
	}
	hang := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer srv.Close()
	defer close(hang)
	err = Deliver(context.Background(), Webhook{URL: srv.URL + secret, Timeout: 50 * time.Millisecond}, msg, Retry{Attempts: 1})
	if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") || strings.Contains(err.Error(), "XXXXSECRET") {
		t.Errorf("Deliver to a receiver that does not answer: %v; want the timeout, without the path", err)
	}
}

// A Slack webhook gets one line of text; a Func gets the message; bad
// input is refused before any attempt, naming the field.
func TestSlackFuncAndBadInput(t *testing.T) {
	rc := &receiver{codes: []int{200}}
	if err := Deliver(context.Background(), Slack{URL: serve(t, rc)}, msg, Retry{}); err != nil {
		t.Fatal(err)
	}
	_, bodies := rc.requests()
	var payload map[string]string
	if err := json.Unmarshal(bodies[0], &payload); err != nil || len(payload) != 1 ||
		payload["text"] != "ndigo: task payroll late at 2026-01-01T09:00:00Z: fire 09:00 not started within 1m (from n1)" {
		t.Errorf("Slack payload %s (%v)", bodies[0], err)
	}
	var got []Message
	f := Func(func(_ context.Context, m Message) error {
		got = append(got, m)
		if len(got) == 1 {
			return errors.New("once")
		}
		return nil
	})
	if _, err := deliver(t, f, msg, Retry{}); err != nil || len(got) != 2 || got[1] != msg {
		t.Errorf("Deliver through a Func: %v, %d calls, want 2 with the message", err, len(got))
	}
	for _, tc := range []struct {
		n    Notifier
		m    Message
		r    Retry
		want string
	}{
		{nil, msg, Retry{}, "the Notifier is nil"},
		{f, Message{Event: "late"}, Retry{}, "Message.ID is empty"},
		{f, Message{ID: "x"}, Retry{}, `Message.Event is empty (message "x")`},
		{f, msg, Retry{Attempts: -1}, "Retry{Attempts: -1"},
	} {
		if err := Deliver(context.Background(), tc.n, tc.m, tc.r); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Deliver(%+v, %+v): %v, want ErrInvalid with %q", tc.m, tc.r, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Deliver(ctx, Func(func(context.Context, Message) error {
		calls++
		cancel()
		return errors.New("down")
	}), msg, Retry{})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("Deliver with its context cancelled during an attempt: %v after %d calls, want context.Canceled after 1", err, calls)
	}
}
