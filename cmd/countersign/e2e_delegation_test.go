package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/email/smtptest"
	"github.com/countersign/countersign/bot/bottest"
)

// Delegation and on-call (issue 25 item 5), end to end on the real server:
// a delegation set in the console lets the delegate approve by a Slack
// click, in the delegator's name, and a Slack deactivation of the
// delegator ends it at once; an escalation reaches the person on call in
// the rotation at the server's clock, in Slack and by email.

func delegationConfig(f *slackFake) string {
	return `tools:
  - name: transfer_funds
    category: mutating
    schema: {type: object, required: [amount]}
    approvers: {principals: [alice]}
slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - {name: alice, role: member, slack: U0ALICE, web: alice@hospital.example}
  - {name: bob, role: member, slack: U0BOB}
`
}

// TestE2EDelegationConsoleThenSlack: bob may not approve alice's tool;
// alice delegates to bob in the console; the Slack card says so; bob's
// click approves, recorded as bob's for alice; the audit has it; when
// Slack deactivates alice the delegation ends at once, and bob's next
// click is refused.
func TestE2EDelegationConsoleThenSlack(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	// More calls a minute than the default limit allows (on PostgreSQL
	// the limit is counted in the database, for the whole cluster).
	e := newTestEnv(t, "http:\n  rate_per_minute: 600000\n  rate_burst: 100000\n"+delegationConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("pay_bot", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	request := func(amount int) (rid, item, value string) {
		t.Helper()
		before := len(f.Calls("chat.postMessage"))
		r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "transfer_funds", "arguments": map[string]any{"amount": amount}})
		waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) > before })
		m := approveValueRE.FindStringSubmatch(slackJSON(f.Calls("chat.postMessage")[before].Form.Get("blocks")))
		if m == nil {
			t.Fatalf("the card has no Approve (want a countersign.approve button with an item:version value): %s", f.Calls("chat.postMessage")[before].Form.Get("blocks"))
		}
		return r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"]), m[1] + ":" + m[2]
	}
	status := func(rid string) toolResponse {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	}
	audit := func() string { return e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw }

	rid, item, value := request(120)
	slackApproveClick(t, e, "U0BOB", "t-1", item, value)
	waitFor(t, "bob's refusal audited", func() bool {
		return strings.Contains(audit(), "transfer_funds requests are decided by principals alice")
	})
	if st := status(rid); st.Data["status"] != "pending" {
		t.Fatalf("bob's click before the delegation: %s, want pending", st)
	}

	// alice delegates to bob in the console.
	c := signInHTTP(t, e, "alice")
	_, page := webDo(t, c, "GET", e.URL+"/ui/delegation", nil)
	csrf := csrfRE.FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, `id="delegate-form"`) || !strings.Contains(page, `id="no-delegation"`) {
		t.Fatalf("the delegation page:\n%s\nwant a CSRF token, %q and %q", page, `id="delegate-form"`, `id="no-delegation"`)
	}
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/delegation", url.Values{"to": {"bob"}, "until": {"2030-01-01T00:00"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a delegation without its CSRF token answered %d, want 403", resp.StatusCode)
	}
	resp, _ := webDo(t, c, "POST", e.URL+"/ui/delegation", url.Values{"csrf": {csrf[1]}, "to": {"alice"}, "until": {time.Now().UTC().Add(4 * time.Hour).Format("2006-01-02T15:04")}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "problem=") {
		t.Fatalf("delegating to herself answered %d %s, want a problem", resp.StatusCode, loc)
	}
	until := time.Now().UTC().Add(4 * time.Hour).Truncate(time.Minute)
	resp, _ = webDo(t, c, "POST", e.URL+"/ui/delegation", url.Values{"csrf": {csrf[1]}, "to": {"bob"}, "until": {until.Format("2006-01-02T15:04")}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/delegation?done=set" {
		t.Fatalf("the delegation answered %d %s, want %d %s", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/delegation?done=set")
	}
	line := "alice, away; delegated to bob until " + until.Format("2006-01-02 15:04") + " UTC"
	if _, page = webDo(t, c, "GET", e.URL+"/ui/delegation", nil); !strings.Contains(page, line) || !strings.Contains(page, `id="end-mine"`) {
		t.Fatalf("the page lacks %q or %q, want both in it:\n%s", line, `id="end-mine"`, page)
	}
	waitFor(t, "the Slack card shows the delegation", func() bool {
		for _, u := range f.Calls("chat.update") {
			if strings.Contains(u.Form.Get("blocks"), line) {
				return true
			}
		}
		return false
	})

	// bob approves by a Slack click, in alice's name.
	slackApproveClick(t, e, "U0BOB", "t-2", item, value)
	waitFor(t, "bob's approval", func() bool { return status(rid).Data["status"] == "approved" })
	if st := status(rid); st.Data["confirmed_by"] != "bob [U0BOB] for alice" {
		t.Fatalf("confirmed_by %v, want bob [U0BOB] for alice", st.Data["confirmed_by"])
	}
	waitFor(t, "the Slack card says who approved, for whom", func() bool {
		for _, u := range f.Calls("chat.update") {
			if strings.Contains(slackJSON(u.Form.Get("blocks")), "*Approved* by bob for alice") {
				return true
			}
		}
		return false
	})
	a := audit()
	if !strings.Contains(a, "alice lends their approvals to bob until "+until.Format("2006-01-02 15:04")+" UTC (web)") || !strings.Contains(a, rid+" by bob [U0BOB] for alice") {
		t.Fatalf("the audit does not record the delegation and the approval under it (want %q and %q in it):\n%s", "alice lends their approvals to bob until "+until.Format("2006-01-02 15:04")+" UTC (web)", rid+" by bob [U0BOB] for alice", a)
	}

	// alice ends it in the console, and lends her approvals again.
	if resp, _ := webDo(t, c, "POST", e.URL+"/ui/delegation/end", url.Values{"csrf": {csrf[1]}}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/delegation?done=ended" {
		t.Fatalf("ending it in the console answered %d %s, want %d %s", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/delegation?done=ended")
	}
	if a := audit(); !strings.Contains(a, "alice no longer lends their approvals to bob (was until "+until.Format("2006-01-02 15:04")+" UTC): ended in the console by alice") {
		t.Fatalf("the console's end is not audited (want %q in it):\n%s", "alice no longer lends their approvals to bob (was until "+until.Format("2006-01-02 15:04")+" UTC): ended in the console by alice", a)
	}
	if _, page = webDo(t, c, "GET", e.URL+"/ui/delegation", nil); strings.Contains(page, line) || !strings.Contains(page, `id="no-delegation"`) {
		t.Fatalf("an ended delegation is still shown (want no %q, and %q):\n%s", line, `id="no-delegation"`, page)
	}
	resp, _ = webDo(t, c, "POST", e.URL+"/ui/delegation", url.Values{"csrf": {csrf[1]}, "to": {"bob"}, "until": {until.Format("2006-01-02T15:04")}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/delegation?done=set" {
		t.Fatalf("delegating again answered %d %s, want %d %s", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/delegation?done=set")
	}

	// Slack deactivates alice: the delegation ends at once.
	if code, body := postSlackEvent(t, e.URL, userDeactivated("Ev1", "T1", "U0ALICE"), e2eSlackSecret); code != 200 {
		t.Fatalf("the user_change event answered %d %s, want 200", code, body)
	}
	waitFor(t, "the delegation ended", func() bool {
		return strings.Contains(audit(), "alice was suspended from approving")
	})
	rid2, item2, value2 := request(80)
	slackApproveClick(t, e, "U0BOB", "t-3", item2, value2)
	waitFor(t, "bob's second refusal audited", func() bool {
		// Counted in the entries, not in the answer's text and
		// data together (each entry is in both, and the text is
		// clipped when long).
		n := 0
		for _, en := range e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Data["entries"].([]any) {
			if d, _ := en.(map[string]any)["detail"].(string); strings.Contains(d, "transfer_funds requests are decided by principals alice") {
				n++
			}
		}
		return n == 2
	})
	if st := status(rid2); st.Data["status"] != "pending" {
		t.Fatalf("bob after alice's deactivation: %s, want pending", st)
	}
}

func onCallConfig(f *slackFake, srv *smtptest.Server) string {
	return fmt.Sprintf(`tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    approvers: {groups: [ops]}
oncall:
  ops: {people: [alice, bob], start: "2026-12-01T09:00:00Z", length: 24h}
approvals:
  escalate_after: 10m
  escalation_channel: email
  escalation_oncall: ops
sweep:
  schedule: "@every 1s"
email:
  from: Countersign <countersign@hospital.example>
  include: summary
  smtp: {host: %s, port: %d, starttls: false}
slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: %s
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - {name: alice, role: member, slack: U0ALICE, email: alice@hospital.example}
  - {name: bob, role: member, slack: U0BOB, email: bob@hospital.example}
`, srv.Host, srv.Port, f.srv.GetAPIURL())
}

// TestE2EOnCallEscalation: at the server's clock bob holds the ops turn
// (the second day of the rotation); the escalation, on that clock, names
// and mentions him in the Slack thread and emails him alone; he approves
// by a Slack click, and alice, off call, may not.
func TestE2EOnCallEscalation(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	srv := smtptest.Start(t, smtptest.Options{})
	e := newTestEnv(t, onCallConfig(f, srv))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	clock := bottest.NewClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	e.clock = clock.Now
	agent := e.CreateKey("ops_agent", "agent")
	e.Start()

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}})
	rid, item := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	card := f.Calls("chat.postMessage")[0]
	m := approveValueRE.FindStringSubmatch(slackJSON(card.Form.Get("blocks")))
	if m == nil {
		t.Fatalf("the card has no Approve (want a countersign.approve button with an item:version value): %s", card.Form.Get("blocks"))
	}

	clock.Advance(11 * time.Minute) // past escalate_after, still bob's turn
	msgs := srv.Wait(1)
	if len(msgs[0].To) != 1 || msgs[0].To[0] != "bob@hospital.example" {
		t.Fatalf("the escalation was emailed to %v, want bob alone", msgs[0].To)
	}
	if p := readMail(t, msgs[0].Data); !strings.Contains(p.Text, "Escalated to the ops on-call, bob.") {
		t.Fatalf("the email does not name the on-call (want %q in it):\n%s", "Escalated to the ops on-call, bob.", p.Text)
	}
	var thread string
	waitFor(t, "the escalation in the card's thread", func() bool {
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") == card.TS && strings.Contains(c.Form.Get("text"), "Escalated") {
				thread = c.Form.Get("text")
				return true
			}
		}
		return false
	})
	if !strings.Contains(thread, "Escalated to the ops on-call, bob. <@U0BOB>") || strings.Contains(thread, "U0ALICE") {
		t.Fatalf("the Slack escalation %q, want it to name and mention bob only", thread)
	}

	slackApproveClick(t, e, "U0ALICE", "t-a", item, m[1]+":"+m[2])
	slackApproveClick(t, e, "U0BOB", "t-b", item, m[1]+":"+m[2])
	waitFor(t, "bob's approval", func() bool {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["status"] == "approved"
	})
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["confirmed_by"] != "bob [U0BOB]" {
		t.Fatalf("confirmed_by %v, want bob [U0BOB] alone (alice is off call)", st.Data["confirmed_by"])
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("%d emails, want the one escalation", n)
	}
}

