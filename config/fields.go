package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	secretType          = reflect.TypeFor[Secret]()
	secretURLType       = reflect.TypeFor[SecretURL]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// A field is one struct field as yaml sees it: its key, and the index path
// from the enclosing struct (longer than one step for fields promoted from
// an ,inline struct).
type field struct {
	key    string
	index  []int
	goPath string // Go field names from the enclosing struct, for validator namespaces
	sf     reflect.StructField
}

// yamlFields lists the fields of struct type t under the rules of yaml v3:
// the key is the yaml tag's name or the lower-cased field name, "-" skips a
// field, and ,inline promotes a struct's fields. It keeps to yaml's rules so
// that unknown-key checks, env names and yaml's own decoding agree.
func yamlFields(t reflect.Type) ([]field, error) {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		name, flags, _ := strings.Cut(tag, ",")
		if !sf.IsExported() {
			if hasFlag(flags, "inline") {
				return nil, fmt.Errorf("config: field %s.%s: an ,inline struct must be exported, or its fields cannot be set", t, sf.Name)
			}
			continue
		}
		if tag == "-" {
			continue
		}
		if !hasFlag(flags, "inline") {
			if name == "" {
				name = strings.ToLower(sf.Name)
			}
			out = append(out, field{key: name, index: []int{i}, goPath: sf.Name, sf: sf})
			continue
		}
		// Inline pointers are refused: yaml would allocate them, leaving
		// their defaults unapplied.
		if sf.Type.Kind() != reflect.Struct {
			return nil, fmt.Errorf("config: field %s.%s: ,inline is supported on struct values only, not %s", t, sf.Name, sf.Type)
		}
		inner, err := yamlFields(sf.Type)
		if err != nil {
			return nil, err
		}
		for _, f := range inner {
			f.index = append([]int{i}, f.index...)
			f.goPath = sf.Name + "." + f.goPath
			out = append(out, f)
		}
	}
	return out, nil
}

func hasFlag(flags, want string) bool {
	for f := range strings.SplitSeq(flags, ",") {
		if f == want {
			return true
		}
	}
	return false
}

