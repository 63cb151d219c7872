package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Slot is a declared slot: a known field of a domain whose reconciliation is
// deterministic. The JSON form is the seed's {"slots": [...]} schema file;
// the same fields may be written inline in config.yaml under memory.slots.
type Slot struct {
	Name        string   `json:"name" yaml:"name"`
	Description string   `json:"description,omitempty" yaml:"description"`
	Aliases     []string `json:"aliases,omitempty" yaml:"aliases"`
	// Category tags every fact in the slot and feeds the critical channel.
	Category string `json:"category,omitempty" yaml:"category"`
	// Verbatim keeps the value byte for byte; otherwise surrounding and
	// repeated whitespace is normalised.
	Verbatim bool `json:"verbatim,omitempty" yaml:"verbatim"`
	// Multi makes a list slot: a new distinct value joins the list.
	Multi bool `json:"multi,omitempty" yaml:"multi"`
	// Confirm routes replacements and removals into the approval queue.
	Confirm bool `json:"confirm,omitempty" yaml:"confirm"`
	// Sensitive shows only the subject in a channel; the detail goes
	// privately to eligible approvers.
	Sensitive bool `json:"sensitive,omitempty" yaml:"sensitive"`
	// Channel is the configured chat channel name its proposals go to
	// ("default" when empty).
	Channel string `json:"channel,omitempty" yaml:"channel"`
}

// Schema is a set of declared slots, indexed by folded name and alias.
type Schema struct {
	slots []Slot
	index map[string]int // folded name or alias -> slots index
}

// Fold normalises a subject for matching: Unicode compatibility forms
// (NFKC: a fullwidth "ａｌｌｅｒｇｙ" is "allergy"), invisible formatting
// characters (zero-width, bidirectional controls: dropped), case and
// separators (spaces, '-', '_', '.', '/' fold together; runs collapse; ends
// are trimmed). It is never semantic: "Patient Allergy" and
// "patient_allergy" match, "allergies" does not. Tools refuse a subject
// holding an invisible character (FirstInvisible) before it gets here; Fold
// drops them so that no path can store a look-alike of a declared slot.
func Fold(s string) string {
	// Invalid UTF-8 becomes U+FFFD first, as ranging over it would later,
	// so that normalisation sees the text the loop below writes.
	s = norm.NFKC.String(strings.ToValidUTF8(s, "\uFFFD"))
	var b strings.Builder
	sep := false
	for _, r := range strings.TrimSpace(s) {
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		if unicode.IsSpace(r) || r == '-' || r == '_' || r == '.' || r == '/' {
			sep = b.Len() > 0
			continue
		}
		if sep {
			b.WriteByte('_')
			sep = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	// Lowering can leave a letter and a combining mark that compose only
	// now ("Y" + ring has no precomposed capital; "y" + ring is ẙ): compose
	// again, so that Fold(Fold(s)) == Fold(s).
	return norm.NFKC.String(b.String())
}

// FirstInvisible returns the first invisible formatting character of s (a
// zero-width character, a bidirectional control, a soft hyphen: Unicode
// category Cf), if any. A subject holding one looks like another.
func FirstInvisible(s string) (rune, bool) {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return r, true
		}
	}
	return 0, false
}

// NewSchema validates slots and indexes them. Every problem is reported.
func NewSchema(slots []Slot) (*Schema, error) {
	s := &Schema{slots: slots, index: map[string]int{}}
	var errs []error
	for i, sl := range slots {
		where := fmt.Sprintf("slots[%d]", i)
		if strings.TrimSpace(sl.Name) == "" {
			errs = append(errs, fmt.Errorf("%s.name: required (every declared slot needs a name)", where))
			continue
		}
		where = fmt.Sprintf("slots[%d] (%s)", i, sl.Name)
		names := append([]string{sl.Name}, sl.Aliases...)
		for j, n := range names {
			f := Fold(n)
			if f == "" {
				errs = append(errs, fmt.Errorf("%s.aliases[%d]: empty alias", where, j-1))
				continue
			}
			if k, dup := s.index[f]; dup && k != i {
				errs = append(errs, fmt.Errorf("%s: %q folds to %q, which slot %q already uses", where, n, f, slots[k].Name))
				continue
			}
			s.index[f] = i
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseSchema decodes the seed's {"slots": [...]} JSON strictly: an unknown
// property, a missing name or malformed JSON is an error.
func ParseSchema(r io.Reader) (*Schema, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New(`empty file; write {"slots": []} to declare no slots`)
	}
	var doc struct {
		Slots *[]Slot `json:"slots"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("malformed JSON: the file ends before the object is closed")
		}
		return nil, fmt.Errorf("%v (the format is {\"slots\": [{\"name\": ..., \"aliases\": [...], \"category\": ..., \"verbatim\": true, \"multi\": true, \"confirm\": true}]})", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	if doc.Slots == nil {
		return nil, errors.New(`missing "slots" array`)
	}
	return NewSchema(*doc.Slots)
}

// Lookup returns the declared slot a subject folds onto.
func (s *Schema) Lookup(subject string) (Slot, bool) {
	if s == nil {
		return Slot{}, false
	}
	i, ok := s.index[Fold(subject)]
	if !ok {
		return Slot{}, false
	}
	return s.slots[i], true
}

// Slots returns the declared slots.
func (s *Schema) Slots() []Slot {
	if s == nil {
		return nil
	}
	return append([]Slot(nil), s.slots...)
}