// TestSCIMDeactivationEndsADelegation: the directory deactivates alice,
// who lent her approvals to bob: the delegation ends in the same
// transaction, audited; bob's approval cast for her no longer counts
// towards the quorum, and his next one is refused.
func TestSCIMDeactivationEndsADelegation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: transfer_funds
    category: mutating
    quorum: 2
    approvers: {principals: [alice, carol]}
principals:
  - {name: alice, role: member, email: alice@hospital.example}
  - {name: carol, role: member, email: carol@hospital.example}
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`)
	e.env["COUNTERSIGN_SCIM_TOKEN"] = e2eSCIMToken
	agent := e.CreateKey("pay_bot", "agent")
	alice := e.CreateKey("alice", "member", "--kind", "person")
	bob := e.CreateKey("bob", "member", "--kind", "person")
	admin := e.CreateKey("root", "admin")
	e.Start()

	e.MustOK(alice, "delegate_approvals", map[string]any{"to": "bob", "for": "8h"})
	if l := e.MustOK(bob, "list_delegations", map[string]any{}); !strings.Contains(l.Text, "alice, away; delegated to bob until") {
		t.Fatalf("list_delegations: %s, want it to say %q", l, "alice, away; delegated to bob until")
	}
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "transfer_funds", "arguments": map[string]any{"amount": 900}})
	rid := r.Data["request_id"]
	if v := e.MustOK(bob, "approve_action", map[string]any{"request_id": rid}); !strings.Contains(v.Text, "1 of 2 approvals: bob for alice") {
		t.Fatalf("bob for alice: %s, want it to say %q", v, "1 of 2 approvals: bob for alice")
	}
	if v := e.Call(alice, "approve_action", map[string]any{"request_id": rid}); v.Status != http.StatusForbidden || !strings.Contains(v.Error, "would count twice") {
		t.Fatalf("alice after bob approved for her: %s, want 403 (counts twice)", v)
	}

	base := e.URL + "/scim/v2"
	st, user := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"alice@hospital.example","active":true}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create: %d %v, want %d", st, user, http.StatusCreated)
	}
	if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+user["id"].(string), jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","value":{"active":false}}]}`)); st != 200 {
		t.Fatalf("SCIM deactivate: %d %v, want 200", st, body)
	}
	entries := scimAudit(t, e, admin)
	if !hasEntry(entries, "delegation_ended", "alice no longer lends their approvals to bob") || !hasEntry(entries, "delegation_ended", "alice was suspended from approving: scim: deactivated") {
		t.Fatalf("the delegation's end is not audited (want delegation_ended entries saying %q and %q):\n%s", "alice no longer lends their approvals to bob", "alice was suspended from approving: scim: deactivated", strings.Join(entries, "\n"))
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["tally"] != "0 of 2 approvals" || st.Data["status"] != "pending" {
		t.Fatalf("after alice's deactivation: %s, want 0 of 2 approvals, pending", st)
	}
	if v := e.Call(bob, "approve_action", map[string]any{"request_id": rid}); v.Status != http.StatusForbidden || !strings.Contains(v.Error, "not among them") {
		t.Fatalf("bob after the delegation ended: %s, want 403 saying %q", v, "not among them")
	}
	if l := e.MustOK(bob, "list_delegations", map[string]any{}); l.Text != "No delegation is running." {
		t.Fatalf("list_delegations after the deactivation: %s, want %q", l, "No delegation is running.")
	}
}
