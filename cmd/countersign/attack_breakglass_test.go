package main

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

func attackBreakGlassConfig(m *mockoidc.MockOIDC) string {
	return `http:
  rate_burst: 1000
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    approvers: {roles: [member]}
    quorum: 2
break_glass:
  tools: [restart_service]
  review:
    approvers: {roles: [member, admin]}
    quorum: 2
    within: 24h
principals:
  - {name: alice, role: member, web: alice@hospital.example}
  - {name: bob, role: member, web: bob@hospital.example}
  - {name: carol, role: member, web: carol@hospital.example}
web:
  oidc:
    issuer: ` + m.Issuer() + `
    client_id: ` + m.ClientID + `
    client_secret_env: OIDC_SECRET
`
}

// TestAttackBreakGlassAroundTheReview, on the real server: alice breaks
// glass in the console after a fresh OIDC sign-in (over HTTP). Before
// that, bob, to whom alice lent her approvals, may not break glass on her
// request (break-glass is the requester's own, and a delegation lends
// none). After it: an agent key may not countersign the review; alice may
// neither countersign nor dispute her own review with her API key, nor
// countersign it under a delegation bob lends her; bob's countersignature
// counts once whether it comes from his key or his console session; only
// carol's second one clears it.
func TestAttackBreakGlassAroundTheReview(t *testing.T) {
	t.Parallel()
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, attackBreakGlassConfig(m))
	e.env["OIDC_SECRET"] = m.ClientSecret
	aliceKey := e.CreateKey("alice", "member", "--kind", "person")
	bobKey := e.CreateKey("bob", "member", "--kind", "person")
	carolKey := e.CreateKey("carol", "member", "--kind", "person")
	agent := e.CreateKey("ops_agent", "member", "--kind", "agent")
	admin := e.CreateKey("root", "admin")
	e.Start()
	status := func(rid string) toolResponse {
		return e.MustOK(admin, "action_status", map[string]any{"request_id": rid})
	}
	forbidden := func(what string, res toolResponse) {
		t.Helper()
		if res.Status != http.StatusForbidden {
			t.Errorf("%s: answered %d %s, want 403", what, res.Status, res.Raw)
		}
	}

	r := e.MustOK(aliceKey, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}})
	reqID, itemID := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	e.MustOK(aliceKey, "delegate_approvals", map[string]any{"to": "bob", "for": "4h"})
	forbidden("bob breaking glass on alice's request under her delegation",
		e.Call(bobKey, "approve_action", map[string]any{"request_id": reqID, "break_glass": true, "reason": "she asked me"}))
	if st := status(reqID); st.Data["status"] != "pending" {
		t.Fatalf("after bob's break-glass: %v, want pending", st.Data["status"])
	}

	alice := oidcSignInHTTP(t, e, m, stepUpUser{&mockoidc.MockUser{Subject: "u-alice", Email: "alice@hospital.example", EmailVerified: true}, time.Now()})
	_, page := webDo(t, alice, "GET", e.URL+"/ui/items/"+itemID, nil)
	form := consoleForm(t, page, "break-glass-approve", url.Values{"action": {"break_glass"}, "reason": {"payments down, on-call unreachable"}})
	if resp, body := webDo(t, alice, "POST", e.URL+"/ui/items/"+itemID+"/decide", form); resp.StatusCode >= 400 {
		t.Fatalf("alice's break-glass answered %d, want below 400:\n%s", resp.StatusCode, body)
	}
	st := status(reqID)
	bg, _ := st.Data["break_glass"].(map[string]any)
	if st.Data["status"] != "approved" || bg == nil {
		t.Fatalf("after alice's break-glass: status = %v, break_glass = %v, want approved with a break_glass record: %s", st.Data["status"], st.Data["break_glass"], st.Raw)
	}
	reviewID := bg["review_id"].(string)

	forbidden("an agent countersigning", e.Call(agent, "countersign_review", map[string]any{"review_id": reviewID}))
	forbidden("the breaker countersigning with her key", e.Call(aliceKey, "countersign_review", map[string]any{"review_id": reviewID}))
	forbidden("the breaker disputing with her key", e.Call(aliceKey, "dispute_review", map[string]any{"review_id": reviewID, "reason": "fine really"}))
	e.MustOK(aliceKey, "end_delegation", map[string]any{})
	e.MustOK(bobKey, "delegate_approvals", map[string]any{"to": "alice", "for": "4h"})
	forbidden("the breaker countersigning under bob's delegation", e.Call(aliceKey, "countersign_review", map[string]any{"review_id": reviewID}))
	e.MustOK(bobKey, "end_delegation", map[string]any{})

	first := e.MustOK(bobKey, "countersign_review", map[string]any{"review_id": reviewID})
	itemOfReview := fmt.Sprint(first.Data["item_id"])
	bob := oidcSignInHTTP(t, e, m, stepUpUser{&mockoidc.MockUser{Subject: "u-bob", Email: "bob@hospital.example", EmailVerified: true}, time.Now()})
	_, page = webDo(t, bob, "GET", e.URL+"/ui/items/"+itemOfReview, nil)
	form = consoleForm(t, page, "approve", nil)
	if resp, body := webDo(t, bob, "POST", e.URL+"/ui/items/"+itemOfReview+"/decide", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's console countersignature answered %d, want %d:\n%s", resp.StatusCode, http.StatusSeeOther, body)
	}
	second := e.Call(bobKey, "countersign_review", map[string]any{"review_id": reviewID})
	if second.Data["status"] != "open" || fmt.Sprint(second.Data["countersigned_by"]) != fmt.Sprint(first.Data["countersigned_by"]) {
		t.Fatalf("bob from his key and his console session: %s, want open, counted once as %v", second.Raw, first.Data["countersigned_by"])
	}
	done := e.MustOK(carolKey, "countersign_review", map[string]any{"review_id": reviewID})
	if done.Data["status"] != "cleared" {
		t.Fatalf("after carol: %s, want cleared", done.Raw)
	}
}
