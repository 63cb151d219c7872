package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/receipt"
	"github.com/oauth2-proxy/mockoidc"
)

func breakGlassConfig(f *slackFake, m *mockoidc.MockOIDC) string {
	return `slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT, ops: C0OPS, review: C0REVIEW}
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    approvers: {roles: [member]}
    quorum: 2
    channels: [ops]
break_glass:
  tools: [restart_service]
  review:
    approvers: {roles: [member, admin]}
    quorum: 2
    within: 24h
    channel: review
sweep:
  schedule: "@every 1s"
principals:
  - name: alice
    role: member
    slack: U0ALICE
    web: alice@hospital.example
  - name: bob
    role: member
    slack: U0BOB
  - name: carol
    role: member
    slack: U0CAROL
web:
  oidc:
    issuer: ` + m.Issuer() + `
    client_id: ` + m.ClientID + `
    client_secret_env: OIDC_SECRET
`
}

// TestBreakGlassEndToEnd is break-glass across the console, Slack, the
// API, the sweeper and /metrics, on the real server with a settable
// clock: alice's own request (made with her person key, as an agent run
// she drives) needs two approvers; her API key cannot break glass (no
// step-up), an agent cannot either; in the console, after a fresh
// sign-in, she approves it alone with a reason. It is approved at once,
// broadcast on its Slack card, marked in the receipt, action_status and
// the audit, and its review is posted in the review channel. She cannot
// countersign her own review from Slack; bob's click counts one of two.
// A day later the sweeper escalates the overdue review, /metrics shows it,
// and her next break-glass is refused until carol's click clears it;
// then she may again.
func TestBreakGlassEndToEnd(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	clock := bottest.NewClock(time.Now().UTC())
	f := newSlackFake(t)
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, breakGlassConfig(f, m))
	e.clock = clock.Now
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, m.ClientSecret
	aliceKey := e.CreateKey("alice", "member", "--kind", "person")
	agent := e.CreateKey("ops_agent", "member", "--kind", "agent") // an agent key with a member's role
	admin := e.CreateKey("root", "admin")
	e.Start()

	posts := func(channel, contains string) []slackCall {
		var out []slackCall
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("channel") == channel && strings.Contains(slackJSON(c.Form.Get("blocks")+c.Form.Get("text")), contains) {
				out = append(out, c)
			}
		}
		return out
	}
	// auditHas polls the audit log gently (the rate limit holds for the admin too).
	auditHas := func(sub string) func() bool {
		return func() bool {
			time.Sleep(100 * time.Millisecond)
			res := e.Call(admin, "audit_log", map[string]any{"limit": 10})
			return res.Status == http.StatusOK && strings.Contains(res.Text, sub)
		}
	}
	status := func(reqID string) toolResponse {
		return e.MustOK(admin, "action_status", map[string]any{"request_id": reqID})
	}

	// alice's own request: two approvers would be needed.
	r := e.MustOK(aliceKey, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}})
	reqID, _ := r.Data["request_id"].(string)
	itemID := fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the request's card", func() bool { return len(posts("C0OPS", "restart_service")) == 1 })

	// Her API key carries no step-up; an agent never breaks glass.
	if res := e.Call(aliceKey, "approve_action", map[string]any{"request_id": reqID, "break_glass": true, "reason": "payments down"}); res.Status != http.StatusForbidden || !strings.Contains(res.Raw, "step-up required") {
		t.Fatalf("break-glass with alice's API key: %s, want 403 step-up required", res)
	}
	ra := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "search"}})
	if res := e.Call(agent, "approve_action", map[string]any{"request_id": ra.Data["request_id"], "break_glass": true, "reason": "x"}); res.Status != http.StatusForbidden || !strings.Contains(res.Raw, "is an agent principal") {
		t.Fatalf("break-glass by an agent: %s, want 403 not a person", res)
	}
	if st := status(reqID); st.Data["status"] != "pending" {
		t.Fatalf("after the refused attempts: status = %v, want pending: %s", st.Data["status"], st)
	}

	// The console: a fresh sign-in, then the break-glass form.
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-alice", Email: "alice@hospital.example", EmailVerified: true}, clock.Now()})
	alice := person(t)
	browse(t, alice, "alice opens her own request",
		chromedp.Navigate(e.URL+"/ui/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS(".me")),
		chromedp.Navigate(e.URL+"/ui/items/"+itemID),
		chromedp.WaitVisible(chromedp.CSS("#break-glass-approve")),
	)
	if n := read(t, alice, "approve buttons", chromedp.Evaluate[int](`document.querySelectorAll("#approve").length`)); n != 0 {
		t.Fatal("the requester is offered the ordinary Approve on her own request, want no #approve button")
	}
	// Without a reason (the form's required attribute bypassed) nothing happens.
	code := read(t, alice, "a break-glass without a reason", chromedp.Evaluate[int](`fetch("/ui/items/`+itemID+`/decide", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "action=break_glass&nonce=noreason&csrf=" + encodeURIComponent(document.querySelector('#break-glass form input[name="csrf"]').value)}).then(r => r.ok ? 200 : r.status)`, chromedp.EvalAwaitPromise))
	if st := status(reqID); code != 200 || st.Data["status"] != "pending" {
		t.Fatalf("a break-glass without a reason: answered %d, request %s; want 200 and the request pending", code, st)
	}
	browse(t, alice, "alice breaks glass",
		chromedp.SendKeys(chromedp.CSS("#break-glass-reason"), "payments down, on-call unreachable"),
		chromedp.Click(chromedp.CSS("#break-glass-approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st := status(reqID)
	bg, _ := st.Data["break_glass"].(map[string]any)
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "alice [web:alice]" || bg == nil || bg["reason"] != "payments down, on-call unreachable" {
		t.Fatalf("after breaking glass: %s, want approved, confirmed_by %q, break_glass with the reason %q", st, "alice [web:alice]", "payments down, on-call unreachable")
	}
	reviewID, _ := bg["review_id"].(string)
	p, err := receipt.Parse(fmt.Sprint(st.Data["receipt"]))
	if err != nil || !p.BreakGlass || p.ConfirmedBy != "alice [web:alice]" {
		t.Fatalf("the receipt: %+v (%v), want break_glass true", p, err)
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text
	if !regexp.MustCompile(reqID+` by alice \[web:alice\] break_glass review=`+reviewID+` restart_service args_sha256=[0-9a-f]{64} step-up oidc auth_time=`).MatchString(audit) ||
		!strings.Contains(audit, "alice [web:alice] approved their own restart_service request "+reqID+" as break-glass: payments down, on-call unreachable") {
		t.Fatalf("the audit does not mark the break-glass (want the break_glass approval of %s with review %s, and %q):\n%s", reqID, reviewID, "alice [web:alice] approved their own restart_service request "+reqID+" as break-glass: payments down, on-call unreachable", audit)
	}
	// Broadcast at once: a note on the request's card for everyone it was
	// posted to, and the review posted in the review channel.
	waitFor(t, "the break-glass note", func() bool {
		return len(posts("C0OPS", "BREAK-GLASS: alice approved their own restart_service request")) == 1
	})
	if n := posts("C0OPS", "BREAK-GLASS")[0]; n.Form.Get("thread_ts") != posts("C0OPS", "restart_service")[0].TS {
		t.Errorf("the note is not in the card's thread: %v, want thread_ts %s", n.Form, posts("C0OPS", "restart_service")[0].TS)
	}
	waitFor(t, "the card updated, marked break-glass", func() bool {
		for _, u := range f.Calls("chat.update") {
			if strings.Contains(slackJSON(u.Form.Get("blocks")), "approved by alice alone, their own request: payments down, on-call unreachable (review "+reviewID+")") {
				return true
			}
		}
		return false
	})
	waitFor(t, "the review's card", func() bool { return len(posts("C0REVIEW", "Break-glass review")) == 1 })
	review := posts("C0REVIEW", "Break-glass review")[0]
	reviewItem := slackItemID(t, review)
	if b := slackJSON(review.Form.Get("blocks")); !strings.Contains(b, "payments down, on-call unreachable") || !strings.Contains(b, reviewID) {
		t.Fatalf("the review card does not show the reason and the review (want %q and %s in it):\n%s", "payments down, on-call unreachable", reviewID, b)
	}

	// Slack clicks on the review: alice never countersigns her own; bob counts.
	slackClick(t, e, review, "U0ALICE", reviewItem, "t-bg-1")
	waitFor(t, "alice's refusal", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	if eph := f.Calls("chat.postEphemeral")[0].Form; eph.Get("user") != "U0ALICE" || !strings.Contains(eph.Get("text"), "never decided by its own requester") {
		t.Fatalf("alice's click on her own review: %v, want a private refusal to U0ALICE saying %q", eph, "never decided by its own requester")
	}
	slackClick(t, e, review, "U0BOB", reviewItem, "t-bg-2")
	waitFor(t, "bob's countersignature", auditHas(reviewID+" countersigned by bob [U0BOB]: 1 of 2 countersignatures: bob"))
	if got := e.scrape(); !strings.Contains(got, "countersign_break_glass_reviews_open 1") || !strings.Contains(got, "countersign_break_glass_reviews_overdue 0") {
		t.Fatalf("/metrics before the deadline:\n%s\nwant %q and %q", grepLines(got, "break_glass"), "countersign_break_glass_reviews_open 1", "countersign_break_glass_reviews_overdue 0")
	}

	// A day later: the sweeper escalates the review once, /metrics shows it.
	clock.Advance(25 * time.Hour)
	m.FastForward(25 * time.Hour) // the provider's tokens on the same clock
	waitFor(t, "the overdue escalation", auditHas("break_glass_review_overdue"))
	waitFor(t, "the overdue note on the review's card", func() bool { return len(posts("C0REVIEW", reviewID+" is overdue")) == 1 })
	if got := e.scrape(); !strings.Contains(got, "countersign_break_glass_reviews_overdue 1") {
		t.Fatalf("/metrics after the deadline:\n%s\nwant %q", grepLines(got, "break_glass"), "countersign_break_glass_reviews_overdue 1")
	}

	// Her next break-glass is refused, even freshly signed in.
	r2 := e.MustOK(aliceKey, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments-replica"}})
	req2, _ := r2.Data["request_id"].(string)
	item2 := fmt.Sprint(r2.Data["item_id"])
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-alice", Email: "alice@hospital.example", EmailVerified: true}, clock.Now()})
	breakGlass := func(what, item, reason string) {
		t.Helper()
		browse(t, alice, what,
			chromedp.Navigate(e.URL+"/ui/signin/oidc"), // her session of yesterday has expired
			chromedp.WaitVisible(chromedp.CSS(".me")),
			chromedp.Navigate(e.URL+"/ui/items/"+item),
			chromedp.WaitVisible(chromedp.CSS("#break-glass-approve")),
			chromedp.SendKeys(chromedp.CSS("#break-glass-reason"), reason),
			chromedp.Click(chromedp.CSS("#break-glass-approve")),
			chromedp.WaitVisible(chromedp.CSS(".notice, .problem")),
		)
	}
	breakGlass("alice breaks glass again", item2, "replica down too")
	if msg := read(t, alice, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "may not break glass again while the review of their earlier break-glass ("+reviewID) {
		t.Fatalf("the second break-glass: %q, want the overdue review named", msg)
	}
	if st := status(req2); st.Data["status"] != "pending" {
		t.Fatalf("a blocked break-glass approved the request: status = %v, want pending: %s", st.Data["status"], st)
	}
	if audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 10}).Text; !strings.Contains(audit, "approve_action: Access denied: alice [web:alice] may not break glass again") {
		t.Fatalf("the blocked break-glass is not audited (want %q in the log):\n%s", "approve_action: Access denied: alice [web:alice] may not break glass again", audit)
	}

	// carol's click clears the review; alice may break glass again.
	slackClick(t, e, review, "U0CAROL", reviewItem, "t-bg-3")
	waitFor(t, "the review cleared", auditHas(reviewID+" countersigned by bob [U0BOB], carol [U0CAROL]"))
	if got := e.scrape(); !strings.Contains(got, "countersign_break_glass_reviews_overdue 0") || !strings.Contains(got, "countersign_break_glass_reviews_open 0") {
		t.Fatalf("/metrics after the review was cleared:\n%s\nwant %q and %q", grepLines(got, "break_glass"), "countersign_break_glass_reviews_overdue 0", "countersign_break_glass_reviews_open 0")
	}
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-alice", Email: "alice@hospital.example", EmailVerified: true}, clock.Now()})
	breakGlass("alice breaks glass once the review is cleared", item2, "replica down too")
	if st := status(req2); st.Data["status"] != "approved" || st.Data["break_glass"] == nil {
		t.Fatalf("after the review was cleared: %s, want approved with a break_glass record", st)
	}
	// The overdue review was escalated once, however many sweeps ran.
	if n := len(posts("C0REVIEW", reviewID+" is overdue")); n != 1 {
		t.Errorf("the overdue note was posted %d times, want once", n)
	}
	if n := strings.Count(e.MustOK(admin, "audit_log", map[string]any{"limit": 100}).Text, reviewID+" is overdue"); n != 1 {
		t.Errorf("the overdue review was audited %d times, want once", n)
	}
}

// grepLines is the lines of s that contain sub, for a failure message.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
