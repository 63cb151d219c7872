package bot

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/policy"
)

type testArgs struct {
	Space
	Subject    string   `json:"subject" jsonschema:"the subject"`
	Confidence *float64 `json:"confidence,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Count      int      `json:"count,omitempty"`
}

func TestSchemaFlattensSpaceAndMarksRequired(t *testing.T) {
	s, req, err := schemaFor(reflect.TypeOf(testArgs{}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(req, []string{"subject"}) {
		t.Fatalf("required = %v, want [subject]", req)
	}
	b, _ := json.Marshal(s)
	for _, f := range []string{`"user_id"`, `"agent_id"`, `"run_id"`, `"subject"`, `"confidence"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("schema lacks %s: %s", f, b)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	typ := reflect.TypeOf(testArgs{})
	cases := []struct {
		name, raw, field, msg string
	}{
		{"ok", `{"subject":"x","user_id":"u"}`, "", ""},
		{"empty body is an empty object", ``, "subject", "required argument is missing"},
		{"null", `null`, "", "not null"},
		{"array", `[1]`, "", "must be a JSON object"},
		{"malformed", `{"subject":`, "", "must be a JSON object"},
		{"unknown field", `{"subject":"x","sujbect":"y"}`, "sujbect", "unknown argument"},
		{"missing required", `{"user_id":"u"}`, "subject", "required argument is missing"},
		{"required null", `{"subject":null}`, "subject", "required argument is missing"},
		{"wrong type", `{"subject":"x","confidence":"high"}`, "confidence", "must be a number"},
		{"wrong type in slice", `{"subject":"x","tags":"a"}`, "tags", "must be an array"},
		{"integer", `{"subject":"x","count":1.5}`, "count", "must be an integer"},
		{"NUL byte", `{"subject":"a\u0000b"}`, "subject", "NUL"},
		{"invalid UTF-8", "{\"subject\":\"\xff\"}", "", "UTF-8"},
		{"trailing garbage", `{"subject":"x"} {}`, "", "JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decodeArgs(typ, []string{"subject"}, []byte(tc.raw))
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				a := v.(*testArgs)
				if a.Subject != "x" || a.UserID != "u" {
					t.Fatalf("decoded %+v, want subject %q and user_id %q", a, "x", "u")
				}
				return
			}
			e, ok := err.(*Error)
			if !ok || e.Kind != KindInvalid {
				t.Fatalf("err = %#v, want a KindInvalid *Error", err)
			}
			if e.Field != tc.field || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got field %q msg %q, want field %q msg containing %q", e.Field, e.Msg, tc.field, tc.msg)
			}
		})
	}
}

func TestSpaceNormalizedAndValidated(t *testing.T) {
	a := &testArgs{Subject: "x"}
	sp, ok := spaceOf(a)
	if !ok || sp.UserID != "default" || a.UserID != "default" {
		t.Fatalf("space = %+v ok=%v args=%+v; want user_id defaulted in both", sp, ok, a)
	}
	if err := ValidateSpace(Space{UserID: strings.Repeat("u", 129)}); err == nil {
		t.Fatal("a 129-byte user_id was accepted")
	}
	if err := ValidateSpace(Space{AgentID: "a\nb"}); err == nil {
		t.Fatal("a control character in agent_id was accepted")
	}
}

func TestCheckText(t *testing.T) {
	cases := []struct {
		v         string
		max       int
		multiline bool
		want      string // "" = accepted
	}{
		{"warfarin 5mg", 20, false, ""},
		{"line one\nline two\ttab", 40, true, ""},
		{"line one\nline two", 40, false, "must not contain control characters"},
		{"bell\a", 40, true, "other than tab and line breaks"},
		{"del\x7f", 40, false, "must not contain control characters"},
		{"toolong", 3, false, "must be at most 3 bytes (got 7)"},
	}
	for _, c := range cases {
		err := CheckText("f", c.v, c.max, c.multiline)
		if c.want == "" {
			if err != nil {
				t.Errorf("CheckText(%q) = %v, want accepted", c.v, err)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Field != "f" || !strings.Contains(e.Msg, c.want) {
			t.Errorf("CheckText(%q, multiline=%v) = %v, want field f and %q", c.v, c.multiline, err, c.want)
		}
	}
}

func TestFirstDuplicate(t *testing.T) {
	for _, c := range []struct {
		raw, path string
		dup       bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":2}`, "a", true},
		{`{"a":1,"\u0061":2}`, "a", true},
		{`{"arguments":{"mode":"x","mode":"y"}}`, "arguments.mode", true},
		{`{"x":[{"k":1},{"k":1,"k":2}]}`, "x[1].k", true},
		{`{"a":{"b":1},"c":{"b":1}}`, "", false},
		{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k3":3}`, "k3", true},
		{`{"a":"}\"{","a":1}`, "a", true},
		{`{"a":`, "", false},
		{`[1,2,{"z":1,"z":1}]`, "[2].z", true},
		{`"str"`, "", false},
	} {
		path, dup := firstDuplicate([]byte(c.raw))
		if path != c.path || dup != c.dup {
			t.Errorf("firstDuplicate(%s) = %q, %v; want %q, %v", c.raw, path, dup, c.path, c.dup)
		}
	}
}

// TestWrites: a tool writes unless its capability is read or verify or it
// is annotated read-only; an unknown tool writes nothing.
func TestWrites(t *testing.T) {
	t.Parallel()
	b := newTestBot(t)
	type none struct{}
	h := func(context.Context, *Call, any) (Result, error) { return Result{}, nil }
	if err := b.Register(
		Tool{Name: "recall", Capability: policy.CapRead, Args: none{}, Handler: h},
		Tool{Name: "verify", Capability: policy.CapVerify, Args: none{}, Handler: h},
		Tool{Name: "list", Capability: policy.CapAdmin, Annotations: Annotations{ReadOnly: true}, Args: none{}, Handler: h},
		Tool{Name: "propose", Capability: policy.CapWrite, Args: none{}, Handler: h},
		Tool{Name: "revoke", Capability: policy.CapAdmin, Args: none{}, Handler: h},
	); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"recall": false, "verify": false, "list": false, "propose": true, "revoke": true, "nothing": false} {
		if got := b.Writes(name); got != want {
			t.Errorf("Writes(%s) = %v, want %v", name, got, want)
		}
	}
}
