package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ndigo/ndigo/internal/didyoumean"
)

var yamlUnmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decodeFile decodes one YAML document from data into out. Before yaml
// decodes it, a walk of the node tree against out's type rejects unknown
// keys and mistyped values with their yaml paths (yaml's own errors name Go
// types instead), and rewrites plain-millisecond durations, which yaml
// refuses, into "500ms" form.
func (ld *loader) decodeFile(data []byte, out reflect.Value) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return fmt.Errorf("%w: %s: %v", ErrInvalid, ld.fileName(), err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil:
		return fmt.Errorf("%w: %s: line %d: a second YAML document; the file must hold one", ErrInvalid, ld.fileName(), more.Line)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %s: %v", ErrInvalid, ld.fileName(), err)
	}
	ld.walk(&doc, out.Type(), "")
	if len(ld.errs) > 0 {
		// The walk reported every unknown key and badly typed value (the
		// caller returns them); decode the rest, so that its rules are
		// checked and reported in the same run.
		_ = doc.Decode(out.Addr().Interface())
		return nil
	}
	if err := doc.Decode(out.Addr().Interface()); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, ld.fileName(), err)
	}
	return nil
}

func (ld *loader) fileName() string {
	if ld.file == "" {
		return "YAML data"
	}
	return ld.file
}

type visit struct {
	n *yaml.Node
	t reflect.Type
}

func (ld *loader) walk(n *yaml.Node, t reflect.Type, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			ld.walk(n.Content[0], t, path)
		}
		return
	case yaml.AliasNode:
		if n.Alias != nil {
			ld.walk(n.Alias, t, path)
		}
		return
	}
	// An anchored node reached again through aliases has been checked
	// already; walking it again would make alias bombs exponential.
	if ld.seen[visit{n, t}] {
		return
	}
	ld.seen[visit{n, t}] = true

	t = deref(t)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // yaml leaves the value as it was
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshalerType) {
		return // the type reads its own node
	}
	switch {
	case t == durationType:
		if n.Kind == yaml.ScalarNode {
			d, err := parseDuration(n.Value)
			if err != nil {
				ld.fail(n, t, path, durationRule)
				return
			}
			n.Value, n.Tag, n.Style = d.String(), "!!str", 0
			return
		}
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
	case t.Kind() == reflect.Struct:
		if n.Kind == yaml.MappingNode {
			ld.walkStruct(n, t, path)
			return
		}
	case t.Kind() == reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				ld.walk(n.Content[i+1], t.Elem(), ld.at(join(path, k.Value, "."), k))
			}
			return
		}
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				ld.walk(c, t.Elem(), ld.at(path+"["+strconv.Itoa(i)+"]", c))
			}
			return
		}
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		ld.fail(n, t, path, typeRule(t))
	}
}

func (ld *loader) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	fields, err := yamlFields(t)
	if err != nil {
		ld.errs = append(ld.errs, err)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			ld.walkMerge(v, t, path)
			continue
		}
		j := slices.IndexFunc(fields, func(f field) bool { return f.key == k.Value })
		if j < 0 {
			keys := make([]string, len(fields))
			for i, f := range fields {
				keys[i] = f.key
			}
			rule := "unknown key; "
			if s := didyoumean.Closest(k.Value, keys); s != "" {
				rule += fmt.Sprintf("did you mean %q? ", s)
			}
			ld.errs = append(ld.errs, &FieldError{
				Key: join(path, k.Value, "."), File: ld.file, Line: k.Line, noValue: true,
				Rule: rule + "known keys here: " + strings.Join(keys, ", "),
			})
			continue
		}
		ld.walk(v, fields[j].sf.Type, ld.at(join(path, k.Value, "."), k))
	}
}

// walkMerge checks the mappings a "<<" merge key pulls in, which yaml
// merges into the mapping that holds the key.
func (ld *loader) walkMerge(v *yaml.Node, t reflect.Type, path string) {
	if v.Kind == yaml.SequenceNode {
		for _, c := range v.Content {
			ld.walk(c, t, path)
		}
		return
	}
	ld.walk(v, t, path)
}

// at records that the file sets path at n's line, and returns path.
func (ld *loader) at(path string, n *yaml.Node) string {
	ld.sources[path] = source{file: ld.file, line: n.Line}
	return path
}

func (ld *loader) fail(n *yaml.Node, t reflect.Type, path string, rule string) {
	e := &FieldError{Key: path, File: ld.file, Line: n.Line, Rule: rule}
	switch n.Kind {
	case yaml.ScalarNode:
		e.Value = redact(t, n.Value)
	case yaml.MappingNode:
		e.Rule, e.noValue = "is a mapping but "+rule, true
	case yaml.SequenceNode:
		e.Rule, e.noValue = "is a list but "+rule, true
	default:
		e.noValue = true
	}
	if path == "" {
		e.Key = "the document"
	}
	ld.errs = append(ld.errs, e)
}

// typeRule says in words what a value of type t must look like.
func typeRule(t reflect.Type) string {
	switch {
	case t == durationType:
		return durationRule
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return "must be a valid " + t.String()
	}
	switch t.Kind() {
	case reflect.String:
		return "must be a single value"
	case reflect.Bool:
		return "must be true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("must be an integer that fits in %d bits", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("must be a non-negative integer that fits in %d bits", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "must be a number"
	case reflect.Struct, reflect.Map:
		return "must be a mapping of keys to values"
	case reflect.Slice, reflect.Array:
		return "must be a list"
	}
	return "must be a valid " + t.String()
}

// redact returns raw as it may be shown for a setting of type t.
func redact(t reflect.Type, raw string) string {
	switch t {
	case secretType:
		return Secret(raw).String()
	case secretURLType:
		return SecretURL(raw).String()
	}
	return raw
}
