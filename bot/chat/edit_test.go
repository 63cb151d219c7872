package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

func TestEditFormLayoutAndApply(t *testing.T) {
	action := func(args string) bot.Item {
		return bot.Item{ID: 7, Kind: bot.KindAction, Status: "pending", Editable: &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(args)}}
	}
	tests := []struct {
		name     string
		it       bot.Item
		max      int
		inputs   []string // input names, in order
		prefill  []string
		submit   map[string]string
		wantArgs string // the edit's arguments (compared as JSON), or
		wantVal  string // the edit's value
		field    string // the input at fault, when the submission is refused
	}{
		{name: "flat arguments, one input each, types kept", it: action(`{"drug":"apixaban","dose":"5mg","times":2,"urgent":false,"note":null}`), max: 5,
			inputs: []string{"drug", "dose", "times", "urgent", "note"}, prefill: []string{"apixaban", "5mg", "2", "false", ""},
			submit:   map[string]string{"drug": "apixaban", "dose": "2.5mg", "times": " 1 ", "urgent": "TRUE", "note": ""},
			wantArgs: `{"drug":"apixaban","dose":"2.5mg","times":1,"urgent":true,"note":null}`},
		{name: "a number that is not one is refused on its input", it: action(`{"times":2}`), max: 5,
			inputs: []string{"times"}, prefill: []string{"2"}, submit: map[string]string{"times": "twice"}, field: "times"},
		{name: "a boolean that is not one is refused", it: action(`{"urgent":true}`), max: 5,
			inputs: []string{"urgent"}, prefill: []string{"true"}, submit: map[string]string{"urgent": "yes"}, field: "urgent"},
		{name: "nested arguments: one JSON input", it: action(`{"service":"api","scale":{"min":2}}`), max: 5,
			inputs: []string{ArgumentsInput}, prefill: []string{"{\n  \"service\": \"api\",\n  \"scale\": {\n    \"min\": 2\n  }\n}"},
			submit: map[string]string{ArgumentsInput: `{"service":"api","scale":{"min":3}}`}, wantArgs: `{"service":"api","scale":{"min":3}}`},
		{name: "more arguments than the form holds: one JSON input", it: action(`{"a":"1","b":"2","c":"3"}`), max: 2,
			inputs: []string{ArgumentsInput}, prefill: []string{"{\n  \"a\": \"1\",\n  \"b\": \"2\",\n  \"c\": \"3\"\n}"},
			submit: map[string]string{ArgumentsInput: `["not", "an object"]`}, field: ArgumentsInput},
		{name: "memory value", it: bot.Item{ID: 8, Kind: bot.KindMemoryChange, Status: "pending", Editable: &bot.Editable{Kind: bot.EditValue, Current: json.RawMessage(`"apixaban 5mg"`)}}, max: 5,
			inputs: []string{valueInput}, prefill: []string{"apixaban 5mg"}, submit: map[string]string{valueInput: " apixaban 2.5mg "}, wantVal: "apixaban 2.5mg"},
		{name: "an empty memory value is refused", it: bot.Item{ID: 8, Kind: bot.KindMemoryChange, Status: "pending", Editable: &bot.Editable{Kind: bot.EditValue, Current: json.RawMessage(`"x"`)}}, max: 5,
			inputs: []string{valueInput}, prefill: []string{"x"}, submit: map[string]string{valueInput: "  "}, field: valueInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, why := EditForm(tt.it, tt.max, 3000)
			if why != "" {
				t.Fatal(why)
			}
			var names, pre []string
			for _, in := range lay.Inputs {
				names, pre = append(names, in.Name), append(pre, in.Value)
			}
			if strings.Join(names, "|") != strings.Join(tt.inputs, "|") || strings.Join(pre, "|") != strings.Join(tt.prefill, "|") {
				t.Fatalf("inputs %q prefilled %q, want %q %q", names, pre, tt.inputs, tt.prefill)
			}
			if lay.Basis == "" || lay.Basis != EditBasis(tt.it) {
				t.Fatalf("basis %q, want %q (EditBasis), not empty", lay.Basis, EditBasis(tt.it))
			}
			var d Decision
			field, msg := lay.Apply(&d, tt.submit)
			if field != tt.field || (field != "") != (msg != "") {
				t.Fatalf("Apply = %q %q, want field %q", field, msg, tt.field)
			}
			switch {
			case tt.field != "":
				if d.Arguments != nil || d.Value != nil {
					t.Fatalf("a refused form still made an edit: %s %v", d.Arguments, d.Value)
				}
			case tt.wantArgs != "":
				if !sameJSON(d.Arguments, []byte(tt.wantArgs)) {
					t.Fatalf("arguments %s, want %s", d.Arguments, tt.wantArgs)
				}
			default:
				if d.Value == nil || *d.Value != tt.wantVal {
					t.Fatalf("value %v, want %q", d.Value, tt.wantVal)
				}
			}
		})
	}
}

func TestEditFormRefusesWhatCannotBeEdited(t *testing.T) {
	if _, why := EditForm(bot.Item{ID: 3, Kind: bot.KindQuestion}, 5, 3000); !strings.Contains(why, "cannot be edited") {
		t.Fatalf("a question got an edit form: %q, want a refusal with %q", why, "cannot be edited")
	}
	long := bot.Item{ID: 4, Kind: bot.KindMemoryChange, Editable: &bot.Editable{Kind: bot.EditValue, Current: json.RawMessage(`"` + strings.Repeat("x", 101) + `"`)}}
	if _, why := EditForm(long, 5, 100); !strings.Contains(why, "web console") {
		t.Fatalf("a value longer than the form holds: %q, want a refusal pointing at the %q", why, "web console")
	}
	a := bot.Item{ID: 5, Kind: bot.KindAction, Editable: &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(`{"a":"1"}`)}}
	b := bot.Item{ID: 5, Kind: bot.KindAction, Editable: &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(`{"a":"2"}`)}}
	if EditBasis(a) == EditBasis(b) {
		t.Fatal("different arguments share a basis")
	}
}
