package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
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
			t.Fatalf("decoded %T, want *fuzzArgs", v)
		}
		if path, dup := firstDuplicate(raw); dup {
			t.Fatalf("decoded %q although %s is given twice, want it refused", raw, path)
		}
		if a.Confidence != nil && (*a.Confidence < 0 || *a.Confidence > 1) {
			t.Fatalf("the validator was skipped: confidence %v, want it within [0, 1]", *a.Confidence)
		}
	})
}

// FuzzFirstDuplicate checks the duplicate-key and depth scan against
// encoding/json's tokenizer: on valid JSON both find the same first
// problem in document order (a key given twice in one object, or an object
// or array nested deeper than maxJSONDepth), or neither finds one; the
// path is reported for either.
func FuzzFirstDuplicate(f *testing.F) {
	deep := func(n int, inner string) string {
		return strings.Repeat(`{"x":`, n) + inner + strings.Repeat(`}`, n)
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":1},{"x":1}]`, `{"\u0061":1,"a":2}`, `{"a":"}\"{","b":[1,{"c":2}]}`, `{}`, `"x"`,
		// At and past the depth limit, and far past it (where the check
		// used to stop, and duplicates were resolved last-wins).
		deep(maxJSONDepth-1, `{"k":1,"k":2}`), deep(maxJSONDepth, `{"k":1,"k":2}`), deep(maxJSONDepth, `1`), deep(maxJSONDepth+1, `1`),
		deep(1001, `{"dose":"5mg","dose":"50mg"}`), strings.Repeat("[", 2000) + strings.Repeat("]", 2000),
		// A duplicate after a deep sibling, and a deep value after a duplicate.
		`{"a":` + deep(70, `1`) + `,"a":2}`, `{"a":1,"a":` + deep(70, `1`) + `}`,
		// Names equal once decoded: escapes, surrogate pairs, escaped quotes.
		`{"\ud83d\ude00":1,"😀":2}`, `{"a\"b":1,"a\u0022b":2}`, `{"\/":1,"/":2}`, `{"é":1,"e\u0301":2}`,
		// Many keys (the scanner switches from a list to a set past 8).
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"a":11}`,
		// Arrays of objects, and duplicates inside arrays inside objects.
		`{"l":[{"y":1},{"y":1,"z":[{"q":1,"q":2}]}]}`, `[[[{"a":1}],{"a":1}],{"a":1,"b":{"a":1}}]`,
		// The envelope of an MCP call, with its arguments twice.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"arguments":{"a":1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			scanJSON(raw) // never panics on anything
			return
		}
		path, dup, tooDeep := scanJSON(raw)
		got := "none"
		switch {
		case dup:
			got = "duplicate"
		case tooDeep:
			got = "too deep"
		}
		if want := problemByTokens(raw); got != want {
			t.Fatalf("scanJSON(%q) = %s at %q, want %s as the tokenizer says", raw, got, path, want)
		}
		if err := CheckJSON("arguments", raw); (err != nil) != (got != "none") {
			t.Fatalf("CheckJSON(%q) = %v, but the scan found %s; want an error exactly when the scan finds a problem", raw, err, got)
		}
	})
}

// problemByTokens finds, with encoding/json's tokenizer, the first of a
// duplicate key and an object or array nested deeper than maxJSONDepth.
func problemByTokens(raw []byte) string {
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
			return "none"
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
				return "duplicate"
			}
			top.keys[k] = true
			top.expKey = false
			continue
		}
		switch d := tok.(type) {
		case json.Delim:
			switch d {
			case '{', '[':
				if len(stack) >= maxJSONDepth {
					return "too deep"
				}
				stack = append(stack, &frame{obj: d == '{', keys: map[string]bool{}, expKey: d == '{'})
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
