package config

import (
	"log/slog"
	"net/url"
	"strings"
)

const redacted = "[REDACTED]"

// Secret is a string that never shows its value when printed, logged or
// marshaled: fmt, slog (text and JSON handlers), encoding/json and yaml all
// see "[REDACTED]" (an empty Secret prints as ""). Read the value with
// [Secret.Reveal] at the one place that needs it.
//
// A field of type Secret is redacted because of its type, so redaction holds
// even when the whole configuration struct is printed with fmt.Sprint or
// handed to slog. The `secret:"true"` tag is accepted only on Secret and
// [SecretURL] fields for that reason: a tag cannot change how fmt prints a
// plain string.
type Secret string

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String returns "[REDACTED]", or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts the %#v form too.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// LogValue implements [slog.LogValuer].
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts the value in encoding/json, yaml and slog's handlers.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// SecretURL is a URL that may carry a password, such as a Redis URL. Printed,
// logged or marshaled it shows the URL with the password replaced by
// "xxxxx" (as [url.URL.Redacted] does), so the host stays visible for
// operators. Read the full URL with [SecretURL.Reveal].
type SecretURL string

// Reveal returns the URL with its password.
func (u SecretURL) Reveal() string { return string(u) }

// String returns the URL with its password redacted. A URL that does not
// parse is redacted between "://" and its last "@", since it may still hold
// a password.
func (u SecretURL) String() string { return redactURL(string(u)) }

// GoString redacts the %#v form too.
func (u SecretURL) GoString() string { return `config.SecretURL("` + u.String() + `")` }

// LogValue implements [slog.LogValuer].
func (u SecretURL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// MarshalText redacts the password in encoding/json, yaml and slog's handlers.
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

func redactURL(s string) string {
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
		return s[:start] + redacted + s[at:]
	}
	return s
}
