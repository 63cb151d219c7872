package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Editable says what an approver may change on a pending item before
// approving it (#15, edit before approving), for the surfaces that offer an
// edit form: Kind "arguments" (an action's arguments, a JSON object: edit
// it and send it back as approve_action's arguments) or "value" (a memory
// proposal's value, a JSON string: send it back as confirm_change's
// value). Current is the version now up for approval (the latest edit,
// else the proposal).
type Editable struct {
	Kind    string          `json:"kind"`
	Current json.RawMessage `json:"current"`
}

// The kinds of Editable.
const (
	EditArguments = "arguments"
	EditValue     = "value"
)

// Change is one changed field of an edited item, its values shown as text
// (a string as it is, anything else as compact JSON), each cut to a
// bounded length. From is "" for a field the edit added, To "" for one it
// removed.
type Change struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// Changes is an item approved (or up for approval) with changes: who
// changed it, the field-level difference from the proposal (at most
// maxChanges fields; More counts the rest), and both versions' SHA-256.
type Changes struct {
	By             string   `json:"by"` // "name [id]"
	Diff           []Change `json:"diff"`
	More           int      `json:"more,omitempty"`
	ProposedSHA256 string   `json:"proposed_sha256"`
	ApprovedSHA256 string   `json:"approved_sha256"`
}

// Bounds of a Changes diff.
const (
	maxChanges     = 8  // fields listed
	maxChangeValue = 60 // runes of a value shown
)

// Text is the difference on one line, for people: "dose 5mg → 2.5mg;
// route (none) → iv", with "(+2 more)" when fields were left out. Values
// are already cut and cleaned of control and invisible characters;
// renderers still escape for their markup.
func (c *Changes) Text() string {
	if c == nil {
		return ""
	}
	parts := make([]string, 0, len(c.Diff)+1)
	for _, d := range c.Diff {
		from, to := d.From, d.To
		if from == "" {
			from = "(none)"
		}
		if to == "" {
			to = "(removed)"
		}
		s := from + " → " + to
		if d.Field != "" {
			s = d.Field + " " + s
		}
		parts = append(parts, s)
	}
	s := strings.Join(parts, "; ")
	if c.More > 0 {
		s += " (+" + strconv.Itoa(c.More) + " more)"
	}
	return s
}

// DiffArgs is the field-level difference between two JSON objects (an
// action's proposed and edited arguments): the top-level fields added,
// removed or changed, in key order, at most maxChanges of them (the
// second result counts the rest). A nested value that changed is shown
// whole, cut to maxChangeValue runes.
func DiffArgs(from, to json.RawMessage) ([]Change, int) {
	a, b := fields(from), fields(to)
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Change
	more := 0
	for _, k := range keys {
		va, okA := a[k]
		vb, okB := b[k]
		if okA && okB && bytes.Equal(compact(va), compact(vb)) {
			continue
		}
		if len(out) == maxChanges {
			more++
			continue
		}
		c := Change{Field: ShowValue(k)}
		if okA {
			c.From = showJSON(va)
		}
		if okB {
			c.To = showJSON(vb)
		}
		out = append(out, c)
	}
	return out, more
}

func fields(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	return m
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// showJSON shows one JSON value: a string as it is, anything else as its
// compact JSON; cut and cleaned (ShowValue).
func showJSON(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return `""`
		}
		return ShowValue(s)
	}
	return ShowValue(string(compact(raw)))
}

// ShowValue cleans an untrusted value for a one-line diff: its invisible
// characters shown as escapes (EscapeInvisible, so that "5mg" and
// "5mg\u200b" never read the same), then OneLine cut to maxChangeValue
// runes.
func ShowValue(s string) string { return OneLine(EscapeInvisible(s), maxChangeValue) }

// EscapeInvisible writes each invisible character of s (Invisible: zero-width
// characters, bidirectional controls) as its JSON escape, \u200b, so that a
// person reviewing a value sees that it is there instead of reading text
// the character hides or reorders. In JSON text (an action's arguments) the
// escape means the same character, so the shown arguments are still the
// arguments that run.
func EscapeInvisible(s string) string {
	if !strings.ContainsFunc(s, Invisible) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !Invisible(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// OneLine makes untrusted text safe to put on one line: control characters
// and line or paragraph separators become spaces, bidirectional controls,
// zero-width and other invisible format characters and invalid UTF-8 are
// dropped, runs of white space collapse, and text over max runes is cut
// with "…" (max 0: no limit). It is the one sanitiser: chat, every surface
// and the core's change lines use it. Escaping markup
// is the renderer's job.
func OneLine(s string, max int) string {
	out := make([]rune, 0, min(len(s), 4*max+4))
	space := false
	for _, r := range s {
		switch {
		case r == utf8.RuneError || Invisible(r):
			continue
		case unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2028' || r == '\u2029':
			space = len(out) > 0
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if max > 0 && len(out) > max {
			break
		}
	}
	if max > 0 && len(out) > max {
		return string(out[:max-1]) + "…"
	}
	return string(out)
}

// Invisible reports whether r is a character a reader cannot see that can
// change what they read: a format character (Unicode Cf: zero-width
// characters, the bidirectional embeddings, overrides and isolates, the
// marks LRM, RLM and ALM).
func Invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == '\u200e' || r == '\u200f' || r == '\u061c'
}
