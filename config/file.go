package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ndigo/ndigo/internal/didyoumean"
	"github.com/ndigo/ndigo/internal/durations"
)

var yamlUnmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decodeFile decodes the one YAML document in data into out. A walk of its
// node tree against out's type first reports unknown keys and mistyped
// values with their yaml paths (yaml's own errors name Go types instead),
// and rewrites whole-millisecond durations, which yaml refuses, as "500ms".
func (ld *loader) decodeFile(data []byte, out reflect.Value) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	name := cmp.Or(ld.file, "YAML data")
	var doc, more yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil // an empty file sets nothing
	} else if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	switch err := dec.Decode(&more); {
	case err == nil:
		return fmt.Errorf("%w: %s: line %d: a second YAML document; the file must hold one", ErrInvalid, name, more.Line)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	ld.walk(&doc, out.Type(), "")
	// After errors in the walk (which the caller returns), the rest is
	// decoded all the same, so that its rules are checked in the same run.
	if err := doc.Decode(out.Addr().Interface()); err != nil && len(ld.errs) == 0 {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	return nil
}

type visit struct {
	n *yaml.Node
	t reflect.Type
}

func (ld *loader) walk(n *yaml.Node, t reflect.Type, path string) {
	switch {
	case n.Kind == yaml.DocumentNode && len(n.Content) > 0:
		n = n.Content[0]
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		n = n.Alias
	}
	// An anchored node reached again through aliases has been checked
	// already; walking it again would make alias bombs exponential.
	if ld.seen[visit{n, t}] {
		return
	}
	ld.seen[visit{n, t}] = true
	t = deref(t)
	switch k := t.Kind(); {
	case n.ShortTag() == "!!null", reflect.PointerTo(t).Implements(yamlUnmarshalerType):
		return // yaml leaves the value as it was, or the type reads its own node
	case t == durationType && n.Kind == yaml.ScalarNode:
		d, err := durations.Parse(n.Value)
		if err != nil {
			ld.fail(n, t, path)
			return
		}
		n.Value, n.Tag, n.Style = d.String(), "!!str", 0
		return
	case reflect.PointerTo(t).Implements(textUnmarshalerType): // a scalar, checked below
	case k == reflect.Struct && n.Kind == yaml.MappingNode:
		ld.walkStruct(n, t, path)
		return
	case k == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			ld.walk(n.Content[i+1], t.Elem(), ld.at(join(path, n.Content[i].Value), n.Content[i]))
		}
		return
	case (k == reflect.Slice || k == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			ld.walk(c, t.Elem(), ld.at(fmt.Sprintf("%s[%d]", path, i), c))
		}
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		ld.fail(n, t, path)
	}
}

func (ld *loader) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	fields, err := yamlFields(t)
	if err != nil {
		ld.errs = append(ld.errs, err)
		return
	}
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i], _ = yamlKey(f)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		j := slices.Index(keys, k.Value)
		switch {
		case k.ShortTag() == "!!merge" && v.Kind == yaml.SequenceNode:
			for _, c := range v.Content { // "<<" merges mappings into this one
				ld.walk(c, t, path)
			}
		case k.ShortTag() == "!!merge":
			ld.walk(v, t, path)
		case j >= 0:
			ld.walk(v, fields[j].Type, ld.at(join(path, k.Value), k))
		default:
			rule := "unknown key; "
			if s := didyoumean.Closest(k.Value, keys); s != "" {
				rule += fmt.Sprintf("did you mean %q? ", s)
			}
			ld.errs = append(ld.errs, &FieldError{Key: join(path, k.Value), File: ld.file, Line: k.Line, noValue: true,
				Rule: rule + "known keys here: " + strings.Join(keys, ", ")})
		}
	}
}

// at records that the file sets path at n's line, and returns path.
func (ld *loader) at(path string, n *yaml.Node) string {
	ld.sources[path] = FieldError{File: ld.file, Line: n.Line}
	return path
}

// fail reports that n, at path, cannot be read as a t.
func (ld *loader) fail(n *yaml.Node, t reflect.Type, path string) {
	e := &FieldError{Key: cmp.Or(path, "the document"), File: ld.file, Line: n.Line, Rule: typeRule(t), noValue: n.Kind != yaml.ScalarNode}
	switch n.Kind {
	case yaml.ScalarNode:
		e.Value = n.Value // not a secret: Secret and SecretURL take any scalar
	case yaml.MappingNode:
		e.Rule = "is a mapping but " + e.Rule
	case yaml.SequenceNode:
		e.Rule = "is a list but " + e.Rule
	}
	ld.errs = append(ld.errs, e)
}

// typeRule says in words what a value of type t must look like.
func typeRule(t reflect.Type) string {
	switch k := t.Kind(); {
	case t == durationType:
		return `must be a duration like "5s" or "1m30s", or whole milliseconds like "500"`
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return "must be a valid " + t.String()
	case k == reflect.String:
		return "must be a single value"
	case k == reflect.Bool:
		return "must be true or false"
	case k >= reflect.Int && k <= reflect.Int64:
		return fmt.Sprintf("must be an integer that fits in %d bits", t.Bits())
	case k >= reflect.Uint && k <= reflect.Uintptr:
		return fmt.Sprintf("must be a non-negative integer that fits in %d bits", t.Bits())
	case k == reflect.Float32 || k == reflect.Float64:
		return "must be a number"
	case k == reflect.Struct || k == reflect.Map:
		return "must be a mapping of keys to values"
	case k == reflect.Slice || k == reflect.Array:
		return "must be a list"
	}
	return "must be a valid " + t.String()
}
