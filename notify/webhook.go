package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// SignatureHeader is the header in which [Webhook] signs its body:
// "t=UNIX,v1=HEX", HEX being the HMAC-SHA256, keyed by the webhook's
// secret, of the decimal Unix time, a ".", and the body. [Verify] checks
// it.
const SignatureHeader = "Ndigo-Signature"

// IdempotencyHeader carries [Message].ID on every attempt.
const IdempotencyHeader = "Idempotency-Key"

// DefaultTimeout bounds one attempt of a [Webhook] or [Slack] whose
// Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Webhook is a [Notifier] that POSTs the [Message] as JSON to URL, with
// the headers Idempotency-Key (the message's ID) and, with a Secret,
// Ndigo-Signature ([SignatureHeader]). An answer 2xx delivers it; a 4xx
// other than 408, 425 and 429 refuses it ([ErrPermanent]); anything else
// fails the attempt. Its errors name the URL's scheme and host only: a
// webhook's path often holds a secret.
type Webhook struct {
	URL string
	// Secret keys the body's signature; empty sends none.
	Secret string
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means http.DefaultClient's transport
	// with no timeout of its own (Timeout bounds each attempt).
	Client *http.Client
	// Clock gives the signature's time; nil means the real clock.
	Clock clockwork.Clock
}

// Notify posts m once.
func (w Webhook) Notify(ctx context.Context, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%w: message %q: %v", ErrInvalid, m.ID, err)
	}
	h := http.Header{}
	h.Set(IdempotencyHeader, m.ID)
	if w.Secret != "" {
		clock := w.Clock
		if clock == nil {
			clock = clockwork.NewRealClock()
		}
		h.Set(SignatureHeader, Sign(w.Secret, clock.Now(), body))
	}
	return post(ctx, w.Client, w.URL, w.Timeout, h, body)
}

// Sign returns the [SignatureHeader] value of body sent at t under secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a [SignatureHeader] value of body under secret, for a
// receiver: the signature must match, in constant time, and its time be
// within tolerance of now, so that a message recorded on the way cannot be
// played again later. It returns nil, or an error saying which check
// failed.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("notify: signature %q: no t=UNIX time", header)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, ts, body)) {
		return errors.New("notify: signature does not match the body and the secret")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("notify: signature made %v from now, beyond the tolerance %v", d.Round(time.Second), tolerance)
	}
	return nil
}

// Slack is a [Notifier] that POSTs the [Message] to a Slack incoming
// webhook (or one that takes its payload, such as Mattermost's) as
// {"text": "..."}: one line saying the task, the event, the detail and the
// node. Slack does not deduplicate: a message whose attempt failed after
// Slack received it shows twice. Its errors name the URL's scheme and
// host only: the path is the secret.
type Slack struct {
	URL string
	// Timeout bounds one attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means http.DefaultClient's transport.
	Client *http.Client
}

// Notify posts m once.
func (s Slack) Notify(ctx context.Context, m Message) error {
	text := fmt.Sprintf("ndigo: task %s %s", m.Task, m.Event)
	if !m.At.IsZero() {
		text += " at " + m.At.UTC().Format(time.RFC3339)
	}
	if m.Detail != "" {
		text += ": " + m.Detail
	}
	if m.Node != "" {
		text += " (from " + m.Node + ")"
	}
	body, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return err
	}
	return post(ctx, s.Client, s.URL, s.Timeout, http.Header{}, body)
}

// post sends body to rawURL once within timeout.
func post(ctx context.Context, c *http.Client, rawURL string, timeout time.Duration, h http.Header, body []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: URL %s: must be an absolute http:// or https:// URL", ErrPermanent, endpoint(rawURL))
	}
	where := u.Scheme + "://" + u.Host
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if c == nil {
		c = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: URL %s: %v", ErrPermanent, where, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ndigo-notify")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the whole URL
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return fmt.Errorf("POST %s: no answer within %v", where, timeout)
		}
		return fmt.Errorf("POST %s: %w", where, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	err = fmt.Errorf("POST %s: %s: %s", where, resp.Status, strings.TrimSpace(string(snippet)))
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			return &retryAfterError{err: err, d: time.Duration(s) * time.Second}
		}
		return err
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly:
		return err
	case code >= 400 && code < 500:
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return err
}

// endpoint returns rawURL's scheme and host, or a mark when it does not
// parse: never its path or query.
func endpoint(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return "[unparsable URL]"
}
