package bot

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDiffArgs(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name     string
		from, to string
		text     string
		more     int
	}{
		{"one field changed", `{"drug":"apixaban","dose":"5mg"}`, `{"dose":"2.5mg","drug":"apixaban"}`, "dose 5mg → 2.5mg", 0},
		{"added and removed", `{"a":1,"b":true}`, `{"a":1,"c":"new"}`, "b true → (removed); c (none) → new", 0},
		{"numbers and nested values as compact JSON", `{"n":1,"o":{"k": [1, 2]}}`, `{"n":1.5,"o":{"k":[1,3]}}`, `n 1 → 1.5; o {"k":[1,2]} → {"k":[1,3]}`, 0},
		{"an empty string is shown", `{"s":"a"}`, `{"s":""}`, `s a → ""`, 0},
		{"nothing changed", `{"a": 1}`, `{"a":1}`, "", 0},
		{"long values are cut", `{"v":"a"}`, `{"v":"` + long + `"}`, "v a → " + strings.Repeat("x", maxChangeValue-1) + "…", 0},
		{"control and invisible characters are cleaned", `{"v":"a"}`, `{"v":"b\u202eevil\nline\u200b2"}`, `v a → b\u202eevil line\u200b2`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff, more := DiffArgs(json.RawMessage(tt.from), json.RawMessage(tt.to))
			c := &Changes{Diff: diff, More: more}
			if got := c.Text(); got != tt.text || more != tt.more {
				t.Fatalf("Text() = %q (+%d), want %q (+%d)", got, more, tt.text, tt.more)
			}
		})
	}
	// At most maxChanges fields are listed; More counts the rest.
	var from, to []string
	for i := range maxChanges + 3 {
		from = append(from, fmt.Sprintf(`"k%02d":%d`, i, i))
		to = append(to, fmt.Sprintf(`"k%02d":%d`, i, i+1))
	}
	diff, more := DiffArgs(json.RawMessage("{"+strings.Join(from, ",")+"}"), json.RawMessage("{"+strings.Join(to, ",")+"}"))
	if len(diff) != maxChanges || more != 3 || !strings.HasSuffix((&Changes{Diff: diff, More: more}).Text(), " (+3 more)") {
		t.Fatalf("bounded diff: %d fields, %d more, text %q; want %d fields, 3 more, text ending %q", len(diff), more, (&Changes{Diff: diff, More: more}).Text(), maxChanges, " (+3 more)")
	}
	if diff[0].Field != "k00" || diff[maxChanges-1].Field != fmt.Sprintf("k%02d", maxChanges-1) {
		t.Fatalf("fields not in key order: %+v, want k00 first and k%02d last", diff, maxChanges-1)
	}
	// A long field name is cut too.
	d, _ := DiffArgs(json.RawMessage(`{}`), json.RawMessage(`{"`+long+`":1}`))
	if utf8.RuneCountInString(d[0].Field) != maxChangeValue {
		t.Fatalf("field name not cut: %d runes, want %d", utf8.RuneCountInString(d[0].Field), maxChangeValue)
	}
	var nilChanges *Changes
	if nilChanges.Text() != "" {
		t.Fatal("nil Changes has text")
	}
}

// TestEscapeInvisible: invisible characters are shown as their JSON
// escapes (so "5mg" and "5mg" followed by a zero-width space never read the
// same on a card), everything else is left as it is, and in JSON text the
// escaped form still decodes to the same value.
func TestEscapeInvisible(t *testing.T) {
	tests := []struct{ in, want string }{
		{"apixaban 2.5mg", "apixaban 2.5mg"},
		{"5mg\u200b", `5mg\u200b`},
		{"a\u202eb\u2066c\u200fd\u061ce", `a\u202eb\u2066c\u200fd\u061ce`},
		{"tag\U000E0041", `tag\udb40\udc41`},
		{"é 中 🙂", "é 中 🙂"},
	}
	for _, tt := range tests {
		if got := EscapeInvisible(tt.in); got != tt.want {
			t.Errorf("EscapeInvisible(%q) = %q, want %q", tt.in, got, tt.want)
		}
		raw, _ := json.Marshal(tt.in)
		var back string
		if err := json.Unmarshal([]byte(EscapeInvisible(string(raw))), &back); err != nil || back != tt.in {
			t.Errorf("escaped JSON of %q decodes to %q (%v), want %q", tt.in, back, err, tt.in)
		}
	}
}
