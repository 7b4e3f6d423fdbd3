package config

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	envlib "github.com/caarlos0/env/v11"

	"github.com/ndigo/ndigo/internal/durations"
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	secretType          = reflect.TypeFor[Secret]()
	secretURLType       = reflect.TypeFor[SecretURL]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// yamlKey returns the key yaml v3 reads sf under (its tag's name, or the
// lower-cased field name; "-" for none), and whether it is ,inline.
func yamlKey(sf reflect.StructField) (key string, inline bool) {
	key, flags, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	inline = slices.Contains(strings.Split(flags, ","), "inline")
	if key == "" && !inline {
		key = strings.ToLower(sf.Name)
	}
	return key, inline
}

// yamlFields lists the fields of struct type t under the rules of yaml v3,
// with those of ,inline structs promoted, so that unknown-key checks, env
// names and yaml's own decoding agree. The Index of each is from t, and its
// Name the Go path from t (e.g. "Server.Addr").
func yamlFields(t reflect.Type) ([]reflect.StructField, error) {
	var out []reflect.StructField
	for i := range t.NumField() {
		sf := t.Field(i)
		key, inline := yamlKey(sf)
		switch {
		case inline && !sf.IsExported():
			return nil, fmt.Errorf("config: field %s.%s: an ,inline struct must be exported, or its fields cannot be set", t, sf.Name)
		case !sf.IsExported() || key == "-":
			continue
		case !inline:
			out = append(out, sf)
			continue
		case sf.Type.Kind() != reflect.Struct:
			// yaml would allocate an inline pointer, leaving its defaults unapplied.
			return nil, fmt.Errorf("config: field %s.%s: ,inline is supported on struct values only, not %s", t, sf.Name, sf.Type)
		}
		inner, err := yamlFields(sf.Type)
		if err != nil {
			return nil, err
		}
		for _, f := range inner {
			f.Index, f.Name = append([]int{i}, f.Index...), sf.Name+"."+f.Name
			out = append(out, f)
		}
	}
	return out, nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func join(path, key string) string { return strings.TrimPrefix(path+"."+key, ".") }

// A leaf is a scalar setting reachable through structs from the root: what a
// default or an environment variable can set, and what [Values] reads.
type leaf struct {
	path, goPath, env string // "redis.url", "Framework.Redis.URL", "NDIGO_REDIS_URL" or "" for none
	index             []int
	typ               reflect.Type // field type, pointers removed
	def               string
	hasDef, secret    bool
}

// leaves lists the settings of struct type t, checking their tags.
func leaves(t reflect.Type, prefix string) ([]*leaf, error) {
	var out []*leaf
	byEnv := map[string]string{}
	active := map[reflect.Type]bool{}
	// ptr is the Go path of the first pointer-to-struct field above t, if any.
	var walk func(t reflect.Type, path, goPath string, index []int, ptr string) error
	walk = func(t reflect.Type, path, goPath string, index []int, ptr string) error {
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
			key, _ := yamlKey(f)
			l := &leaf{path: join(path, key), goPath: join(goPath, f.Name), index: append(slices.Clone(index), f.Index...), typ: deref(f.Type)}
			if l.typ.Kind() == reflect.Struct && !settable(l.typ) {
				sub := ptr
				if sub == "" && f.Type.Kind() == reflect.Pointer {
					sub = l.goPath
				}
				if err := walk(l.typ, l.path, l.goPath, l.index, sub); err != nil {
					return err
				}
				continue
			}
			if err := l.readTags(f.Tag, prefix, ptr); err != nil {
				return err
			}
			if other, dup := byEnv[l.env]; dup && l.env != "" {
				return fmt.Errorf("config: fields %s and %s both read environment variable %s; give one an env tag", other, l.goPath, l.env)
			}
			byEnv[l.env] = l.goPath
			out = append(out, l)
		}
		return nil
	}
	if err := walk(t, "", "", nil, ""); err != nil {
		return nil, err
	}
	return out, nil
}

// readTags reads the leaf's secret, env and default tags.
func (l *leaf) readTags(tag reflect.StructTag, prefix, ptr string) error {
	l.secret = l.typ == secretType || l.typ == secretURLType
	v, ok := tag.Lookup("secret")
	if ok {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("config: field %s: tag secret:%q must be true or false", l.goPath, v)
		}
		if on && !l.secret {
			return fmt.Errorf("config: field %s: tag secret:\"true\" needs type config.Secret or config.SecretURL (not %s), so that printing it redacts it", l.goPath, l.typ)
		}
	}
	l.env, ok = tag.Lookup("env")
	if !ok && settable(l.typ) && prefix != "" {
		l.env = prefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(l.path))
	}
	if l.env == "-" {
		l.env = ""
	}
	l.def, l.hasDef = tag.Lookup("default")
	switch {
	case !settable(l.typ) && (l.env != "" || l.hasDef):
		return fmt.Errorf("config: field %s: tag %s on type %s, which cannot be read from text", l.goPath, tag, l.typ)
	case l.hasDef && ptr != "":
		// yaml allocates such a section without defaults; the tag would
		// work only when env creates it, which is worse than never.
		return fmt.Errorf("config: field %s: tag default:%q under pointer field %s, where defaults cannot apply; make %[3]s a value", l.goPath, l.def, ptr)
	}
	return nil
}

// settable reports whether setText can read a value of type t.
func settable(t reflect.Type) bool {
	k := t.Kind()
	return reflect.PointerTo(t).Implements(textUnmarshalerType) || k == reflect.String || k == reflect.Bool ||
		k >= reflect.Int && k <= reflect.Uint64 || k == reflect.Float32 || k == reflect.Float64
}

// envParsers are where config reads text unlike caarlos0/env: durations may
// be whole milliseconds, and int and uint have 64 bits, as in yaml.
var envParsers = map[reflect.Type]envlib.ParserFunc{
	durationType:            func(s string) (any, error) { return durations.Parse(s) },
	reflect.TypeFor[int]():  func(s string) (any, error) { return strconv.Atoi(s) },
	reflect.TypeFor[uint](): func(s string) (any, error) { n, err := strconv.ParseUint(s, 10, 0); return uint(n), err },
}

// setText sets v, of a settable type, from s as caarlos0/env reads an
// environment variable into a field of v's type: "" is the zero value.
func setText(v reflect.Value, s string) error {
	box := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: v.Type(), Tag: `env:"V"`}}))
	err := envlib.ParseWithOptions(box.Interface(), envlib.Options{Environment: map[string]string{"V": s}, FuncMap: envParsers})
	if err == nil {
		v.Set(box.Elem().Field(0))
	}
	return err
}

// fieldAt returns the field of v at index, through pointers. A nil pointer
// on the way, or the field's own, is allocated if alloc is set, and
// otherwise ends the walk with false.
func fieldAt(v reflect.Value, index []int, alloc bool) (reflect.Value, bool) {
	for i := 0; ; i++ {
		for ; v.Kind() == reflect.Pointer; v = v.Elem() {
			if v.IsNil() && !alloc {
				return v, false
			}
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
		}
		if i == len(index) {
			return v, true
		}
		v = v.Field(index[i])
	}
}
