package config

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalid reports configuration that cannot be loaded: a malformed file,
// an unknown key, a value of the wrong type, or one that breaks a validation
// rule. Every error [Load] returns for bad input wraps it; most are
// [FieldError]s, joined with errors.Join when there are several.
var ErrInvalid = errors.New("config: invalid configuration")

// A FieldError is one bad setting. Its message names the key as a yaml path,
// the value (redacted if it is a [Secret] or [SecretURL]), where the value
// came from, and the rule it breaks, e.g.
//
//	config: redis.namespace "pr od" (env NDIGO_REDIS_NAMESPACE): must match [A-Za-z0-9_.-]{1,64}
type FieldError struct {
	Key   string // yaml path of the setting, e.g. "redis.url"
	Value string // the value as written, redacted if secret
	Env   string // the environment variable that set it, if one did
	File  string // the file that set it, if one did
	Line  int    // the line in File, if known
	Rule  string // the rule broken, in words

	noValue bool // the value is not a scalar, or there is none to show
}

// Error returns the message described on [FieldError].
func (e *FieldError) Error() string {
	msg := "config: " + e.Key
	if !e.noValue {
		msg += " " + strconv.Quote(e.Value)
	}
	switch {
	case e.Env != "":
		msg += " (env " + e.Env + ")"
	case e.File != "" && e.Line > 0:
		msg += fmt.Sprintf(" (%s:%d)", e.File, e.Line)
	case e.File != "":
		msg += " (" + e.File + ")"
	case e.Line > 0:
		msg += fmt.Sprintf(" (line %d)", e.Line)
	}
	return msg + ": " + e.Rule
}

// Unwrap returns [ErrInvalid].
func (e *FieldError) Unwrap() error { return ErrInvalid }
