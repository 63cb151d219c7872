package config

import (
	"strings"
	"testing"
)

// TestOnCallLadderConfig: approvals.escalation_oncall names a declared
// rotation (any letter case) and needs an escalation to address; each
// problem names the key.
func TestOnCallLadderConfig(t *testing.T) {
	t.Parallel()
	const rotation = `oncall:
  ops: {people: [alice, bob], start: "2026-12-01T09:00:00Z", length: 24h}
`
	cfg, err := Parse([]byte(rotation+"approvals:\n  escalate_after: 20m\n  escalation_oncall: OPS\n"), t.TempDir())
	if err != nil {
		t.Fatalf("a valid on-call ladder: %v", err)
	}
	if cfg.Approvals.EscalationOnCall != "OPS" {
		t.Fatalf("escalation_oncall read as %q, want %q", cfg.Approvals.EscalationOnCall, "OPS")
	}
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"an undeclared rotation", rotation + "approvals:\n  escalate_after: 20m\n  escalation_oncall: nurses\n", `approvals.escalation_oncall: "nurses" is not a rotation under oncall:`},
		{"nothing escalates", rotation + "approvals:\n  escalation_oncall: ops\n", "approvals.escalation_oncall: is set but approvals.escalate_after is not"},
	} {
		_, err := Parse([]byte(tt.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want a problem containing %q", tt.name, err, tt.want)
		}
	}
}
