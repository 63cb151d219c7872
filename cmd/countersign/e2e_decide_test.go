package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// TestOneDecisionRuleE2E plays issue 9.4's attack against the real server:
// a member-role key of kind agent confirming a held medication change, a
// member-role service key writing as the trusted source to skip the gate.
// Both held before the one decision rule (policy.Decide) was used
// by every decision.
func TestOneDecisionRuleE2E(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("ward_bot", "agent")
	agentMember := e.CreateKey("helper_bot", "member", "--kind", "agent")
	serviceMember := e.CreateKey("ingest", "member", "--kind", "service")
	fhir := e.CreateKey("fhir", "agent")
	nurse := e.CreateKey("nurse_jo", "member")
	scopedNurse := e.CreateKey("nurse_99", "member", "--scopes", "patient_99")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	p42 := func(kv ...any) map[string]any {
		m := map[string]any{"user_id": "patient_42"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	wantText(t, e.MustOK(fhir, "remember", p42("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir")), 200, "Stored: [ADD] active_medication = warfarin 5mg daily")
	wantText(t, e.MustOK(agent, "remember", p42("subject", "active_medication", "value", "apixaban 5mg twice daily", "replaces", "warfarin")), 200, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")

	denied := func(r toolResponse, fragment string) {
		t.Helper()
		if r.Status != http.StatusForbidden || !strings.HasPrefix(r.Text, "Access denied: ") || !strings.Contains(r.Text, fragment) {
			t.Fatalf("want 403 containing %q, got %s", fragment, r)
		}
	}
	// The attack: "Approved #2: SUPERSEDE …" must not happen.
	denied(e.Call(agentMember, "confirm_change", p42("memory_id", 2)), "helper_bot [prin_")
	denied(e.Call(agentMember, "confirm_change", p42("memory_id", 2)), "is an agent principal")
	denied(e.Call(serviceMember, "reject_change", p42("memory_id", 2)), "is a service principal")
	// Out of scope, and the proposer itself, are refused by the same rule.
	denied(e.Call(scopedNurse, "confirm_change", p42("memory_id", 2)), "outside your assigned scope")
	// A member-role service key writing as the trusted source does not
	// skip the confirm gate: it is refused and nothing is stored.
	denied(e.Call(serviceMember, "remember", p42("subject", "active_medication", "value", "digoxin", "source", "fhir")), "'fhir' is a trusted source")
	// Nor does an agent-kind member's edit of a confirm slot apply at once.
	r := e.MustOK(agentMember, "update_memory", p42("memory_id", 1, "new_value", "aspirin 75mg"))
	if !strings.HasPrefix(r.Text, "Queued #") {
		t.Fatalf("an agent-kind member's edit of a confirm slot applied: %s, want it %q…", r, "Queued #")
	}
	wantText(t, e.MustOK(agent, "check_before_act", p42("subject", "active_medication")), 200,
		"⛔ BLOCKED — do NOT act on 'active_medication':\n  • unresolved conflict (FLAGGED) — the value is disputed")
	// Every refusal is audited.
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if n := strings.Count(log.Text, "access_denied"); n < 5 {
		t.Fatalf("want 5 audited refusals, got %d in:\n%s", n, log.Text)
	}
	// A person holding approve decides.
	wantText(t, e.MustOK(nurse, "confirm_change", p42("memory_id", 2)), 200, "Approved #2: SUPERSEDE active_medication = apixaban 5mg twice daily")
}

// TestSlackClickOutOfScopeE2E plays issue 9.6's attack against the real
// server and a fake Slack: dr_smith is scoped to patient_42 in principals:,
// and clicks Approve on a patient_99 proposal. The click is refused
// privately and audited, and nothing changes; the same person approves a
// patient_42 proposal.
func TestSlackClickOutOfScopeE2E(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	cfg := slackConfig(f, "http") + "    scopes: [patient_42]\n"
	e := newTestEnv(t, cfg)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	e.MustOK(agent, "remember", map[string]any{"user_id": "patient_99", "subject": "code_status", "value": "full code"})
	e.MustOK(agent, "remember", map[string]any{"user_id": "patient_99", "subject": "code_status", "value": "DNR"})
	waitFor(t, "the patient_99 proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	click := func(item, trigger string) {
		t.Helper()
		p, _ := json.Marshal(map[string]any{
			"type": "block_actions", "trigger_id": trigger,
			"user": map[string]any{"id": "U0123ABC", "team_id": "T1"}, "team": map[string]any{"id": "T1"},
			"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
			"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + item, "value": item, "action_ts": "1.1"}},
		})
		if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
			t.Fatalf("click answered %d, want %d", code, http.StatusOK)
		}
	}
	click("1", "t-out")
	waitFor(t, "the private refusal", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	eph := f.Calls("chat.postEphemeral")[0]
	if eph.Form.Get("user") != "U0123ABC" || !strings.Contains(eph.Form.Get("text"), "outside your assigned scope") {
		t.Fatalf("refusal: %v, want a private one to U0123ABC saying %q", eph.Form, "outside your assigned scope")
	}
	if n := len(f.Calls("chat.update")); n != 0 {
		t.Fatalf("the out-of-scope click updated the message (%d updates), want 0", n)
	}
	if r := e.MustOK(agent, "pending_changes", map[string]any{"user_id": "patient_99"}); !strings.Contains(r.Text, "1 change(s) awaiting approval") {
		t.Fatalf("patient_99 after the refused click: %q, want it to say %q", r.Text, "1 change(s) awaiting approval")
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 20})
	if !strings.Contains(log.Text, "access_denied") || !strings.Contains(log.Text, "dr_smith [U0123ABC]") || !strings.Contains(log.Text, "outside your assigned scope") {
		t.Fatalf("the refusal is not audited as dr_smith (want %q, %q and %q in the log):\n%s", "access_denied", "dr_smith [U0123ABC]", "outside your assigned scope", log.Text)
	}

	// In scope, the same person decides.
	e.MustOK(agent, "remember", map[string]any{"user_id": "patient_42", "subject": "code_status", "value": "full code"})
	e.MustOK(agent, "remember", map[string]any{"user_id": "patient_42", "subject": "code_status", "value": "DNR"})
	waitFor(t, "the patient_42 proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 2 })
	click("2", "t-in")
	waitFor(t, "the message to be updated", func() bool { return len(f.Calls("chat.update")) == 1 })
	if r := e.MustOK(agent, "pending_changes", map[string]any{"user_id": "patient_42"}); !strings.Contains(r.Text, "No changes awaiting approval") {
		t.Fatalf("patient_42 after the click: %q, want it to say %q", r.Text, "No changes awaiting approval")
	}
}

// TestChatPrincipalScopesConfig: principals: takes scopes; an empty list,
// a blank entry, "*" mixed with others, or scopes on an admin are refused
// at start with the key named (issue 9.6, 9.8).
func TestChatPrincipalScopesConfig(t *testing.T) {
	t.Parallel()
	base := "principals:\n  - name: dr_smith\n    slack: U0123ABC\n"
	cfg, err := config.Parse([]byte(base+"    role: member\n    scopes: [patient_42, patient_7]\n"), t.TempDir())
	if err != nil || len(cfg.Principals) != 1 || strings.Join(cfg.Principals[0].Scopes, ",") != "patient_42,patient_7" {
		t.Fatalf("scoped principal: %v %+v, want 1 principal with scopes [patient_42 patient_7]", err, cfg)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"    role: member\n    scopes: []\n", "principals[0].scopes: the list is empty"},
		{"    role: member\n    scopes: [\" \"]\n", "principals[0].scopes: entry 0 is blank"},
		{"    role: member\n    scopes: [\"*\", patient_42]\n", "cannot be combined"},
		{"    role: admin\n    scopes: [patient_42]\n", "principals[0].scopes: the admin role is never limited by scopes"},
	} {
		if _, err := config.Parse([]byte(base+tt.yaml), t.TempDir()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

// TestAdminKeyScopesRefused plays issue 9.8: scopes on an admin key were
// accepted and then ignored. Both the CLI and create_principal refuse them,
// and no key is made.
func TestAdminKeyScopesRefused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	var out, errb strings.Builder
	err := run(context.Background(), []string{"keys", "create", "--config", e.cfg, "--name", "root", "--role", "admin", "--scopes", "patient_42"}, e.getenv, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "an admin key is never limited by scopes") || out.Len() != 0 {
		t.Fatalf("keys create --role admin --scopes: err %v, printed %q; want an error saying %q, nothing printed", err, out.String(), "an admin key is never limited by scopes")
	}
	admin := e.CreateKey("ops", "admin")
	e.Start()
	r := e.Call(admin, "create_principal", map[string]any{"name": "root2", "role": "admin", "scopes": "patient_42"})
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Text, "an admin key is never limited by scopes") {
		t.Fatalf("create_principal admin with scopes: %s, want %d saying %q", r, http.StatusBadRequest, "an admin key is never limited by scopes")
	}
	if r := e.MustOK(admin, "list_principals", map[string]any{}); strings.Contains(r.Text, "root2") {
		t.Fatalf("a refused admin key was stored, want no root2 in the list: %s", r.Text)
	}
	// A member key takes scopes.
	if r := e.Call(admin, "create_principal", map[string]any{"name": "ward", "role": "member", "scopes": "patient_42"}); r.Status != http.StatusOK {
		t.Fatalf("member with scopes: status = %d, want %d: %s", r.Status, http.StatusOK, r)
	}
}
