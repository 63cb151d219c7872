package config

import (
	"strings"
	"testing"
)

// TestToolStepUpMethodConfig: tools[].step_up.method is a minimum
// assurance (oidc, oidc_step_up), wired to the tool; a weaker or unknown
// method, one beside standing grants, passkey without web.passkeys, and a
// minimum without the console's OIDC are refused, each naming the key;
// passkey with web.passkeys is accepted, and web.passkeys is checked.
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
		t.Fatalf("tools[0].step_up = %+v, want method %q", s, "OIDC_step_up")
	}
	const passkeys = "  passkeys: {rp_id: countersign.example.org, origins: [\"https://countersign.example.org\"]}\n"
	cfg, err = Parse([]byte("tools:\n  - {name: order_medication, category: mutating, step_up: {method: passkey}}\n"+oidc+passkeys), t.TempDir())
	if err != nil {
		t.Fatalf("passkey with web.passkeys: %v", err)
	}
	if pk := cfg.Web.Passkeys.Options(); pk == nil || pk.RPID != "countersign.example.org" || len(pk.Origins) != 1 {
		t.Fatalf("web.passkeys as the console takes it = %+v, want rp_id %q and one origin", pk, "countersign.example.org")
	}
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"a weaker method", "tools:\n  - {name: t, category: mutating, step_up: {method: chat}}\n" + oidc, `tools[0].step_up.method: "chat" is what every decider has at least`},
		{"an unknown method", "tools:\n  - {name: t, category: mutating, step_up: {method: sms}}\n" + oidc, `tools[0].step_up.method: unknown method "sms"`},
		{"beside grants", "tools:\n  - {name: t, category: mutating, grants: {max: 1h, allow: [once]}, step_up: {method: oidc}}\n" + oidc, "tools[0].step_up.method: every approval of t needs OIDC, and a standing grant"},
		{"passkey", "tools:\n  - {name: t, category: mutating, step_up: {method: passkey}}\n" + oidc, "tools[0].step_up.method: passkey step-up needs passkeys in the console: set web.passkeys"},
		{"passkeys without rp_id", oidc + "  passkeys: {origins: [\"https://countersign.example.org\"]}\n", "web.passkeys.rp_id: required"},
		{"an origin outside rp_id", oidc + "  passkeys: {rp_id: example.org, origins: [\"https://countersign.example.com\"]}\n", "web.passkeys: origin https://countersign.example.com is not under the relying party id example.org"},
		{"passkeys without OIDC", "web:\n  passkeys: {rp_id: example.org}\n", "web.passkeys: registering a passkey needs a fresh sign-in at your identity provider"},
		{"no OIDC", "tools:\n  - {name: t, category: mutating, step_up: {method: oidc}}\n", "tools[0].step_up: OIDC is an authentication in the web console, so it needs web.enabled: true and web.oidc"},
		{"an unknown key", "tools:\n  - {name: t, category: mutating, step_up: {methods: oidc}}\n" + oidc, "tools[0].step_up.methods"},
	} {
		_, err := Parse([]byte(tt.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
