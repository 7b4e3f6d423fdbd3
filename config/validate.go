package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
)

var namespacePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// validate is shared: validator caches struct metadata and is safe for
// concurrent use.
var validate = newValidator()

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// Both registrations only fail on an empty tag name or a nil function.
	_ = v.RegisterValidation("redis_url", func(fl validator.FieldLevel) bool {
		u, err := url.Parse(fl.Field().String())
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return false
		}
		// go-redis reads the path as the database number.
		db := strings.Trim(u.Path, "/")
		_, err = strconv.ParseUint(db, 10, 32)
		return db == "" || err == nil
	})
	_ = v.RegisterValidation("lock_namespace", func(fl validator.FieldLevel) bool {
		return namespacePattern.MatchString(fl.Field().String())
	})
	_ = v.RegisterValidation("listen_addr", func(fl validator.FieldLevel) bool {
		_, port, err := net.SplitHostPort(fl.Field().String())
		if err != nil {
			return false
		}
		_, err = strconv.ParseUint(port, 10, 16)
		return err == nil
	})
	return v
}

// validate runs the validate tags over cfg and reports each failure against
// its yaml path and source.
func (ld *loader) validate(cfg any, t reflect.Type, ls map[string]*leaf) (err error) {
	defer func() {
		// validator panics on malformed tags (an unknown rule, oneof without
		// values): a programming error, but one that must not crash startup
		// with a stack trace instead of a message.
		if r := recover(); r != nil {
			err = fmt.Errorf("config: bad validate tag in %s: %v", t, r)
		}
	}()
	verr := validate.Struct(cfg)
	var fes validator.ValidationErrors
	if !errors.As(verr, &fes) {
		if verr != nil {
			return fmt.Errorf("config: %w", verr)
		}
		return nil
	}
	errs := make([]error, 0, len(fes))
	for _, fe := range fes {
		gp := strings.TrimPrefix(fe.StructNamespace(), t.Name()+".")
		e := &FieldError{Key: gp, Value: fmt.Sprint(fe.Value()), Rule: ruleWords(fe), noValue: strings.HasPrefix(fe.Tag(), "required")}
		if l, ok := ls[gp]; ok {
			e.Key = l.path
		} else {
			e.Key = yamlPath(t, gp)
		}
		src := ld.source(e.Key)
		e.Env, e.File, e.Line = src.env, src.file, src.line
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// ruleWords says in words what a validator rule asks of a value.
func ruleWords(fe validator.FieldError) string {
	p := fe.Param()
	unit := ""
	switch fe.Kind() {
	case reflect.String:
		unit = " characters long"
	case reflect.Slice, reflect.Map, reflect.Array:
		unit = " items"
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "oneof":
		return "must be one of " + strings.Join(strings.Fields(p), ", ")
	case "redis_url":
		return "must be a redis:// or rediss:// URL with a host and an optional /database number"
	case "timezone":
		return "must be an IANA time zone name, such as Europe/Paris or UTC"
	case "listen_addr":
		return "must be host:port or :port, such as 127.0.0.1:8081 (port 0 picks a free one)"
	case "required_with":
		return "is required when " + strings.ToLower(p) + " is set"
	case "lock_namespace":
		return "must match " + strings.Trim(namespacePattern.String(), "^$")
	case "min", "gte":
		return "must be at least " + p + unit
	case "max", "lte":
		return "must be at most " + p + unit
	case "gt":
		return "must be more than " + p + unit
	case "lt":
		return "must be less than " + p + unit
	case "len":
		return "must be exactly " + p + unit
	case "eq":
		return "must equal " + p
	case "ne":
		return "must not equal " + p
	case "url":
		return "must be a URL"
	case "hostname":
		return "must be a host name"
	case "hostname_port":
		return "must be host:port"
	case "ip":
		return "must be an IP address"
	case "email":
		return "must be an email address"
	case "alphanum":
		return "must hold only letters and digits"
	case "printascii":
		return "must hold only printable ASCII characters"
	}
	if p != "" {
		return "must satisfy " + fe.Tag() + "=" + p
	}
	return "must satisfy " + fe.Tag()
}

// source returns where the value at path came from or, for a value that was
// never set (a missing required key), where its nearest enclosing section
// was written.
func (ld *loader) source(path string) source {
	for {
		if src, ok := ld.sources[path]; ok {
			return src
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return source{}
		}
		path = path[:i]
	}
}

// yamlPath turns a validator struct namespace below t, such as
// "Payroll.Accounts[0].Name", into its yaml path, "payroll.accounts[0].name".
func yamlPath(t reflect.Type, goNS string) string {
	var path string
	for seg := range strings.SplitSeq(goNS, ".") {
		name, subs, _ := strings.Cut(seg, "[")
		t = deref(t)
		if t.Kind() != reflect.Struct {
			return goNS
		}
		sf, ok := t.FieldByName(name)
		if !ok || len(sf.Index) != 1 {
			return goNS
		}
		key, flags, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !hasFlag(flags, "inline") {
			if key == "" {
				key = strings.ToLower(sf.Name)
			}
			path = join(path, key, ".")
		}
		t = sf.Type
		if subs != "" {
			path += "[" + subs
			for range strings.Count(subs, "[") + 1 {
				if t = deref(t); t.Kind() != reflect.Slice && t.Kind() != reflect.Array && t.Kind() != reflect.Map {
					return goNS
				}
				t = t.Elem()
			}
		}
	}
	return path
}
