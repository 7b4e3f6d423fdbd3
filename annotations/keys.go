package annotations

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ndigo/ndigo/internal/didyoumean"
	"github.com/ndigo/ndigo/scheduling"
)

// methodKey is the Scheduled tag's one key of its own: the method to run,
// which binds the func rather than setting an option. Every other key is
// one of scheduling.OptionKeys.
var methodKey = scheduling.OptionKey{Key: "method", Option: "(the func you pass)", Default: "required",
	Meaning: "the method to run: `func(context.Context) error`"}

// tagKeys returns the Scheduled tag's keys, in the documented order.
func tagKeys() []scheduling.OptionKey {
	return append([]scheduling.OptionKey{methodKey}, scheduling.OptionKeys()...)
}

// keyNames returns the tag keys' names, in order.
func keyNames() []string {
	keys := tagKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Key
	}
	return names
}

// option turns one tag pair into a scheduling option: nil for method and
// for renew:"false", a declaration error for a bad value or unknown key.
func option(p tagPair) scheduling.Option {
	names := keyNames()
	switch {
	case p.key == methodKey.Key:
		return nil
	case !slices.Contains(names, p.key):
		rule := "unknown tag key; known keys are " + strings.Join(names, ", ")
		if s := didyoumean.Closest(p.key, names); s != "" {
			rule = fmt.Sprintf("unknown tag key; did you mean %q?", s)
		}
		return invalid(p.key, p.value, rule)
	}
	return scheduling.KeyOption(p.key, p.value)
}

// optionsTable returns the Markdown table of the tag keys that docs/TASKS.md
// shows.
func optionsTable() string {
	var b strings.Builder
	b.WriteString("| tag key | builder option | default | meaning |\n|---|---|---|---|\n")
	for _, k := range tagKeys() {
		opt := k.Option
		if k.Key != methodKey.Key {
			opt = "`" + opt + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Key, opt, k.Default, k.Meaning)
	}
	return b.String()
}
