package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/teams/teamstest"
)

const (
	teamsAppID    = "11111111-2222-3333-4444-555555555555"
	teamsPassword = "e2e-client-secret"
	teamsTenant   = "99999999-8888-7777-6666-555555555555"
	teamsDefault  = "19:default@thread.tacv2"
	teamsOps      = "19:ops@thread.tacv2"
	smithOID      = "00000000-0000-0000-0000-000000000001"
	smithMRI      = "29:1-dr-smith"
	viewerOID     = "00000000-0000-0000-0000-000000000002"
	viewerMRI     = "29:1-viewer"
)

// teamsConfig is a config with Teams on, pointed at fake.
func teamsConfig(fake *teamstest.Server) string {
	return fmt.Sprintf(`
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    approvers: {roles: [member, admin]}
    channels: [ops]
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    channels: [ops]
teams:
  app_id_env: TEAMS_APP_ID
  app_password_env: TEAMS_APP_PASSWORD
  tenant_id: %s
  api_url: %s
  token_url: %s
  openid_metadata_url: %s
  issuer: %s
  channels: {default: %q, ops: %q}
principals:
  - name: dr_smith
    role: member
    teams: %s
  - name: ward_viewer
    role: viewer
    teams: %s
`, teamsTenant, fake.APIURL, fake.TokenURL, fake.MetadataURL, fake.Issuer, teamsDefault, teamsOps, smithOID, viewerOID)
}

type teamsEnv struct {
	*testEnv
	fake     *teamstest.Server
	agent    string
	adminKey string
}

func newTeamsEnv(t *testing.T) *teamsEnv {
	t.Helper()
	fake := teamstest.New(t, teamsAppID, teamsPassword)
	fake.AddMember(teamsOps, smithOID, smithMRI)
	fake.AddMember(teamsOps, viewerOID, viewerMRI)
	e := newTestEnv(t, teamsConfig(fake))
	e.env["TEAMS_APP_ID"] = teamsAppID
	e.env["TEAMS_APP_PASSWORD"] = teamsPassword
	te := &teamsEnv{testEnv: e, fake: fake}
	te.agent = e.CreateKey("ops_agent", "agent")
	te.adminKey = e.CreateKey("ops_admin", "admin")
	e.Start()
	return te
}

