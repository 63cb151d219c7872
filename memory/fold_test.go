package memory

import "testing"

func TestFoldNormalisesCompatibilityFormsAndInvisibles(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Patient Allergy": "patient_allergy",
		"ａｃｔｉｖｅ＿ｍｅｄｉｃａｔｉｏｎ":            "active_medication",
		"active_medication\u200b":      "active_medication",
		"\u202eactive\u00admedication": "activemedication",
		"ﬁle":                          "file", // a ligature
		"  code-status ":               "code_status",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
	s, err := NewSchema([]Slot{{Name: "active_medication", Aliases: []string{"meds"}, Confirm: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"ＭＥＤＳ", "active_medication\u200b", "Active Medication"} {
		if sl, ok := s.Lookup(subject); !ok || sl.Name != "active_medication" {
			t.Errorf("Lookup(%q) = %q, %v, want %q, true", subject, sl.Name, ok, "active_medication")
		}
	}
	if r, ok := FirstInvisible("a\u200bb"); !ok || r != 0x200b {
		t.Errorf("FirstInvisible = %U %v, want U+200B true", r, ok)
	}
	if _, ok := FirstInvisible("plain ascii"); ok {
		t.Error("FirstInvisible found one in plain text, want none")
	}
}
