package bot

import (
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
		if a.Confidence != nil && (*a.Confidence < 0 || *a.Confidence > 1) {
			t.Fatalf("the validator was skipped: confidence %v", *a.Confidence)
		}
	})
}
