// Package redact hides passwords in URLs for messages and logs.
package redact

import (
	"net/url"
	"strings"
)

// Mark replaces a secret in printed text.
const Mark = "[REDACTED]"

// URL returns s with its password redacted: as url.URL.Redacted does
// ("xxxxx") when s parses, or everything between "://" and the last "@"
// replaced by Mark when it does not, since it may still hold a password.
// Text with no "://" that holds '=' or white space (a keyword/value
// connection string, "host=h password=p") is replaced by Mark whole.
func URL(s string) string {
	if !strings.Contains(s, "://") && strings.ContainsAny(s, "= \t\n") {
		return Mark
	}
	// A password holding an unescaped '/' or '?' parses as a host and a
	// path, so an '@' the parser did not read as userinfo is distrusted too.
	if p, err := url.Parse(s); err == nil && (p.User != nil || !strings.Contains(s, "@")) {
		if _, has := p.User.Password(); has {
			return p.Redacted()
		}
		return s
	}
	start := 0 // after the scheme, if any
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	if at := strings.LastIndex(s, "@"); at >= start {
		return s[:start] + Mark + s[at:]
	}
	return s
}
