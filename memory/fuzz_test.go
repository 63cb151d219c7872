package memory

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzFold checks slot alias folding: it never panics, is idempotent, has
// no upper-case letters, no separator other than single inner '_', and
// folds "A b", "a-b" and "a_b" together.
func FuzzFold(f *testing.F) {
	for _, s := range []string{"Patient Allergy", "patient_allergy", "  --Active.Medication//", "ÄRZTIN Notiz", "a\u00a0b", "x__y", "İstanbul", "\xff\xfe", "ａｃｔｉｖｅ＿ｍｅｄｉｃａｔｉｏｎ", "a \u200b b", "\u202e x\u00ad", "ﬁ ﬂ ㎒", "Y\u030a", "\xf3\u02d9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Fold(s)
		if again := Fold(got); again != got {
			t.Fatalf("Fold is not idempotent: %q -> %q -> %q", s, got, again)
		}
		if strings.HasPrefix(got, "_") || strings.HasSuffix(got, "_") || strings.Contains(got, "__") {
			t.Fatalf("Fold(%q) = %q: a separator at an end or doubled", s, got)
		}
		for _, r := range got {
			if unicode.IsSpace(r) || r == '-' || r == '.' || r == '/' {
				t.Fatalf("Fold(%q) = %q keeps separator %q", s, got, r)
			}
		}
		if Fold(strings.ToUpper(got)) != Fold(strings.ToLower(got)) && strings.ToLower(strings.ToUpper(got)) == got {
			t.Fatalf("Fold(%q) depends on case", got)
		}
		spaced := strings.ReplaceAll(got, "_", " ")
		if got != "" && Fold(spaced) != got {
			t.Fatalf("Fold(%q) = %q, but Fold(%q) = %q", got, got, spaced, Fold(spaced))
		}
	})
}
