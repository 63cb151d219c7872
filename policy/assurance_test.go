package policy

import (
	"strings"
	"testing"
	"time"
)

func TestAssuranceOf(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		d      Decider
		within time.Duration
		want   Assurance
	}{
		{"a Slack click", Decider{Surface: "slack"}, 0, AssuranceChat},
		{"a Teams click with a fresh sign-in elsewhere", Decider{Surface: "teams", AuthAt: at}, 0, AssuranceChat},
		{"an API key", Decider{Surface: "http"}, 0, AssuranceKey},
		{"MCP", Decider{Surface: "mcp"}, 0, AssuranceKey},
		{"a link session", Decider{Surface: "web", SignIn: "link"}, 0, AssuranceLink},
		{"an OIDC session of an hour ago", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(-time.Hour), AuthMethod: "oidc"}, 0, AssuranceOIDC},
		{"an OIDC sign-in 4 minutes ago, default freshness", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(-4 * time.Minute), AuthMethod: "oidc"}, 0, AssuranceStepUp},
		{"an OIDC sign-in 4 minutes ago, a 2-minute window", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(-4 * time.Minute), AuthMethod: "oidc"}, 2 * time.Minute, AssuranceOIDC},
		{"a fresh passkey", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(-time.Minute), AuthMethod: "passkey"}, 0, AssurancePasskey},
		{"a stale passkey", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(-time.Hour), AuthMethod: "passkey"}, 0, AssuranceOIDC},
		{"a sign-in from the future", Decider{Surface: "web", SignIn: "oidc", AuthAt: at.Add(time.Hour), AuthMethod: "oidc"}, 0, AssuranceOIDC},
	}
	for _, tt := range tests {
		if got := AssuranceOf(tt.d, tt.within, at); got != tt.want {
			t.Errorf("%s: AssuranceOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAssuranceOrder(t *testing.T) {
	if !AssurancePasskey.AtLeast(AssuranceStepUp) || !AssuranceStepUp.AtLeast(AssuranceOIDC) || AssuranceOIDC.AtLeast(AssuranceStepUp) {
		t.Error("passkey >= oidc_step_up >= oidc does not hold")
	}
	for _, weak := range []Assurance{AssuranceKey, AssuranceChat, AssuranceLink, "", "bogus"} {
		if weak.AtLeast(AssuranceOIDC) {
			t.Errorf("Assurance(%q).AtLeast(oidc) = true, want false", weak)
		}
	}
	if !Assurance("").AtLeast("") {
		t.Error(`Assurance("").AtLeast("") = false, want true (no minimum)`)
	}
	if got := Weakest([]Assurance{AssurancePasskey, AssuranceOIDC, AssuranceStepUp}); got != AssuranceOIDC {
		t.Errorf("Weakest = %q, want oidc", got)
	}
	if got := Weakest([]Assurance{AssurancePasskey, ""}); got != "" {
		t.Errorf("Weakest with an unrecorded vote = %q, want none", got)
	}
	for in, want := range map[string]string{"OIDC": "oidc", " passkey ": "passkey", "oidc_step_up": "oidc_step_up", "chat": "a minimum is oidc", "sms": "unknown method"} {
		a, err := ParseAssurance(in)
		got := string(a)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("ParseAssurance(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDecideAssurance: a minimum is checked last, only for an
// approval that passes every other check, and its refusal is a step-up
// refusal (surfaces offer the console link) naming what is needed and
// what the decider had.
func TestDecideAssurance(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	it := Decidable{Ref: "req_1", SpaceUserID: "ward7", MinAssurance: AssuranceOIDC, At: at}
	chat := person("dr_smith", "chat:dr_smith", RoleMember)
	chat.Surface = "slack"
	r := checkDecision(chat, it)
	if r.Check != CheckAssurance || !strings.HasPrefix(r.Message, "Access denied: "+StepUpRequired) || !strings.Contains(r.Message, "approved only with a console session opened at the identity provider (OIDC), and dr_smith [chat:dr_smith] decided with chat click") {
		t.Fatalf("a chat click under a minimum of oidc: %+v, want check %s, a message starting %q and containing %q", r, CheckAssurance, "Access denied: "+StepUpRequired, "approved only with a console session opened at the identity provider (OIDC), and dr_smith [chat:dr_smith] decided with chat click")
	}
	web := person("dr_smith", "web:dr_smith", RoleMember)
	web.Surface, web.SignIn, web.AuthAt, web.AuthMethod = "web", "oidc", at.Add(-time.Hour), "oidc"
	if r := checkDecision(web, it); r.Check != CheckAllowed {
		t.Fatalf("an OIDC session under a minimum of oidc: %+v, want check %s", r, CheckAllowed)
	}
	it.MinAssurance = AssuranceStepUp
	if r := checkDecision(web, it); r.Check != CheckAssurance || !strings.Contains(r.Message, "decided with OIDC") {
		t.Fatalf("an hour-old OIDC sign-in under a minimum of oidc_step_up: %+v, want check %s saying %q", r, CheckAssurance, "decided with OIDC")
	}
	viewer := person("vic", "prin_v", RoleViewer)
	if r := checkDecision(viewer, it); r.Check != CheckCapability {
		t.Fatalf("a viewer: %+v, want check %s (the capability is checked before the assurance)", r, CheckCapability)
	}
}