// click is an adaptiveCard/action invoke from the person (object id,
// Teams user id) on the card msg in conversation, as Teams sends it.
func teamsClick(id, oid, mri, conversation, msg, verb string, data map[string]string, serviceURL string) map[string]any {
	return map[string]any{
		"type": "invoke", "name": "adaptiveCard/action", "id": id, "channelId": "msteams", "serviceUrl": serviceURL,
		"timestamp":    time.Now().UTC().Format(time.RFC3339),
		"from":         map[string]any{"id": mri, "aadObjectId": oid, "name": "someone"},
		"recipient":    map[string]any{"id": "28:" + teamsAppID, "name": "Countersign"},
		"conversation": map[string]any{"id": conversation + ";messageid=" + msg, "conversationType": "channel", "tenantId": teamsTenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": teamsTenant}},
		"replyToId":    msg,
		"value":        map[string]any{"action": map[string]any{"type": "Action.Execute", "verb": verb, "data": data}, "trigger": "manual"},
	}
}

// invoke sends activity with a good token and decodes the invoke response.
func (e *teamsEnv) invoke(activity map[string]any) (kind string, card map[string]any, text string) {
	e.t.Helper()
	status, body := e.fake.Send(e.URL+"/teams/messages", activity, e.fake.Sign(e.fake.Claims(time.Now())))
	if status != http.StatusOK {
		e.t.Fatalf("invoke answered %d %s, want 200", status, body)
	}
	var r struct {
		StatusCode int             `json:"statusCode"`
		Type       string          `json:"type"`
		Value      json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.StatusCode != 200 {
		e.t.Fatalf("invoke response %s is not an adaptiveCard/action answer (%v)", body, err)
	}
	switch r.Type {
	case "application/vnd.microsoft.card.adaptive":
		_ = json.Unmarshal(r.Value, &card)
		return "card", card, string(r.Value)
	case "application/vnd.microsoft.activity.message":
		_ = json.Unmarshal(r.Value, &text)
		return "message", nil, text
	}
	e.t.Fatalf("invoke response of type %q, want an adaptive card or a message", r.Type)
	return
}

// verbs are the Action.Execute verbs of a card's actions, with their data.
func verbs(card map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	acts, _ := card["actions"].([]any)
	for _, a := range acts {
		m := a.(map[string]any)
		if m["type"] == "Action.Execute" {
			d, _ := m["data"].(map[string]any)
			out[m["verb"].(string)] = d
		}
	}
	return out
}

func strData(d map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range d {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestTeamsApprovalEndToEnd is a Teams approval against the fake Bot
// Connector and a local token issuer: the card posted (its refresh naming
// only the eligible approver), an ineligible member's view without
// buttons and their forged approval refused, the approver's click
// deciding it, the card replaced for everyone, a replayed activity
// deduplicated, and forged, expired or misdirected tokens refused (401).
func TestTeamsApprovalEndToEnd(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	req := e.MustOK(e.agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}, "summary": "payments is out of memory"})
	reqID, _ := req.Data["request_id"].(string)

	var msg teamstest.Message
	e.fake.Wait("the card posted in the ops channel", func() bool {
		for _, m := range e.fake.Messages(teamsOps) {
			if m.Card() != nil {
				msg = m
				return true
			}
		}
		return false
	})
	card := msg.Card()
	raw, _ := json.Marshal(card)
	if card["version"] != "1.5" || !strings.Contains(string(raw), "restart_service") || !strings.Contains(string(raw), "payments") {
		t.Errorf("posted card = %s, want an Adaptive Card 1.5 about restart_service on payments", raw)
	}
	ref, _ := card["refresh"].(map[string]any)
	if ids := fmt.Sprint(ref["userIds"]); ids != "["+smithMRI+"]" {
		t.Errorf("refresh.userIds = %s, want only the eligible approver [%s]", ids, smithMRI)
	}
	if v := verbs(card); v["approve"] != nil {
		t.Errorf("the shared card carries an Approve button: %s", raw)
	}
	if n := len(e.fake.CallsTo("POST", "v3/conversations/"+teamsOps+"/activities")); n != 1 {
		t.Errorf("%d posts to the ops channel, want 1", n)
	}
	for _, c := range e.fake.Calls() {
		if !strings.HasPrefix(c.Auth, "Bearer fake-access-token-") {
			t.Errorf("%s %s without the client-credentials token: %q", c.Method, c.Path, c.Auth)
		}
	}
	item := fmt.Sprint(ref["action"].(map[string]any)["data"].(map[string]any)["item"])

	// Tokens: none, forged, expired, for another app, naming another
	// service URL: 401, and nothing is decided.
	good := teamsClick("forge-0", smithOID, smithMRI, teamsOps, msg.ID, "approve", map[string]string{"item": item}, e.fake.APIURL)
	now := time.Now()
	expired := e.fake.Claims(now)
	expired["exp"] = now.Add(-10 * time.Minute).Unix()
	otherApp := e.fake.Claims(now)
	otherApp["aud"] = "22222222-2222-2222-2222-222222222222"
	otherService := e.fake.Claims(now)
	otherService["serviceurl"] = "https://attacker.example/"
	for name, tok := range map[string]string{
		"no token": "", "forged": e.fake.Forged(e.fake.Claims(now)), "expired": e.fake.Sign(expired),
		"another app": e.fake.Sign(otherApp), "another service URL": e.fake.Sign(otherService),
	} {
		if status, body := e.fake.Send(e.URL+"/teams/messages", good, tok); status != http.StatusUnauthorized {
			t.Errorf("%s: answered %d %s, want 401", name, status, body)
		}
	}
	// The right token with an activity claiming another service URL.
	moved := teamsClick("forge-1", smithOID, smithMRI, teamsOps, msg.ID, "approve", map[string]string{"item": item}, "https://attacker.example/")
	if status, _ := e.fake.Send(e.URL+"/teams/messages", moved, e.fake.Sign(e.fake.Claims(now))); status != http.StatusUnauthorized {
		t.Errorf("an activity naming another service URL than its token answered %d, want 401", status)
	}
	// Another Bot Framework channel (Web Chat says who the user is).
	webchat := teamsClick("forge-2", smithOID, smithMRI, teamsOps, msg.ID, "approve", map[string]string{"item": item}, e.fake.APIURL)
	webchat["channelId"] = "webchat"
	if status, _ := e.fake.Send(e.URL+"/teams/messages", webchat, e.fake.Sign(e.fake.Claims(now))); status != http.StatusForbidden {
		t.Errorf("an activity from Web Chat answered %d, want 403", status)
	}
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after refused tokens the request is %v, want pending", st.Data["status"])
	}

	// The viewer (no approve capability) sees no buttons, and a forged
	// approval from them is refused.
	kind, vcard, _ := e.invoke(teamsClick("v-1", viewerOID, viewerMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	if kind != "card" || verbs(vcard)["approve"] != nil {
		t.Errorf("the viewer's refreshed card = %v, want a card without Approve", vcard)
	}
	kind, _, text := e.invoke(teamsClick("v-2", viewerOID, viewerMRI, teamsOps, msg.ID, "approve", map[string]string{"item": item}, e.fake.APIURL))
	if !strings.Contains(text, "Access denied") {
		t.Errorf("the viewer's forged approval answered %s %s, want Access denied", kind, text)
	}
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after the viewer's forged click the request is %v, want pending", st.Data["status"])
	}

	// The approver's view has the buttons; the click decides.
	kind, scard, _ := e.invoke(teamsClick("s-1", smithOID, smithMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	approve := verbs(scard)["approve"]
	if kind != "card" || approve == nil || verbs(scard)["reject"] == nil {
		t.Fatalf("the approver's refreshed card = %v, want Approve and Reject", scard)
	}
	// The card update is throttled once: the outbox honours Retry-After.
	e.fake.Fail(teamstest.Failure{Method: "PUT", PathPrefix: "v3/conversations/" + teamsOps + "/activities/" + msg.ID, Status: 429, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":{"code":"TooManyRequests","message":"slow down"}}`})
	click := teamsClick("s-2", smithOID, smithMRI, teamsOps, msg.ID, "approve", strData(approve), e.fake.APIURL)
	kind, dcard, text := e.invoke(click)
	draw, _ := json.Marshal(dcard)
	if kind != "card" || !strings.Contains(string(draw), "Approved") || !strings.Contains(string(draw), "dr_smith") || verbs(dcard)["approve"] != nil {
		t.Fatalf("the approval answered %s %s %s, want the decided card without buttons", kind, draw, text)
	}
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "approved" {
		t.Fatalf("after the click the request is %v, want approved", st.Data["status"])
	}
	e.fake.Wait("the shared card replaced with the outcome", func() bool {
		m, _ := e.fake.Message(msg.ID)
		b, _ := json.Marshal(m.Card())
		return m.Updates > 0 && strings.Contains(string(b), "Approved")
	})
	up, _ := e.fake.Message(msg.ID)
	if up.Card()["refresh"] != nil || len(verbs(up.Card())) != 0 {
		t.Errorf("the decided card still refreshes or has buttons: %v", up.Card())
	}
	if n := len(e.fake.CallsTo("PUT", "v3/conversations/"+teamsOps+"/activities/"+msg.ID)); n < 2 {
		t.Errorf("%d updates, want the throttled one and its retry", n)
	}

	// The same activity delivered again is applied once.
	_, _, _ = e.invoke(click)
	// The server's log reaches e.logs through a pipe, a moment after the
	// answer: wait for the line rather than race it.
	waitFor(t, "the replayed activity logged as a duplicate delivery", func() bool {
		return strings.Contains(e.logs.String(), "duplicate delivery")
	})
	if n := strings.Count(e.auditText(t), `"action":"action_approved"`); n != 1 {
		t.Errorf("%d action_approved entries in the audit, want 1", n)
	}
	if e.fake.TokensIssued() != 1 {
		t.Errorf("%d access tokens requested, want 1 (cached until it expires)", e.fake.TokensIssued())
	}
}

// auditText is the audit log as an admin reads it.
func (e *teamsEnv) auditText(t *testing.T) string {
	t.Helper()
	return e.MustOK(e.adminKey, "audit_log", map[string]any{"limit": 200}).Raw
}

// TestTeamsDangerousApprovalEndToEnd: a destructive call on Teams says
// what Slack says (the danger first, what approving does, the arguments,
// why a person is asked), its Approve is the destructive button and opens
// the confirmation step instead of deciding, the step's button decides,
// and the vote records the card it was cast on (its Details show it).
func TestTeamsDangerousApprovalEndToEnd(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	req := e.MustOK(e.agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"}, "summary": "drop the old orders database", "dry_run": "DROP DATABASE orders_prod; -- 42 tables"})
	reqID, _ := req.Data["request_id"].(string)
	var msg teamstest.Message
	e.fake.Wait("the card posted in the ops channel", func() bool {
		for _, m := range e.fake.Messages(teamsOps) {
			if m.Card() != nil {
				msg = m
				return true
			}
		}
		return false
	})
	ref, _ := msg.Card()["refresh"].(map[string]any)
	item := fmt.Sprint(ref["action"].(map[string]any)["data"].(map[string]any)["item"])

	kind, scard, raw := e.invoke(teamsClick("d-1", smithOID, smithMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	for _, want := range []string{"delete_database is destructive", "If you approve:", "With these arguments:", "db_name: ", "orders_prod", "Why you are asked:", `"title":"Details"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("the approver's card does not say %q: %s", want, raw)
		}
	}
	approve := verbs(scard)["approve"]
	if kind != "card" || approve == nil {
		t.Fatalf("the approver's card = %s, want Approve", raw)
	}
	for _, a := range scard["actions"].([]any) {
		if m := a.(map[string]any); m["verb"] == "approve" && m["style"] != "destructive" {
			t.Errorf("Approve of a destructive call is styled %v, want destructive", m["style"])
		}
	}
	kind, ccard, raw := e.invoke(teamsClick("d-2", smithOID, smithMRI, teamsOps, msg.ID, "approve", strData(approve), e.fake.APIURL))
	confirm := verbs(ccard)["approve_confirm"]
	if kind != "card" || confirm == nil || !strings.Contains(raw, "It cannot be undone") || !strings.Contains(raw, "You will be recorded as its approver") {
		t.Fatalf("Approve answered %s %s, want the confirmation step", kind, raw)
	}
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("Approve alone decided the destructive call: %v, want pending", st.Data["status"])
	}
	seen := fmt.Sprint(confirm["seen"])
	if len(seen) != 64 {
		t.Fatalf("the confirmation button carries seen %q, want the card's SHA-256", seen)
	}
	kind, _, raw = e.invoke(teamsClick("d-3", smithOID, smithMRI, teamsOps, msg.ID, "approve_confirm", strData(confirm), e.fake.APIURL))
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "approved" {
		t.Fatalf("after the confirmation (%s %s) the request is %v, want approved", kind, raw, st.Data["status"])
	}
	_, _, raw = e.invoke(teamsClick("d-4", smithOID, smithMRI, teamsOps, msg.ID, "details", map[string]string{"item": item}, e.fake.APIURL))
	if !strings.Contains(raw, "dr_smith") || !strings.Contains(raw, "teams card sha256 "+seen[:16]) {
		t.Errorf("the Details do not show the card the vote was cast on (%s): %s", seen[:16], raw)
	}
}
