package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// argSpec is what the strict decoding needs of an argument struct,
// computed once (at Register) instead of on every call.
type argSpec struct {
	t        reflect.Type
	required []string
	known    map[string]int // JSON name -> position in the bit sets below
	// reqMask has the bit of every required argument; fast is false when
	// the bit sets cannot describe t (more than 64 arguments, or a required
	// name that is not an argument), and every call takes the full path.
	reqMask uint64
	fast    bool
	// plain is true when every known name is one encoding/json decodes into
	// t, so that DisallowUnknownFields cannot refuse an object whose names
	// are all known: decodeFast may then use json.Unmarshal.
	plain bool
	// limits bound the raw JSON of named arguments (Tool.ArgLimits).
	limits map[string]ArgLimit
}

// ArgLimit bounds one argument: at most Bytes bytes of JSON, checked on
// the raw bytes before the argument is decoded. Setting names the config
// key that changes it, for the refusal's message ("" when fixed).
type ArgLimit struct {
	Bytes   int
	Setting string
}

// checkLimit refuses an argument larger than its limit with a KindTooLarge
// error (413) naming the argument and the limit.
func (s *argSpec) checkLimit(name string, val []byte) error {
	l, ok := s.limits[name]
	if !ok || len(val) <= l.Bytes {
		return nil
	}
	how := ""
	if l.Setting != "" {
		how = " (" + l.Setting + ")"
	}
	return &Error{Kind: KindTooLarge, Field: name, Msg: fmt.Sprintf("is %d bytes of JSON; the limit is %d bytes%s. Send a shorter value, or a reference to where the full one is kept.", len(val), l.Bytes, how)}
}

func newArgSpec(t reflect.Type, required []string) *argSpec {
	s := &argSpec{t: t, required: required, known: map[string]int{}, fast: true}
	for name := range jsonFields(t) {
		s.known[name] = len(s.known)
	}
	if len(s.known) > 64 {
		s.fast = false
	}
	for _, name := range required {
		i, ok := s.known[name]
		if !ok || i >= 64 {
			s.fast = false
			continue
		}
		s.reqMask |= 1 << i
	}
	// DisallowUnknownFields also refuses unknown names inside nested
	// objects decoded into structs: only flat types may go without it.
	s.plain = !nestsStruct(t, true)
	for name := range s.known {
		if !s.plain {
			break
		}
		q, err := json.Marshal(name)
		if err != nil {
			s.plain = false
			break
		}
		obj := append(append([]byte("{"), q...), ":null}"...)
		if _, err := s.decodeStruct(obj); err != nil {
			s.plain = false
			break
		}
	}
	return s
}

// nestsStruct reports whether decoding into t may decode a JSON object into
// a struct (a field of struct type, or of pointers, slices, arrays or maps
// of one), other than the struct t itself and the structs it embeds, whose
// fields are t's own (top is true for those).
func nestsStruct(t reflect.Type, top bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return nestsStruct(t.Elem(), false)
	case reflect.Interface:
		return false // decodes into maps, slices and plain values
	case reflect.Struct:
		if !top {
			return true
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if nestsStruct(f.Type, f.Anonymous && f.Type.Kind() == reflect.Struct) {
				return true
			}
		}
	}
	return false
}

// decodeArgs decodes raw into a new value of type t (a struct), strictly: an
// unknown argument, a wrong type, a missing required argument, invalid UTF-8
// or a NUL byte in a string is a KindInvalid error naming the field.
func decodeArgs(t reflect.Type, required []string, raw []byte) (any, error) {
	return newArgSpec(t, required).decode(raw)
}

// decode is decodeArgs with the struct's description computed beforehand.
//
// Most calls are well formed: for those, one scan of the object's members
// checks what the full path checks (every name an argument, no name twice,
// every required argument present and not null, no NUL escape) and one
// decoding into the struct follows. Anything else — an error to report, or
// an input the scan does not handle (an escaped name, a repeated one) —
// takes the full path, which produces the error; so the answers and errors
// are those of the full path alone.
func (s *argSpec) decode(raw []byte) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return nil, Invalid("", "the arguments are not valid UTF-8")
	}
	if err := CheckJSON("", raw); err != nil {
		return nil, err
	}
	var tooLarge error
	ptr, ok := s.decodeFast(raw, &tooLarge)
	if tooLarge != nil {
		return nil, tooLarge
	}
	if !ok {
		var err error
		if ptr, err = s.decodeFull(raw); err != nil {
			return nil, err
		}
	}
	if v, ok := ptr.Interface().(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return ptr.Interface(), nil
}

