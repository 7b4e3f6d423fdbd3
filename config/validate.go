package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-playground/validator/v10"
)

// inlineMark names ,inline fields in validator namespaces, to be cut out.
const inlineMark = ",inline"

// validate is shared: validator caches struct metadata and is safe for
// concurrent use.
var validate = newValidator()

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// Errors name fields by their yaml keys.
	v.RegisterTagNameFunc(func(sf reflect.StructField) string {
		if key, inline := yamlKey(sf); !inline {
			return key
		}
		return inlineMark
	})
	return v
}

// checks are the rules registered with [Rule], by tag.
var checks = map[string]func(string) error{}

// Rule registers a validate tag: a field with `validate:"tag"` passes when
// check returns nil for its text, and a failure's rule, in messages, is the
// text of check's error. It lets the package that owns a rule (a driver's
// namespace syntax, say) state it once for configuration too. Register
// rules in an init function: Rule is not safe to call while Load runs. It
// panics on an empty tag or a nil check, as validator does.
func Rule(tag string, check func(value string) error) {
	if err := validate.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
		return check(fl.Field().String()) == nil
	}); err != nil {
		panic("config.Rule: " + err.Error())
	}
	checks[tag] = check
}

// validate runs the validate tags over cfg and reports each failure against
// its yaml path and source.
func (ld *loader) validate(cfg any) (errs []error) {
	t := reflect.TypeOf(cfg).Elem()
	defer func() {
		// validator panics on malformed tags (an unknown rule, oneof without
		// values): a programming error, but one that must not crash startup
		// with a stack trace instead of a message.
		if r := recover(); r != nil {
			errs = []error{fmt.Errorf("config: bad validate tag in %s: %v", t, r)}
		}
	}()
	err := validate.Struct(cfg)
	var fes validator.ValidationErrors
	if err != nil && !errors.As(err, &fes) {
		return []error{fmt.Errorf("config: %w", err)}
	}
	for _, fe := range fes {
		key := strings.ReplaceAll(strings.TrimPrefix(fe.Namespace(), t.Name()+"."), inlineMark+".", "")
		if slices.ContainsFunc(ld.errs, func(e error) bool { d, ok := e.(*FieldError); return ok && d.Key == key }) {
			continue // a value that did not decode is reported for that alone
		}
		e := ld.source(key)
		e.Key, e.Value, e.Rule, e.noValue = key, fmt.Sprint(fe.Value()), ruleWords(fe), strings.HasPrefix(fe.Tag(), "required")
		errs = append(errs, &e)
	}
	return errs
}

// rules say in words what validator rules ask of a value, with {p} the
// rule's parameter and {unit} that of the value (" items", say).
var rules = map[string]string{
	"required":      "is required",
	"required_with": "is required when {p} is set",
	"oneof":         "must be one of {p}",
	"timezone":      "must be an IANA time zone name, such as Europe/Paris or UTC",
	"min":           "must be at least {p}{unit}",
	"gte":           "must be at least {p}{unit}",
	"max":           "must be at most {p}{unit}",
	"lte":           "must be at most {p}{unit}",
	"gt":            "must be more than {p}{unit}",
	"lt":            "must be less than {p}{unit}",
	"len":           "must be exactly {p}{unit}",
	"eq":            "must equal {p}",
	"ne":            "must not equal {p}",
	"url":           "must be a URL",
	"hostname":      "must be a host name",
	"hostname_port": "must be host:port",
	"ip":            "must be an IP address",
	"email":         "must be an email address",
	"alphanum":      "must hold only letters and digits",
	"printascii":    "must hold only printable ASCII characters",
}

// ruleWords says in words what the rule fe broke asks of a value.
func ruleWords(fe validator.FieldError) string {
	p, unit := fe.Param(), ""
	switch fe.Kind() {
	case reflect.String:
		unit = " characters long"
	case reflect.Slice, reflect.Map, reflect.Array:
		unit = " items"
	}
	switch fe.Tag() {
	case "oneof":
		p = strings.Join(strings.Fields(p), ", ")
	case "required_with":
		p = strings.ToLower(p)
	}
	if check, ok := checks[fe.Tag()]; ok {
		if err := check(reflect.ValueOf(fe.Value()).String()); err != nil {
			return err.Error()
		}
	}
	if words, ok := rules[fe.Tag()]; ok {
		return strings.NewReplacer("{p}", p, "{unit}", unit).Replace(words)
	}
	return "must satisfy " + strings.TrimSuffix(fe.Tag()+"="+p, "=")
}

// source returns where the value at path came from or, for a value that was
// never set (a missing required key), where its nearest enclosing section
// was written.
func (ld *loader) source(path string) FieldError {
	for {
		if src, ok := ld.sources[path]; ok || path == "" {
			return src
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
}
