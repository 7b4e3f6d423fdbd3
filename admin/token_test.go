package admin

import (
	"net/http"
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
