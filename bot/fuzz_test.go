package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// fuzzArgs covers the argument shapes tools use: a space, a required
// string, optional pointers, a list, a map and a validator.
type fuzzArgs struct {
	Space
	Subject    string         `json:"subject"`
	Confidence *float64       `json:"confidence,omitempty"`
	Headless   bool           `json:"headless,omitempty"`
	Count      int            `json:"count,omitempty"`
	Tags       []string       `json:"tags,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

func (a *fuzzArgs) Validate() error {
	if a.Confidence != nil && (*a.Confidence < 0 || *a.Confidence > 1) {
		return Invalid("confidence", "must be between 0 and 1")
	}
	return nil
}

// FuzzDecodeArgs feeds arbitrary bytes to the strict argument decoder of
// every tool call: it never panics, and either decodes a value or returns a
// KindInvalid error (a 400) — never an internal error.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"subject":"allergy"}`, `{"subject":"a","confidence":0.5,"tags":["x"],"metadata":{"k":[1,{"z":null}]}}`,
		`{"subject":1}`, `{"subject":"a","extra":true}`, `{"subject":"a\u0000"}`, `[1,2]`, `null`, `{"subject":`, "\xff",
		`{"subject":"a","user_id":"u","agent_id":"g","run_id":"r"}`, `{"subject":"a","confidence":"high"}`, `{"subject":"a","count":1e400}`,
		`{"subject":"a","subject":"b"}`, `{"subject":"a","metadata":{"k":1,"\u006b":2}}`, `{"subject":"a","tags":[],"metadata":{"x":[{"y":1,"y":2}]}}`,
	} {
		f.Add([]byte(s))
	}
	typ := reflect.TypeOf(fuzzArgs{})
	_, required, err := schemaFor(typ)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decodeArgs(typ, required, raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindInvalid {
				t.Fatalf("decodeArgs(%q) = %v, want a KindInvalid error", raw, err)
			}
			return
		}
		a, ok := v.(*fuzzArgs)
		if !ok {
			t.Fatalf("decoded %T", v)
		}
		if path, dup := firstDuplicate(raw); dup {
			t.Fatalf("decoded %q although %s is given twice", raw, path)
		}
		if a.Confidence != nil && (*a.Confidence < 0 || *a.Confidence > 1) {
			t.Fatalf("the validator was skipped: confidence %v", *a.Confidence)
		}
	})
}

// FuzzFirstDuplicate checks the duplicate-key scan against encoding/json's
// tokenizer: on valid JSON both find a key given twice in the same object,
// or neither does.
func FuzzFirstDuplicate(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":1},{"x":1}]`, `{"\u0061":1,"a":2}`, `{"a":"}\"{","b":[1,{"c":2}]}`, `{}`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			firstDuplicate(raw) // never panics on anything
			return
		}
		_, got := firstDuplicate(raw)
		if want := dupByTokens(raw); got != want {
			t.Fatalf("firstDuplicate(%q) = %v, the tokenizer says %v", raw, got, want)
		}
	})
}

// dupByTokens finds a duplicate key with encoding/json's tokenizer.
func dupByTokens(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expKey = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expKey = false
			continue
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expKey: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default: // ']' ('}' is handled above)
				stack = stack[:len(stack)-1]
			}
		}
		// A value ended: the enclosing object expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expKey = true
		}
	}
}
