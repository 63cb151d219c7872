package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// decodeArgs decodes raw into a new value of type t (a struct), strictly: an
// unknown argument, a wrong type, a missing required argument, invalid UTF-8
// or a NUL byte in a string is a KindInvalid error naming the field.
func decodeArgs(t reflect.Type, required []string, raw []byte) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return nil, Invalid("", "the arguments are not valid UTF-8")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, Invalid("", "the arguments must be a JSON object: %s", jsonProblem(err))
	}
	if fields == nil {
		return nil, Invalid("", "the arguments must be a JSON object, not null")
	}
	known := jsonFields(t)
	for name := range fields {
		if _, ok := known[name]; !ok {
			return nil, Invalid(name, "unknown argument; GET /v1/tools lists each tool's arguments")
		}
	}
	for _, name := range required {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return nil, Invalid(name, "required argument is missing")
		}
	}
	for name, v := range fields {
		if bytes.Contains(v, []byte(`\u0000`)) {
			return nil, Invalid(name, "must not contain a NUL character")
		}
	}
	ptr := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ptr.Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, Invalid(te.Field, "must be %s, not %s", typeName(te.Type), te.Value)
		}
		return nil, Invalid("", "%s", jsonProblem(err))
	}
	if v, ok := ptr.Interface().(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return ptr.Interface(), nil
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("expected %s, got %s", typeName(te.Type), te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

// jsonFields returns the JSON names of t's fields, following embedded structs.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// schemaFor infers the JSON Schema of an argument struct. Fields without
// omitempty are required; the jsonschema tag is the description.
func schemaFor(t reflect.Type) (*jsonschema.Schema, []string, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		return nil, nil, err
	}
	return s, append([]string(nil), s.Required...), nil
}
