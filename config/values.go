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
