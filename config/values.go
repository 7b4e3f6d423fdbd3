package config

import (
	"encoding"
	"fmt"
	"reflect"
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
	if v.Kind() != reflect.Struct {
		return func(string) (string, bool) { return "", false }
	}
	ls, err := leaves(v.Type(), "")
	if err != nil {
		return func(string) (string, bool) { return "", false }
	}
	byPath := make(map[string]*leaf, len(ls))
	for _, l := range ls {
		byPath[l.path] = l
	}
	return func(path string) (string, bool) {
		l, ok := byPath[path]
		if !ok || l.secret {
			return "", false
		}
		fv, ok := fieldAt(v, l.index, false)
		if !ok {
			return "", false
		}
		return text(fv), true
	}
}

// text formats a setting as it would be written in an environment variable.
func text(v reflect.Value) string {
	if m, ok := v.Interface().(encoding.TextMarshaler); ok {
		if b, err := m.MarshalText(); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v.Interface())
}
