package policy

import (
	"strings"
	"testing"
)

func TestParseApprovalMode(t *testing.T) {
	tests := []struct {
		in   string
		want ApprovalMode
	}{
		{"off", ApprovalOff},
		{"yolo", ApprovalOff},
		{"None", ApprovalOff},
		{"normal", ApprovalNormal},
		{"DEFAULT", ApprovalNormal},
		{"standard", ApprovalNormal},
		{"protective", ApprovalProtective},
		{"Paranoid", ApprovalProtective},
		{" careful ", ApprovalProtective},
	}
	for _, tt := range tests {
		got, err := ParseApprovalMode(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseApprovalMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	names := []string{"off", "normal", "protective", "paranoid", "careful", "default", "standard", "yolo", "none"}
	for _, name := range names {
		if _, err := ParseApprovalMode(name); err != nil {
			t.Errorf("ParseApprovalMode(%q): %v", name, err)
		}
	}
	for _, bad := range []string{"", "strict", "on", "offf", "normal please"} {
		_, err := ParseApprovalMode(bad)
		if err == nil {
			t.Errorf("ParseApprovalMode(%q) = nil error, want one", bad)
			continue
		}
		for _, name := range names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("ParseApprovalMode(%q) error %q does not list %q", bad, err, name)
			}
		}
	}
}

func TestApprovalPrompt(t *testing.T) {
	if p := ApprovalPrompt(ApprovalOff); p != "" {
		t.Fatalf("ApprovalPrompt(off) = %q, want no prompt", p)
	}
	for _, m := range []ApprovalMode{ApprovalNormal, ApprovalProtective} {
		p := ApprovalPrompt(m)
		for _, want := range []string{"request_approval", "record_approval", "batch the safe steps", "Never pause to ask about read-only inspection", "Plan", "One approval covers one action"} {
			if !strings.Contains(p, want) {
				t.Errorf("%s prompt lacks %q", m, want)
			}
		}
	}
	if n := ApprovalPrompt(ApprovalNormal); !strings.Contains(n, "force-pushing") || !strings.Contains(n, "spending money") || !strings.Contains(n, "Ordinary edits and local, reversible changes proceed") {
		t.Errorf("normal prompt = %q, want it to contain %q, %q and %q (the seed's level table)", n, "force-pushing", "spending money", "Ordinary edits and local, reversible changes proceed")
	}
	if p := ApprovalPrompt(ApprovalProtective); !strings.Contains(p, "installing or removing packages") || !strings.Contains(p, "not plainly read-only") {
		t.Errorf("protective prompt = %q, want it to contain %q and %q (the seed's level table)", p, "installing or removing packages", "not plainly read-only")
	}
}
