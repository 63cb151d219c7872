package config

import (
	"strings"
	"testing"
)

// TestToolStepUpMethodConfig: tools[].step_up.method is a minimum
// assurance (oidc, oidc_step_up), wired to the tool; a weaker or unknown
// method, one beside standing grants, passkey (not built), and a minimum
// without the console's OIDC are refused, each naming the key.
func TestToolStepUpMethodConfig(t *testing.T) {
	t.Parallel()
	const oidc = `web:
  oidc: {issuer: "https://login.example.org", client_id: cs, client_secret_env: OIDC_SECRET}
`
	cfg, err := Parse([]byte("tools:\n  - {name: order_medication, category: mutating, step_up: {method: OIDC_step_up}}\n"+oidc), t.TempDir())
	if err != nil {
		t.Fatalf("a valid minimum: %v", err)
	}
	if s := cfg.Tools[0].StepUp; s == nil || s.Method != "OIDC_step_up" {
		t.Fatalf("tools[0].step_up: %+v", s)
	}
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"a weaker method", "tools:\n  - {name: t, category: mutating, step_up: {method: chat}}\n" + oidc, `tools[0].step_up.method: "chat" is what every decider has at least`},
		{"an unknown method", "tools:\n  - {name: t, category: mutating, step_up: {method: sms}}\n" + oidc, `tools[0].step_up.method: unknown method "sms"`},
		{"beside grants", "tools:\n  - {name: t, category: mutating, grants: {max: 1h, allow: [once]}, step_up: {method: oidc}}\n" + oidc, "tools[0].step_up.method: every approval of t needs OIDC, and a standing grant"},
		{"passkey", "tools:\n  - {name: t, category: mutating, step_up: {method: passkey}}\n" + oidc, "tools[0].step_up.method: passkey step-up is not available"},
		{"no OIDC", "tools:\n  - {name: t, category: mutating, step_up: {method: oidc}}\n", "tools[0].step_up: OIDC is an authentication in the web console, so it needs web.enabled: true and web.oidc"},
		{"an unknown key", "tools:\n  - {name: t, category: mutating, step_up: {methods: oidc}}\n" + oidc, "tools[0].step_up.methods"},
	} {
		_, err := Parse([]byte(tt.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
