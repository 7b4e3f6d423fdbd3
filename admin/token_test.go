package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A token with whitespace at its ends (a secret file's final newline) is
// the token without it, which clients can send, and the node says so once,
// naming the setting and never the value.
func TestTokenWhitespaceIsTrimmed(t *testing.T) {
	for _, raw := range []Token{secret + "\n", secret + "\r\n", "  " + secret + " \t"} {
		c := newControlled(t, raw)
		if code, _, body := c.do(t, http.MethodPost, taskPath("pause"), "Bearer "+secret); code != http.StatusOK {
			t.Errorf("token %q: POST pause with the trimmed token: %d %v, want 200", raw, code, body)
		}
		logs := c.log.String()
		if n := strings.Count(logs, `"level":"WARN","msg":"admin: the admin token (admin.token, or admin.Options.Token) has leading or trailing whitespace`); n != 1 ||
			!strings.Contains(logs, `"setting":"admin.token"`) || strings.Contains(logs, secret) {
			t.Errorf("token %q: %d warnings naming admin.token in %s; want one, without the token", raw, n, logs)
		}
	}
	c := newControlled(t, " \n")
	if code, _, _ := c.do(t, http.MethodPost, taskPath("pause"), "Bearer "); code != http.StatusForbidden {
		t.Errorf("a token of whitespace only: POST pause %d, want 403 as with no token", code)
	}
	if logs := c.log.String(); !strings.Contains(logs, "is only whitespace: task control is off") {
		t.Errorf("a token of whitespace only: no warning in %s", logs)
	}
	c = newControlled(t, secret)
	if logs := c.log.String(); strings.Contains(logs, "whitespace") {
		t.Errorf("a token without whitespace: %s", logs)
	}
}

// Each token of Options.Tokens is its holder's: a control request with it
// is logged and kept by that name, whatever the client says it is; a
// token of no holder is refused; bad names, empty tokens and a token two
// holders share are refused at New, naming the holder and never a token.
func TestNamedTokens(t *testing.T) {
	c := newControlledWith(t, Options{Token: secret, Tokens: map[string]Token{"ops": "ops-token\n", "ci.deploy": "ci-token"}})
	pause := func(token, body string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, taskPath("pause"), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		return rec.Code
	}
	by := func() string {
		t.Helper()
		_, _, tasks := c.do(t, http.MethodGet, "/scheduledtasks", "")
		p, _ := tasks["tasks"].([]any)[0].(map[string]any)["pauseNote"].(map[string]any)
		return fmt.Sprint(p["by"])
	}
	for _, tc := range []struct{ token, body, by string }{
		{"ops-token", `{"by": "ndigo CLI (alice)"}`, "ops: ndigo CLI (alice)"},
		{"ci-token", "", "ci.deploy"},
		{secret, `{"by": "ops"}`, "admin: ops"}, // what a client says is not who it is
	} {
		if code := pause(tc.token, tc.body); code != http.StatusOK {
			t.Fatalf("POST pause with %s's token: %d, want 200", tc.by, code)
		}
		if got := by(); got != tc.by {
			t.Errorf("paused by %q, want %q", got, tc.by)
		}
	}
	if code := pause("ops-token\n", ""); code != http.StatusUnauthorized {
		t.Errorf("POST pause with a token no holder has: %d, want 401", code)
	}
	logs := c.log.String()
	for _, want := range []string{`"actor":"ops"`, `"actor":"ci.deploy"`, `"actor":"admin"`,
		`"msg":"admin: an admin token has leading or trailing whitespace`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
	for _, tok := range []string{secret, "ops-token", "ci-token"} {
		if strings.Contains(logs, tok) {
			t.Errorf("the log shows a token:\n%s", logs)
		}
	}

	s := c.s
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Tokens: map[string]Token{"": "x"}}, `Tokens[""] (admin.tokens): the name must be 1 to 64 letters`},
		{Options{Tokens: map[string]Token{"a b": "x"}}, `Tokens["a b"] (admin.tokens): the name must be 1 to 64 letters`},
		{Options{Tokens: map[string]Token{strings.Repeat("a", 65): "x"}}, `the name must be 1 to 64 letters`},
		{Options{Tokens: map[string]Token{"admin": "x"}}, `Tokens["admin"] (admin.tokens): the name is the name of admin.token's holder`},
		{Options{Tokens: map[string]Token{"ops": " \n"}}, `Tokens["ops"] (admin.tokens): the token is empty or only whitespace`},
		{Options{Token: "same", Tokens: map[string]Token{"ops": "same\n"}}, `Tokens["ops"] (admin.tokens): the same token as admin's`},
		{Options{Tokens: map[string]Token{"a": "same", "b": "same"}}, `Tokens["b"] (admin.tokens): the same token as a's`},
	} {
		tc.opts.Scheduler = s
		_, err := New(tc.opts)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "same\"") {
			t.Errorf("New(%v): %v, want ErrInvalid with %q", tc.opts.Tokens, err, tc.want)
		}
	}
}

// GET /events lists the control actions with their actor, the name of the
// token's holder; a request sent again with its Idempotency-Key is kept
// once; bad queries are refused naming the parameter.
func TestEventsOverHTTP(t *testing.T) {
	c := newControlledWith(t, Options{Token: secret, Tokens: map[string]Token{"ops": "ops-token"}})
	send := func(action, token, key string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, taskPath(action), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if key != "" {
			req.Header.Set(IdempotencyHeader, key)
		}
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("POST %s: %d %s", action, rec.Code, rec.Body)
		}
	}
	send("pause", "ops-token", "req-1")
	send("pause", "ops-token", "req-1") // a retry of the same request
	send("resume", secret, "")
	send("run", "ops-token", "")
	code, _, body := c.do(t, http.MethodGet, "/events", "")
	evs, _ := body["events"].([]any)
	if code != http.StatusOK || len(evs) != 3 {
		t.Fatalf("GET /events: %d %v, want 3 events", code, body)
	}
	for i, w := range []struct{ action, actor string }{{"pause", "ops"}, {"resume", "admin"}, {"run", "ops"}} {
		e := evs[i].(map[string]any)
		if e["action"] != w.action || e["actor"] != w.actor || e["target"] != name || e["node"] != "node-a" {
			t.Errorf("event %d: %v, want %s by %s", i, e, w.action, w.actor)
		}
	}
	if k := evs[0].(map[string]any)["key"]; k != "req-1" {
		t.Errorf("the pause's key %v, want the request's req-1", k)
	}
	last := body["last"].(float64)
	code, _, body = c.do(t, http.MethodGet, fmt.Sprintf("/events?after=%d&limit=5", int64(last)), "")
	if evs, _ := body["events"].([]any); code != http.StatusOK || len(evs) != 0 || body["last"] != last {
		t.Errorf("GET /events after the last: %d %v, want none and the same last", code, body)
	}
	for q, want := range map[string]string{"after=-1": "after", "limit=0": "limit", "limit=1001": "limit", "after=x": "after"} {
		code, _, body := c.do(t, http.MethodGet, "/events?"+q, "")
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), want) {
			t.Errorf("GET /events?%s: %d %v, want 400 naming %s", q, code, body, want)
		}
	}
}
