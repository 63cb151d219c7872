package policy

import "testing"

func TestParseReconcileMode(t *testing.T) {
	for _, in := range []string{"RECENCY", "recency", " Authority ", "REVIEW"} {
		if _, err := ParseReconcileMode(in); err != nil {
			t.Errorf("ParseReconcileMode(%q) = %v, want no error", in, err)
		}
	}
	_, err := ParseReconcileMode("VOTE")
	if err == nil || err.Error() != "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW." {
		t.Errorf("VOTE: err = %v, want %q", err, "Unknown mode 'VOTE'. Use RECENCY, AUTHORITY, or REVIEW.")
	}
}

func TestResolve(t *testing.T) {
	auth := ReconcilePolicy{Mode: ModeAuthority, Authority: []SourceRank{{"fhir", 10}, {"crm", 2}, {"bot", 1}}}
	tests := []struct {
		name     string
		p        ReconcilePolicy
		new, old string
		want     bool
	}{
		{"no policy supersedes", ReconcilePolicy{}, "bot", "crm", true},
		{"recency supersedes", ReconcilePolicy{Mode: ModeRecency}, "bot", "crm", true},
		{"review flags another source", ReconcilePolicy{Mode: ModeReview}, "bot", "crm", false},
		{"review flags an empty source", ReconcilePolicy{Mode: ModeReview}, "", "", false},
		{"review lets a source correct itself", ReconcilePolicy{Mode: ModeReview}, "crm", "CRM", true},
		{"authority: higher wins", auth, "crm", "bot", true},
		{"authority: lower flagged", auth, "bot", "crm", false},
		{"authority: equal flagged", ReconcilePolicy{Mode: ModeAuthority}, "x", "y", false},
		{"authority: unlisted ranks 0", auth, "stranger", "bot", false},
		{"authority: listed beats unlisted", auth, "bot", "stranger", true},
		{"authority: self-correction always", auth, "bot", "bot", true},
		{"authority: case-insensitive ranks", auth, "FHIR", "crm", true},
		{"unknown mode fails closed", ReconcilePolicy{Mode: "VOTE"}, "a", "b", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tc.p.Resolve(tc.new, tc.old)
			if got != tc.want {
				t.Errorf("Resolve(%q, %q) = %v (%s), want %v", tc.new, tc.old, got, why, tc.want)
			}
			if !got && why == "" {
				t.Error("a flag must say why")
			}
		})
	}
}

func TestDescribePolicy(t *testing.T) {
	r := []SourceRank{{"agent", 1}, {"fhir", 10}}
	SortRanks(r)
	p := ReconcilePolicy{Mode: ModeAuthority, Authority: r}
	tests := []struct{ got, want string }{
		{p.DescribeSet(), "Reconciliation policy for this space set to AUTHORITY.  authority ranks: {'fhir': 10, 'agent': 1}"},
		{p.DescribeGet(true), "Policy: AUTHORITY\n  authority ranks: {'fhir': 10, 'agent': 1}"},
		{ReconcilePolicy{Mode: ModeReview}.DescribeSet(), "Reconciliation policy for this space set to REVIEW."},
		{ReconcilePolicy{Mode: ModeRecency}.DescribeGet(true), "Policy: RECENCY"},
		{ReconcilePolicy{Mode: ModeRecency}.DescribeGet(false), "Policy: RECENCY (default — newer assertion wins)."},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestPyRepr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Switch her to apixaban 5mg twice daily.", "'Switch her to apixaban 5mg twice daily.'"},
		{"it's", `"it's"`},
		{`it's "x"`, `'it\'s "x"'`},
		{"a\nb\tc", `'a\nb\tc'`},
		{`back\slash`, `'back\\slash'`},
		{"bell\x07", `'bell\x07'`},
		{"zero\u200bwidth", `'zero\u200bwidth'`},
		{"dose — 5 mg ✅", "'dose — 5 mg ✅'"},
	}
	for _, tc := range tests {
		if got := PyRepr(tc.in); got != tc.want {
			t.Errorf("PyRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
