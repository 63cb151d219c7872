package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/receipt"
	"github.com/oauth2-proxy/mockoidc"
)

func assuranceConfig(f *slackFake, m *mockoidc.MockOIDC) string {
	return `slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT}
tools:
  - name: restart_service
    category: mutating
  - name: order_medication
    category: mutating
    quorum: 2
    approvers: {roles: [member]}
    step_up: {method: oidc}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
    web: dr.smith@hospital.example
  - name: dr_jones
    role: member
    slack: U0456DEF
    web: dr.jones@hospital.example
web:
  oidc:
    issuer: ` + m.Issuer() + `
    client_id: ` + m.ClientID + `
    client_secret_env: OIDC_SECRET
`
}

// receiptAssurance is the assurance a receipt states.
func receiptAssurance(t *testing.T, d map[string]any) string {
	t.Helper()
	p, err := receipt.Parse(fmt.Sprint(d["receipt"]))
	if err != nil {
		t.Fatalf("the receipt: %v (%v)", err, d["receipt"])
	}
	return p.Assurance
}

// voteAssurances are the assurances recorded on a request's votes.
func voteAssurances(d map[string]any) []string {
	var out []string
	votes, _ := d["votes"].([]any)
	for _, v := range votes {
		out = append(out, fmt.Sprint(v.(map[string]any)["assurance"]))
	}
	return out
}

// TestAssuranceEndToEnd: every decision records how the decider was
// authenticated, and a tool may require a minimum (tools[].step_up.method),
// against the real server, Slack on a fake, a real OIDC provider and
// Chromium:
//   - a Slack click approves restart_service: the vote says chat, the card
//     "by dr_smith (chat click)", the receipt assurance chat;
//   - order_medication needs oidc: dr_smith's API key is refused (the one
//     rule names what is needed and what they had), their Slack click is
//     answered with the step-up link, which leads through the provider to
//     an approval recorded as oidc_step_up; dr_jones in a session opened
//     with a sign-in link is refused, then, signed in at the provider ten
//     minutes ago, approves as oidc: the quorum is met, the receipt states
//     the weakest (oidc), and the card names each decider with theirs.
func TestAssuranceEndToEnd(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	f := newSlackFake(t)
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, assuranceConfig(f, m))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, m.ClientSecret
	agent := e.CreateKey("ward_bot", "agent")
	smithKey := e.CreateKey("dr_smith", "member", "--kind", "person")
	e.Start()

	// No minimum: a chat click.
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "pharmacy-api"}})
	restartID := r.Data["request_id"].(string)
	waitFor(t, "the first card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	slackClick(t, e, post, "U0123ABC", slackItemID(t, post), "t-a1")
	waitFor(t, "the card's update", func() bool { return len(f.Calls("chat.update")) == 1 })
	if ub := slackJSON(f.Calls("chat.update")[0].Form.Get("blocks")); !strings.Contains(ub, "*Approved* by dr_smith (chat click) on") {
		t.Fatalf("the decided card does not say how dr_smith decided (want %q in it):\n%s", "*Approved* by dr_smith (chat click) on", ub)
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": restartID})
	if got := voteAssurances(st.Data); st.Data["status"] != "approved" || len(got) != 1 || got[0] != "chat" {
		t.Fatalf("the vote's assurance: %v (%s), want approved with [chat]", got, st)
	}
	if a := receiptAssurance(t, st.Data); a != "chat" {
		t.Fatalf("the receipt's assurance %q, want chat", a)
	}

	// A minimum of oidc, quorum 2.
	r = e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "warfarin", "dose_mg": 5}})
	reqID := r.Data["request_id"].(string)
	item := fmt.Sprint(r.Data["item_id"])
	res := e.Call(smithKey, "approve_action", map[string]any{"request_id": reqID})
	if res.Status != http.StatusForbidden || !strings.Contains(res.Raw, "is approved only with a console session opened at the identity provider (OIDC), and dr_smith [prin_") || !strings.Contains(res.Raw, "decided with API key") {
		t.Fatalf("an API key under a minimum of oidc: %s, want %d saying %q and %q", res, http.StatusForbidden, "is approved only with a console session opened at the identity provider (OIDC), and dr_smith [prin_", "decided with API key")
	}
	waitFor(t, "the second card", func() bool { return len(f.Calls("chat.postMessage")) == 2 })
	post = f.Calls("chat.postMessage")[1]
	slackClick(t, e, post, "U0123ABC", item, "t-a2")
	waitFor(t, "the step-up answer", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	link := stepUpLinkRE.FindString(f.Calls("chat.postEphemeral")[0].Form.Get("text"))
	if link == "" {
		t.Fatalf("the click under a minimum of oidc was answered %q, want a step-up link", f.Calls("chat.postEphemeral")[0].Form.Get("text"))
	}
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-smith", Email: "dr.smith@hospital.example", EmailVerified: true}, time.Now()})
	smith := person(t)
	browse(t, smith, "dr_smith steps up from the link and approves",
		chromedp.Navigate(e.URL+link),
		chromedp.WaitVisible(chromedp.CSS("#stepup-continue")),
		chromedp.Click(chromedp.CSS("#stepup-continue")),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st = e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if got := voteAssurances(st.Data); st.Data["status"] != "pending" || len(got) != 1 || got[0] != "oidc_step_up" {
		t.Fatalf("after dr_smith's stepped-up approval: %v (%s), want pending with [oidc_step_up]", got, st)
	}

	// dr_jones, in a session opened with a sign-in link: refused.
	jones := person(t)
	signInWithLink(t, jones, e.URL, e.webLink("dr_jones"), "dr_jones")
	browse(t, jones, "dr_jones approves from a link session",
		chromedp.Navigate(e.URL+"/ui/items/"+item),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".problem")),
	)
	if msg := read(t, jones, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(msg, "decided with sign-in link") {
		t.Fatalf("a link session under a minimum of oidc: %q, want it to contain %q", msg, "decided with sign-in link")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || len(voteAssurances(st.Data)) != 1 {
		t.Fatalf("after the refused link session: %s, want pending with 1 vote", st)
	}

	// dr_jones signed in at the provider ten minutes ago: oidc, enough.
	m.QueueUser(stepUpUser{&mockoidc.MockUser{Subject: "u-jones", Email: "dr.jones@hospital.example", EmailVerified: true}, time.Now().Add(-10 * time.Minute)})
	jones2 := person(t)
	browse(t, jones2, "dr_jones signs in at the provider and approves",
		chromedp.Navigate(e.URL+"/ui/signin/oidc"),
		chromedp.WaitVisible(chromedp.CSS(".me")),
		chromedp.Navigate(e.URL+"/ui/items/"+item),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	st = e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if got := voteAssurances(st.Data); st.Data["status"] != "approved" || strings.Join(got, ",") != "oidc_step_up,oidc" {
		t.Fatalf("after dr_jones's approval: %v (%s), want approved with [oidc_step_up oidc]", got, st)
	}
	if a := receiptAssurance(t, st.Data); a != "oidc" {
		t.Fatalf("the receipt's assurance %q, want the weakest of the quorum, oidc", a)
	}
	waitFor(t, "the second card's update", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(slackJSON(c.Form.Get("blocks")), "*Approved* by dr_smith (OIDC step-up), dr_jones (OIDC) on") {
				return true
			}
		}
		return false
	})
}
