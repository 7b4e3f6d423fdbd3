// Package config loads an application's typed configuration from a YAML file
// and environment variables, and validates it at startup.
//
// The configuration is a struct of the application's choosing. With ndigo
// it embeds app.Framework, the settings ndigo itself reads, with
// `yaml:",inline"` so that its keys sit at the top level of the file, and
// adds the application's own sections beside it:
//
//	type Config struct {
//		app.Framework `yaml:",inline"`
//		Payroll       Payroll `yaml:"payroll"`
//	}
//
// The package knows nothing of those settings: it loads and validates any
// struct.
//
// [Load] fills it in four steps, each overriding the one before: `default`
// struct tags, the YAML file, environment variables, and then validation with
// the `validate` tags of github.com/go-playground/validator/v10. Every bad
// setting is reported at once, each error naming the key, the value and the
// rule (see [FieldError]); secrets are redacted there as everywhere (see
// [Secret] and [SecretURL]).
//
// # Struct tags
//
//   - yaml: the key, as in go.yaml.in/yaml/v3 (default: the lower-cased field
//     name); ",inline" promotes an embedded struct's keys. Keys the struct does
//     not know are errors.
//   - env: the exact environment variable name, or "-" for none. Without it,
//     the name is [LoadOptions.EnvPrefix] plus the yaml path upper-cased with
//     "." and "-" turned into "_": redis.url is NDIGO_REDIS_URL.
//   - default: the value, written as in an environment variable.
//   - validate: validator/v10 rules, and those packages add with [Rule]
//     (package app registers "listen_addr", "redis_url", "postgres_url" and
//     "lock_namespace", each defined by the package that owns the setting).
//   - secret:"true": allowed on [Secret] and [SecretURL] fields, whose types
//     already redact them.
//
// Environment variables and defaults are read as text, as
// github.com/caarlos0/env reads it: strings, booleans, integers, floats,
// time.Duration ("5s", or whole milliseconds "500", in the file too) and types
// implementing encoding.TextUnmarshaler; an empty text is the zero value.
// Lists and maps come from the file only.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
)

// LoadOptions says where [Load] reads configuration from.
type LoadOptions struct {
	// Path is the YAML file to read. Empty means no file, unless Data is set.
	Path string
	// Optional makes a file missing at Path the same as an empty one: the
	// defaults and the environment apply. Any other read error still fails.
	Optional bool
	// Data is YAML to read instead of the file at Path; Path, if set, then
	// only names it in error messages. It lets tests and embedded defaults
	// skip the file system.
	Data []byte
	// Env looks up an environment variable. Nil means os.LookupEnv.
	Env func(name string) (string, bool)
	// EnvPrefix starts every derived environment variable name, e.g.
	// "NDIGO_". Empty means no derived names at all, only those given with
	// `env` tags: unprefixed names like PATH or HOME would collide with the
	// process environment.
	EnvPrefix string
}

type loader struct {
	file    string
	sources map[string]FieldError // where each yaml path was set: Env, or File and Line
	seen    map[visit]bool
	errs    []error
}

// Load reads a T from the options' file or data and the environment, then
// validates it. T must be a struct type. Bad input returns an error wrapping
// [ErrInvalid] that names every bad setting; a file that cannot be read
// returns the file system's error; a malformed T (a misused tag) returns an
// error naming the field, which wraps neither.
func Load[T any](opts LoadOptions) (T, error) {
	cfg, _, err := loadSources[T](opts)
	return cfg, err
}

// loadSources is [Load], with the [Sources] of what it loaded.
func loadSources[T any](opts LoadOptions) (T, Sources, error) {
	var cfg T
	src, err := load(&cfg, opts)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	return cfg, src, nil
}

func load(cfg any, opts LoadOptions) (Sources, error) {
	root := reflect.ValueOf(cfg).Elem()
	if root.Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: Load[%s]: the configuration type must be a struct", root.Type())
	}
	ls, err := leaves(root.Type(), opts.EnvPrefix)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if !l.hasDef {
			continue // no struct pointer lies above a default (see readTags)
		}
		if v, _ := fieldAt(root, l.index, true); setText(v, l.def) != nil {
			return nil, fmt.Errorf("config: field %s: tag default:%q %s", l.goPath, l.def, typeRule(l.typ))
		}
	}

	data := opts.Data
	if data == nil && opts.Path != "" {
		if data, err = os.ReadFile(opts.Path); err != nil && !(opts.Optional && errors.Is(err, fs.ErrNotExist)) {
			abs, _ := filepath.Abs(opts.Path)
			wd, _ := os.Getwd()
			return nil, fmt.Errorf("config: reading %s (working directory %s): %w", abs, wd, err)
		}
	}
	ld := &loader{file: opts.Path, sources: map[string]FieldError{}, seen: map[visit]bool{}}
	if err := ld.decodeFile(data, root); err != nil {
		return nil, err
	}

	lookup := opts.Env
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, l := range ls {
		if l.env == "" {
			continue
		}
		if s, ok := lookup(l.env); ok {
			ld.sources[l.path] = FieldError{Env: l.env}
			if v, _ := fieldAt(root, l.index, true); setText(v, s) != nil {
				// s is not a secret: Secret and SecretURL take any text.
				ld.errs = append(ld.errs, &FieldError{Key: l.path, Value: s, Env: l.env, Rule: typeRule(l.typ)})
			}
		}
	}
	// The rules run even when some values did not decode, so that every
	// problem is reported at once.
	if err := errors.Join(append(ld.errs, ld.validate(cfg)...)...); err != nil {
		return nil, err
	}
	return sourcesOf(ls, ld.sources), nil
}