// decodeFull is the strict decoding step by step: the object's members,
// then their names, the required ones, NUL escapes, then the struct.
func (s *argSpec) decodeFull(raw []byte) (reflect.Value, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return reflect.Value{}, Invalid("", "the arguments must be a JSON object: %s", jsonProblem(err))
	}
	if fields == nil {
		return reflect.Value{}, Invalid("", "the arguments must be a JSON object, not null")
	}
	for name := range fields {
		if _, ok := s.known[name]; !ok {
			return reflect.Value{}, Invalid(name, "unknown argument; GET /v1/tools lists each tool's arguments")
		}
	}
	for _, name := range s.required {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return reflect.Value{}, Invalid(name, "required argument is missing")
		}
	}
	for name, v := range fields {
		if err := s.checkLimit(name, v); err != nil {
			return reflect.Value{}, err
		}
		if bytes.Contains(v, nulEscape) {
			return reflect.Value{}, Invalid(name, "must not contain a NUL character")
		}
	}
	ptr, err := s.decodeStruct(raw)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if n, neg := strings.CutPrefix(te.Value, "number -"); neg && isUnsigned(te.Type) {
				return reflect.Value{}, Invalid(te.Field, "must be a positive integer, not -%s", n)
			}
			return reflect.Value{}, Invalid(te.Field, "must be %s, not %s", typeName(te.Type), te.Value)
		}
		return reflect.Value{}, Invalid("", "%s", jsonProblem(err))
	}
	return ptr, nil
}

var (
	nulEscape = []byte(`\u0000`)
	jsonNull  = []byte("null")
)

// decodeFast decodes raw when it passes every check of decodeFull; ok is
// false when it may not (decodeFull then decides). An argument over its
// limit sets *tooLarge (and ok is false).
func (s *argSpec) decodeFast(raw []byte, tooLarge *error) (ptr reflect.Value, ok bool) {
	if !s.fast || bytes.Contains(raw, nulEscape) {
		return reflect.Value{}, false
	}
	var seen uint64
	ok = scanObject(raw, func(key, val []byte) bool {
		i, known := s.known[string(key)]
		if !known || seen&(1<<i) != 0 {
			return false // unknown, or named twice
		}
		if err := s.checkLimit(string(key), val); err != nil {
			*tooLarge = err
			return false
		}
		seen |= 1 << i
		return s.reqMask&(1<<i) == 0 || !bytes.Equal(val, jsonNull)
	})
	if !ok || seen&s.reqMask != s.reqMask {
		return reflect.Value{}, false
	}
	if !s.plain {
		ptr, err := s.decodeStruct(raw)
		return ptr, err == nil
	}
	// Every name is known and decodes into a field, so json.Unmarshal
	// decodes what decodeStruct would (and refuses trailing data itself).
	ptr = reflect.New(s.t)
	if err := json.Unmarshal(raw, ptr.Interface()); err != nil {
		return reflect.Value{}, false
	}
	return ptr, true
}

// decodeStruct decodes the JSON object raw into a new value of the struct,
// refusing names it does not have. It fails unless raw is exactly one JSON
// value.
func (s *argSpec) decodeStruct(raw []byte) (reflect.Value, error) {
	ptr := reflect.New(s.t)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ptr.Interface()); err != nil {
		return reflect.Value{}, err
	}
	if dec.InputOffset() != int64(len(raw)) {
		// Unreachable after decodeFull's json.Unmarshal, which refuses
		// trailing data; decodeFast then defers to decodeFull.
		return reflect.Value{}, errors.New("trailing data after the arguments")
	}
	return ptr, nil
}

