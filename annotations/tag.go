package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ndigo/ndigo/internal/durations"
)

// A tagPair is one key:"value" pair of a struct tag.
type tagPair struct {
	key, value string
}

// parseTag splits a struct tag into its key:"value" pairs, in order. It
// follows the conventions of reflect.StructTag, but reports malformed tags
// instead of ignoring them, since a silently dropped option is a bug.
func parseTag(tag string) ([]tagPair, error) {
	var pairs []tagPair
	seen := map[string]bool{}
	for i := 0; ; {
		for i < len(tag) && tag[i] == ' ' {
			i++
		}
		if i == len(tag) {
			return pairs, nil
		}
		start := i
		for i < len(tag) && tag[i] > ' ' && tag[i] != ':' && tag[i] != '"' && tag[i] != 0x7f {
			i++
		}
		key := tag[start:i]
		if key == "" {
			return nil, fmt.Errorf("malformed tag at byte %d: want a key, found %q", start, tag[start:])
		}
		if i+1 >= len(tag) || tag[i] != ':' || tag[i+1] != '"' {
			return nil, fmt.Errorf("malformed tag at key %q: want %s:\"value\"", key, key)
		}
		i++
		qstart := i
		for i++; i < len(tag) && tag[i] != '"'; i++ {
			if tag[i] == '\\' {
				i++
			}
		}
		if i >= len(tag) {
			return nil, fmt.Errorf("malformed tag at key %q: unterminated value", key)
		}
		i++
		value, err := strconv.Unquote(tag[qstart:i])
		if err != nil {
			return nil, fmt.Errorf("malformed tag at key %q: value %s: %w", key, tag[qstart:i], err)
		}
		if seen[key] {
			return nil, fmt.Errorf("malformed tag: key %q appears twice", key)
		}
		seen[key] = true
		pairs = append(pairs, tagPair{key, value})
	}
}

// expand replaces each ${path} in s with values(path), or with the default
// of ${path:default} when values has none. from says where the result came
// from, for messages: each placeholder, the setting it read and, when
// values is a [SourceResolver] that knows it, where that was set, e.g.
// "${payroll.cron}, set by env APP_PAYROLL_CRON"; "" when s has none.
func expand(s string, values Resolver) (string, string, error) {
	if !strings.Contains(s, "${") {
		return s, "", nil
	}
	var b strings.Builder
	var froms []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), strings.Join(froms, "; "), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", "", fmt.Errorf("unterminated placeholder %q: want ${path}", s[i:])
		}
		inner := s[i+2 : i+end]
		path, def, hasDef := strings.Cut(inner, ":")
		if path == "" {
			return "", "", fmt.Errorf("placeholder ${%s} names no setting", inner)
		}
		var v string
		var ok bool
		if values != nil {
			v, ok = values.Lookup(path)
		}
		from := "${" + inner + "}"
		switch {
		case ok:
			if sr, isSR := values.(SourceResolver); isSR {
				if src, known := sr.Source(path); known && src != "" {
					from += ", set by " + src
				}
			}
		case hasDef:
			v = def
			from += fmt.Sprintf(", the placeholder's default: no setting %s", path)
		case values == nil:
			return "", "", fmt.Errorf("placeholder ${%s} needs configuration: provide an annotations.Resolver (app.Module does, from config.Module), or use TasksWithValues", path)
		default:
			return "", "", fmt.Errorf("placeholder ${%s}: no setting %s in the configuration (a default is written ${%s:value})", path, path, path)
		}
		froms = append(froms, from)
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

// ParseDuration parses a duration in either of two forms: a Go duration
// such as "5s" or "1m30s", or a whole number of milliseconds such as "500".
// Surrounding spaces are ignored.
func ParseDuration(s string) (time.Duration, error) { return durations.Parse(s) }
