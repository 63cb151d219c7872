package bot

import (
	"bytes"
	"reflect"
	"testing"
	"unicode/utf8"
)

// benchCheckArgs has check_before_act's shape: a space, a required subject
// and optional policy pointers (from an embedded unexported struct).
type benchCheckArgs struct {
	Space
	Subject string `json:"subject"`
	benchSafety
}

type benchSafety struct {
	MinConfidence    *float64 `json:"min_confidence,omitempty"`
	RequireActive    *bool    `json:"require_active,omitempty"`
	MaxStalenessDays *float64 `json:"max_staleness_days,omitempty"`
}

// BenchmarkDecodeArgs is the strict decoding of one tool call's arguments,
// the struct's description computed once, as Register does.
func BenchmarkDecodeArgs(b *testing.B) {
	typ := reflect.TypeOf(benchCheckArgs{})
	_, required, err := schemaFor(typ)
	if err != nil {
		b.Fatal(err)
	}
	spec := newArgSpec(typ, required)
	raw := []byte(`{"max_staleness_days":365,"subject":"allergy"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := spec.decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// nestedArgs has objects decoded into structs, where the strict decoding
// refuses unknown names too.
type nestedArgs struct {
	Subject string            `json:"subject"`
	Inner   *struct{ A int }  `json:"inner,omitempty"`
	List    []struct{ B int } `json:"list,omitempty"`
	When    string            `json:"when,omitempty"`
}

// FuzzDecodeArgsFastPath checks the single-pass decoding against the full
// one: whenever the fast path accepts an input, the full path accepts it
// too and decodes the same value (so answers and errors are the full
// path's alone).
func FuzzDecodeArgsFastPath(f *testing.F) {
	for _, s := range []string{
		`{"subject":"allergy"}`, `{"subject":"a","confidence":0.5,"tags":["x"],"metadata":{"k":[1,{"z":null}]}}`,
		`{"subject":"a","subject":"b"}`, `{"subject":null}`, `{"subj\u0065ct":"a"}`, `{"Subject":"a"}`,
		` { "subject" : "a" , "count" : 3 } `, `{"subject":"a\"}","tags":["]}","{"]}`, `{"subject":"a"}x`,
		`{"subject":"a"} {}`, `{"subject":"a",}`, `{"subject":"a" "count":1}`, `{"metadata":{"subject":null},"subject":"s"}`,
		`{"subject":"\\","count":-1.5e3}`, `{"subject":"a","headless":true,"count":null}`, `{}`, `{"subject":"a\u0000"}`,
		`{"subject":"a","inner":{"A":1}}`, `{"subject":"a","inner":{"a":1,"c":2}}`, `{"subject":"a","list":[{"B":1},{"x":2}]}`,
	} {
		f.Add([]byte(s))
	}
	var specs []*argSpec
	for _, typ := range []reflect.Type{reflect.TypeOf(fuzzArgs{}), reflect.TypeOf(nestedArgs{})} {
		_, required, err := schemaFor(typ)
		if err != nil {
			f.Fatal(err)
		}
		spec := newArgSpec(typ, required)
		if !spec.fast {
			f.Fatalf("%v should take the fast path", typ)
		}
		specs = append(specs, spec)
	}
	if !specs[0].plain || specs[1].plain {
		f.Fatal("only the flat type may be decoded without DisallowUnknownFields")
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || !utf8.Valid(raw) {
			return
		}
		for _, spec := range specs {
			fast, ok := spec.decodeFast(raw, new(error))
			if !ok {
				continue
			}
			full, err := spec.decodeFull(raw)
			if err != nil {
				t.Fatalf("%v: fast path accepted %q; the full path says %v", spec.t, raw, err)
			}
			if !reflect.DeepEqual(fast.Interface(), full.Interface()) {
				t.Fatalf("%v %q: fast path decoded %+v, want %+v as the full path", spec.t, raw, fast.Interface(), full.Interface())
			}
		}
	})
}

// BenchmarkFirstDuplicate is the duplicate-key scan every call's arguments
// go through before decoding (part of BenchmarkDecodeArgs).
func BenchmarkFirstDuplicate(b *testing.B) {
	raw := []byte(`{"max_staleness_days":365,"subject":"allergy"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, dup := firstDuplicate(raw); dup {
			b.Fatal("firstDuplicate found a duplicate key in ", string(raw), ", want none")
		}
	}
}
