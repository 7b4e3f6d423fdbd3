package config

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
)

// Values looks a loaded setting up by its yaml path, such as "payroll.cron",
// and returns it as text. It backs the ${payroll.cron} placeholders of
// package annotations, the way Spring's @Scheduled(cron = "${...}") reads its
// environment. Secret settings are never returned.
type Values func(path string) (string, bool)

// Lookup returns v(path); a nil Values has no settings. It makes Values a
// resolver of placeholders for package annotations.
func (v Values) Lookup(path string) (string, bool) {
	if v == nil {
		return "", false
	}
	return v(path)
}

// ValuesOf returns the Values of cfg, a configuration struct (or a pointer
// to one) as Load returns it. Anything else has no values.
func ValuesOf(cfg any) Values {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	var ls []*leaf
	if v.Kind() == reflect.Struct {
		ls, _ = leaves(v.Type(), "")
	}
	return func(path string) (string, bool) {
		i := slices.IndexFunc(ls, func(l *leaf) bool { return l.path == path && !l.secret })
		if i < 0 {
			return "", false
		}
		fv, ok := fieldAt(v, ls[i].index, false)
		if !ok {
			return "", false
		}
		// The setting as it would be written in an environment variable.
		if m, ok := fv.Interface().(encoding.TextMarshaler); ok {
			if b, err := m.MarshalText(); err == nil {
				return string(b), true
			}
		}
		return fmt.Sprint(fv.Interface()), true
	}
}

// Sources says where a loaded setting's value came from, by its yaml path,
// as a phrase for messages: "env APP_PAYROLL_CRON", "app.yaml:3" (the file
// and line), "line 3 of the YAML data" (LoadOptions.Data without a Path),
// "the default tag of Payroll.Cron", or "no file, variable or default: the
// zero value". It names no value, so it answers for secret settings too.
// [Module] provides it beside [Values]; package app uses it to say, when a
// placeholder's value is bad, where that value was set.
type Sources func(path string) (string, bool)

// Source returns s(path); a nil Sources knows no setting. It makes Sources
// the source half of a resolver of placeholders for package annotations.
func (s Sources) Source(path string) (string, bool) {
	if s == nil {
		return "", false
	}
	return s(path)
}

// sourcesOf returns the Sources of a load of the settings ls, where set
// holds the file's and the environment's.
func sourcesOf(ls []*leaf, set map[string]FieldError) Sources {
	return func(path string) (string, bool) {
		i := slices.IndexFunc(ls, func(l *leaf) bool { return l.path == path })
		if i < 0 {
			return "", false
		}
		src, ok := set[path]
		switch {
		case ok && src.Env != "":
			return "env " + src.Env, true
		case ok && src.File != "":
			return fmt.Sprintf("%s:%d", src.File, src.Line), true
		case ok:
			return fmt.Sprintf("line %d of the YAML data", src.Line), true
		case ls[i].hasDef:
			return "the default tag of " + ls[i].goPath, true
		}
		return "no file, variable or default: the zero value", true
	}
}
