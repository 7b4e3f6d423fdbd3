package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// maxBody bounds what the CLI reads of a response.
const maxBody = 16 << 20

// client calls one node's admin endpoints.
type client struct {
	base  *url.URL // scheme, host and the path prefix the handler is mounted under
	token string   // NDIGO_ADMIN_TOKEN; sent on mutations only, never printed
	user  string   // USER: who a pause or resume says sent it
	key   string   // the Idempotency-Key of this command's control requests, made at the first
	http  *http.Client
}

// parseAdmin parses an admin address: a URL, or host:port for http.
func parseAdmin(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("must be an http:// or https:// URL with a host and no user, query or fragment, e.g. " + defaultAdmin)
	}
	return u, nil
}

// endpoint returns the URL of the admin path /scheduledtasks followed by
// the task's name, path-escaped so that dots, spaces and slashes stay one
// segment, and the suffix ("/runs", "/pause", ...). The names "." and ".."
// go in the query instead, /scheduledtasks/runs?name=..: as a segment,
// proxies and URL resolution remove them as dot segments (browsers and
// some proxies their %2E escapes too), and the request would reach
// another path.
func (c *client) endpoint(task, suffix string) string {
	u := strings.TrimSuffix(c.base.String(), "/") + "/scheduledtasks"
	switch task {
	case "":
		return u + suffix
	case ".", "..":
		return u + suffix + "?name=" + url.QueryEscape(task)
	}
	return u + "/" + url.PathEscape(task) + suffix
}

// schedulesEndpoint returns the URL of the admin path /schedules, followed
// by the schedule's name, path-escaped, unless it is "". The names "." and
// ".." have no such URL (the node's mux takes them for dot segments and
// redirects): checkName refuses them first.
func (c *client) schedulesEndpoint(name string) string {
	u := strings.TrimSuffix(c.base.String(), "/") + "/schedules"
	if name == "" {
		return u
	}
	return u + "/" + url.PathEscape(name)
}

// calendarsEndpoint returns the URL of the admin path /calendars, followed
// by the calendar's name, path-escaped, unless it is "". No calendar is
// named "." or "..": checkName refuses them first.
func (c *client) calendarsEndpoint(name string) string {
	u := strings.TrimSuffix(c.base.String(), "/") + "/calendars"
	if name == "" {
		return u
	}
	return u + "/" + url.PathEscape(name)
}

// tokenSpace is what a token's ends lose, as the admin handler trims its
// own token: a file's final newline (CRLF too), a pasted token's spaces.
const tokenSpace = " \t\r\n\v\f"

// A statusError is a response other than 2xx: its status and the server's
// message.
type statusError struct {
	method, url string
	code        int
	msg         string
	hint        string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s: %s", e.method, e.url, e.code, http.StatusText(e.code), e.msg)
	if e.hint != "" {
		s += " (" + e.hint + ")"
	}
	return s
}

// get returns the body of GET url.
func (c *client) get(ctx context.Context, u string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, u, nil)
}

// post returns the body of POST url, sent with the bearer token.
func (c *client) post(ctx context.Context, u string) ([]byte, error) {
	return c.do(ctx, http.MethodPost, u, nil)
}

// postJSON returns the body of POST url with v as its JSON body, sent
// with the bearer token.
func (c *client) postJSON(ctx context.Context, u string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPost, u, body)
}

// putJSON returns the body of PUT url with v as its JSON body, sent with
// the bearer token.
func (c *client) putJSON(ctx context.Context, u string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPut, u, body)
}

// delete returns the body of DELETE url, sent with the bearer token.
func (c *client) delete(ctx context.Context, u string) ([]byte, error) {
	return c.do(ctx, http.MethodDelete, u, nil)
}

func (c *client) do(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if method != http.MethodGet && c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if method != http.MethodGet {
		// One key per command: the trail keeps the action once, were it
		// sent again.
		if c.key == "" {
			var k [12]byte
			_, _ = rand.Read(k[:]) // never fails
			c.key = "ndigo-cli-" + hex.EncodeToString(k[:])
		}
		req.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot reach the admin endpoints at %s: connection refused (is a node serving its admin address there? set --admin or NDIGO_ADMIN)", c.base)
		}
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the response: %w", method, u, err)
	}
	if resp.StatusCode/100 == 2 {
		return answer, nil
	}
	msg, fromAPI := serverMessage(answer)
	return nil, &statusError{method: method, url: u, code: resp.StatusCode, msg: msg, hint: c.hint(method, u, resp.StatusCode, fromAPI)}
}

// serverMessage returns the "error" of a JSON error body and true, else
// the body's first line and false: a handler without the control API
// answers its mux's plain "404 page not found".
func serverMessage(body []byte) (string, bool) {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error, true
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	if line == "" {
		return "no message", false
	}
	return line, false
}

// hint says what to do about a refusal the server's message may not
// explain from the client's side.
func (c *client) hint(method, u string, code int, fromAPI bool) string {
	switch {
	case code == http.StatusNotFound && !fromAPI && strings.HasPrefix(u, c.schedulesEndpoint("")):
		return "the node serves no such endpoint: is its ndigo a version without stored schedules?"
	case code == http.StatusNotFound && !fromAPI && strings.HasPrefix(u, c.calendarsEndpoint("")):
		return "the node serves no such endpoint: is its ndigo a version without calendars?"
	case code == http.StatusNotFound && !fromAPI:
		return "the node serves no such endpoint: is its ndigo a version without the control API?"
	case code == http.StatusUnauthorized && c.token == "":
		return "set NDIGO_ADMIN_TOKEN to the node's admin token"
	case code == http.StatusUnauthorized:
		return "the node refused the token in NDIGO_ADMIN_TOKEN"
	case code == http.StatusForbidden && method != http.MethodGet:
		return "the node has no admin token configured, so it refuses every change"
	}
	return ""
}