// scanObject calls member with the name and the value (its exact bytes) of
// each member of raw, a JSON object, in order, while member returns true.
// It reports false when member did, or when raw is not an object it reads:
// it expects valid JSON (what it accepts is then decoded by encoding/json,
// which checks) and gives up on a name holding an escape, whose bytes are
// not the name.
func scanObject(raw []byte, member func(key, val []byte) bool) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return false
		}
		end := bytes.IndexByte(raw[i+1:], '"')
		if end < 0 {
			return false
		}
		key := raw[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i = skipSpace(raw, i+2+end)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		i = skipSpace(raw, i+1)
		j, ok := skipValue(raw, i)
		if !ok || !member(key, raw[i:j]) {
			return false
		}
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

// skipValue returns the end of the JSON value starting at raw[i].
func skipValue(raw []byte, i int) (int, bool) {
	if i >= len(raw) {
		return 0, false
	}
	switch raw[i] {
	case '"':
		return skipString(raw, i)
	case '{', '[':
		depth := 0
		for i < len(raw) {
			switch raw[i] {
			case '"':
				j, ok := skipString(raw, i)
				if !ok {
					return 0, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(raw) {
		switch raw[j] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
			return j, j > i
		}
		j++
	}
	return j, j > i
}

// skipString returns the end of the JSON string starting at raw[i] ('"').
func skipString(raw []byte, i int) (int, bool) {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++ // the escaped byte; a \uXXXX's hex digits need no care
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
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

// isUnsigned reports whether t (or what it points to) is an unsigned integer.
func isUnsigned(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
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
//
// An argument whose type has a JSONSchema method (for example a value that
// may be any JSON) is described by what that method returns.
func schemaFor(t reflect.Type) (*jsonschema.Schema, []string, error) {
	var own map[reflect.Type]*jsonschema.Schema
	for _, f := range jsonFields(t) {
		if sc, ok := reflect.Zero(f.Type).Interface().(interface{ JSONSchema() *jsonschema.Schema }); ok {
			if own == nil {
				own = map[reflect.Type]*jsonschema.Schema{}
			}
			own[f.Type] = sc.JSONSchema()
		}
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: own})
	if err != nil {
		return nil, nil, err
	}
	return s, append([]string(nil), s.Required...), nil
}

// CheckText validates a free-text argument: at most max bytes and no
// control characters; multiline text may also hold tab, newline and
// carriage return. Every tool package checks its text arguments with it,
// so they all answer a bad one the same way.
func CheckText(field, v string, max int, multiline bool) error {
	if len(v) > max {
		return Invalid(field, "must be at most %d bytes (got %d)", max, len(v))
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			if multiline && (r == '\t' || r == '\n' || r == '\r') {
				continue
			}
			if multiline {
				return Invalid(field, "must not contain control characters other than tab and line breaks")
			}
			return Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// maxJSONDepth is how deeply JSON received at an edge (tool arguments,
// chat payloads) may nest objects and arrays. Deeper input is refused
// before anything decodes it: the duplicate-key check looks at every
// level below it, and nothing Countersign is asked about needs more.
const maxJSONDepth = 64

// maxReportedPath bounds the path a refusal names: keys may be long.
const maxReportedPath = 200

// CheckJSON refuses JSON that two readers could see differently or that
// nests too deep: a key given twice in one object, at any depth (400
// naming its path, for example "arguments.mode"), or objects and arrays
// nested more than maxJSONDepth levels (400 naming where). field prefixes
// the paths ("" for none). Malformed JSON is left to the decoder, which
// reports it. Every edge that parses JSON it is sent calls it (bot.Call
// does, for tool arguments on every surface).
func CheckJSON(field string, raw []byte) error {
	path, dup, deep := scanJSON(raw)
	if !dup && !deep {
		return nil
	}
	if field != "" {
		switch {
		case path == "":
			path = field
		case path[0] == '[':
			path = field + path
		default:
			path = field + "." + path
		}
	}
	if len(path) > maxReportedPath {
		cut := maxReportedPath
		for cut > 0 && !utf8.RuneStart(path[cut]) {
			cut--
		}
		path = path[:cut] + "…"
	}
	if dup {
		return Invalid(path, "is given more than once; send each key once (duplicate JSON keys are refused, never resolved by order)")
	}
	return Invalid(path, "nests objects and arrays more than %d levels deep, which is refused; send a flatter value", maxJSONDepth)
}

// firstDuplicate reports the path (for example "arguments.mode") of the
// first key that an object of raw gives twice, comparing names as decoded
// (so "a" and "\u0061" are the same). encoding/json keeps the last of
// duplicate keys and other parsers the first: an approval bound to a body
// two readers see differently binds nothing, so such a body is refused.
// Malformed input, and input nested deeper than maxJSONDepth before a
// duplicate is found, report no duplicate (dup is false).
func firstDuplicate(raw []byte) (path string, dup bool) {
	path, dup, _ = scanJSON(raw)
	return path, dup
}

// scanJSON looks for the first duplicate key of raw, and for the first
// object or array nested deeper than maxJSONDepth; it reports whichever
// comes first, with its path. Malformed input stops the scan (neither).
func scanJSON(raw []byte) (path string, dup, deep bool) {
	p := dupScanner{raw: raw}
	p.value(skipSpace(raw, 0), "", 0)
	return p.path, p.found, p.deep
}

type dupScanner struct {
	raw   []byte
	path  string
	found bool // a duplicate key at path
	deep  bool // an object or array at path is nested too deep
	bad   bool // malformed: stop looking
}

// stopped reports whether the scan has its answer, or gave up.
func (p *dupScanner) stopped() bool { return p.found || p.deep || p.bad }

// value scans the JSON value at i, whose enclosing objects and arrays
// number depth, and returns where it ends.
func (p *dupScanner) value(i int, path string, depth int) int {
	raw := p.raw
	if p.stopped() || i >= len(raw) {
		p.bad = p.bad || !p.found && !p.deep
		return len(raw)
	}
	if (raw[i] == '{' || raw[i] == '[') && depth >= maxJSONDepth {
		p.path, p.deep = path, true
		return len(raw)
	}
	switch raw[i] {
	case '{':
		return p.object(i, path, depth)
	case '[':
		i = skipSpace(raw, i+1)
		if i < len(raw) && raw[i] == ']' {
			return i + 1
		}
		for n := 0; ; n++ {
			i = skipSpace(raw, p.value(i, path+"["+strconv.Itoa(n)+"]", depth+1))
			if p.stopped() || i >= len(raw) {
				p.bad = p.bad || !p.found && !p.deep
				return len(raw)
			}
			if raw[i] == ']' {
				return i + 1
			}
			if raw[i] != ',' {
				p.bad = true
				return len(raw)
			}
			i = skipSpace(raw, i+1)
		}
	}
	j, ok := skipValue(raw, i)
	if !ok {
		p.bad = true
		return len(raw)
	}
	return j
}

func (p *dupScanner) object(i int, path string, depth int) int {
	raw := p.raw
	var small [8][]byte
	keys := small[:0] // few keys: compared one by one, without allocating
	var set map[string]struct{}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			p.bad = true
			return len(raw)
		}
		j, ok := skipString(raw, i)
		if !ok {
			p.bad = true
			return len(raw)
		}
		key := raw[i+1 : j-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(raw[i:j], &s) != nil {
				p.bad = true
				return len(raw)
			}
			key = []byte(s)
		}
		name := func() string { // built only when it is reported or descended into
			if path == "" {
				return string(key)
			}
			return path + "." + string(key)
		}
		seen := false
		if set != nil {
			_, seen = set[string(key)]
			set[string(key)] = struct{}{}
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					seen = true
					break
				}
			}
			keys = append(keys, key)
			if len(keys) > 8 {
				set = make(map[string]struct{}, 2*len(keys))
				for _, k := range keys {
					set[string(k)] = struct{}{}
				}
			}
		}
		if seen {
			p.path, p.found = name(), true
			return len(raw)
		}
		i = skipSpace(raw, j)
		if i >= len(raw) || raw[i] != ':' {
			p.bad = true
			return len(raw)
		}
		i = skipSpace(raw, i+1)
		if i < len(raw) && (raw[i] == '{' || raw[i] == '[') {
			i = p.value(i, name(), depth+1)
		} else if i, ok = skipValue(raw, i); !ok {
			p.bad = true
			return len(raw)
		}
		i = skipSpace(raw, i)
		if p.stopped() || i >= len(raw) {
			p.bad = p.bad || !p.found && !p.deep
			return len(raw)
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return i + 1
		default:
			p.bad = true
			return len(raw)
		}
	}
}