// isLeaf reports whether a value of type t is read as one scalar rather than
// walked field by field.
func isLeaf(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	return t.Kind() != reflect.Struct
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// A leaf is a scalar setting reachable through structs from the root: what an
// environment variable can set and what validation errors are reported on.
type leaf struct {
	path   string // yaml path, e.g. "redis.url"
	env    string // environment variable name, or "" if env cannot set it
	index  []int
	typ    reflect.Type // field type, pointers removed
	def    string
	hasDef bool
	secret bool
}

// leaves walks struct type t and returns its settings keyed by Go path
// (e.g. "Framework.Redis.URL"), the namespace validator reports.
func leaves(t reflect.Type, prefix string) (map[string]*leaf, error) {
	out := map[string]*leaf{}
	if err := walkLeaves(t, "", "", nil, "", prefix, map[reflect.Type]bool{}, out); err != nil {
		return nil, err
	}
	byEnv := map[string]string{}
	for gp, l := range out {
		if l.env == "" {
			continue
		}
		if other, dup := byEnv[l.env]; dup {
			a, b := min(gp, other), max(gp, other)
			return nil, fmt.Errorf("config: fields %s and %s both read environment variable %s; give one an env tag", a, b, l.env)
		}
		byEnv[l.env] = gp
	}
	return out, nil
}

// ptr is the Go path of the first pointer-to-struct field above t, if any.
func walkLeaves(t reflect.Type, path, goPath string, index []int, ptr, prefix string, active map[reflect.Type]bool, out map[string]*leaf) error {
	if active[t] {
		return nil // a recursive type: settings below the first level are file-only
	}
	active[t] = true
	defer delete(active, t)
	fields, err := yamlFields(t)
	if err != nil {
		return err
	}
	for _, f := range fields {
		p := join(path, f.key, ".")
		gp := join(goPath, f.goPath, ".")
		idx := append(append([]int(nil), index...), f.index...)
		ft := deref(f.sf.Type)
		if !isLeaf(ft) {
			sub := ptr
			if sub == "" && f.sf.Type.Kind() == reflect.Pointer {
				sub = gp
			}
			if err := walkLeaves(ft, p, gp, idx, sub, prefix, active, out); err != nil {
				return err
			}
			continue
		}
		l := &leaf{path: p, index: idx, typ: ft, secret: ft == secretType || ft == secretURLType}
		if v, ok := f.sf.Tag.Lookup("secret"); ok {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("config: field %s: tag secret:%q must be true or false", gp, v)
			}
			if on && !l.secret {
				return fmt.Errorf("config: field %s: tag secret:\"true\" needs type config.Secret or config.SecretURL (not %s), so that printing it redacts it", gp, ft)
			}
		}
		if settable(ft) && prefix != "" {
			l.env = prefix + envName(p)
		}
		if v, ok := f.sf.Tag.Lookup("env"); ok {
			switch {
			case v == "-":
				l.env = ""
			case !settable(ft):
				return fmt.Errorf("config: field %s: tag env:%q on type %s, which cannot be read from text", gp, v, ft)
			default:
				l.env = v
			}
		}
		l.def, l.hasDef = f.sf.Tag.Lookup("default")
		if l.hasDef && !settable(ft) {
			return fmt.Errorf("config: field %s: tag default:%q on type %s, which cannot be read from text", gp, l.def, ft)
		}
		if l.hasDef && ptr != "" {
			// yaml allocates such a section without defaults; the tag would
			// work only when env creates it, which is worse than never.
			return fmt.Errorf("config: field %s: tag default:%q under pointer field %s, where defaults cannot apply; make %[3]s a value", gp, l.def, ptr)
		}
		out[gp] = l
	}
	return nil
}

func join(a, b, sep string) string {
	if a == "" {
		return b
	}
	return a + sep + b
}

// envName turns a yaml path into the conventional variable name:
// "redis.url" -> "REDIS_URL".
func envName(path string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '.' || r == '-':
			return '_'
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, path)
}

// settable reports whether setText can parse a value of type t.
func settable(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// setText parses s into v, a settable value of a settable type. On failure
// it returns the rule the text broke, in words.
func setText(v reflect.Value, s string) (rule string, ok bool) {
	t := v.Type()
	if t == durationType {
		d, err := parseDuration(s)
		if err != nil {
			return durationRule, false
		}
		v.SetInt(int64(d))
		return "", true
	}
	if u, isU := v.Addr().Interface().(encoding.TextUnmarshaler); isU {
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return "must parse as " + t.String() + ": " + err.Error(), false
		}
		return "", true
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return "must be true or false", false
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return fmt.Sprintf("must be an integer that fits in %d bits", t.Bits()), false
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			return fmt.Sprintf("must be a non-negative integer that fits in %d bits", t.Bits()), false
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return "must be a number", false
		}
		v.SetFloat(f)
	default:
		return "cannot be read from text", false
	}
	return "", true
}

const durationRule = `must be a duration like "5s" or "1m30s", or whole milliseconds like "500"`

// parseDuration reads "5s"-style durations and, because operators often
// write timeouts as plain numbers, whole milliseconds ("500").
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > int64(time.Duration(1<<63-1)/time.Millisecond) || n < -int64(time.Duration(1<<63-1)/time.Millisecond) {
			return 0, strconv.ErrRange
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}

// fieldAt returns the field of v at index, dereferencing pointers and
// allocating the leaf's own nil pointer. Nil pointers to structs on the way
// are allocated only if alloc is set, so that defaults do not conjure up
// optional sections that only the file or env should create; it returns
// false if it stopped at one.
func fieldAt(v reflect.Value, index []int, alloc bool) (reflect.Value, bool) {
	for _, i := range index {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !alloc {
					return v, false
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	return v, true
}
