package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestSlackEditOnStepUpAnswersWithTheLink: Edit & approve on the Slack
// card of a request that requires step-up opens no form (its submission
// would be refused): the person gets privately the one-time step-up link
// an Approve click gets, and the request stays pending and unedited.
func TestSlackEditOnStepUpAnswersWithTheLink(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	cfg := withSetDose(strings.Replace(slackConfig(f, "http"), "    slack: U0123ABC\n", "    slack: U0123ABC\n    web: dr.smith@hospital.example\n", 1)) + `step_up:
  tools: [set_dose]
web:
  public_url: https://countersign.hospital.example
  oidc:
    issuer: https://login.hospital.example
    client_id: countersign
    client_secret_env: OIDC_SECRET
`
	e := newTestEnv(t, cfg)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, "s3cret"
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()

	reqID := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs}).Data["request_id"].(string)
	waitFor(t, "the request to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	itemID := regexp.MustCompile(`"block_id":"countersign:(\d+)"`).FindStringSubmatch(post.Form.Get("blocks"))
	if itemID == nil || !strings.Contains(post.Form.Get("blocks"), `"countersign.edit"`) {
		t.Fatalf("the card has no Edit & approve button:\n%s", post.Form.Get("blocks"))
	}
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t-edit", "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0OPS", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.edit", "block_id": "countersign:" + itemID[1], "value": itemID[1], "action_ts": "1.1"}},
	})
	if code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("Edit & approve click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the private answer", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	text := f.Calls("chat.postEphemeral")[0].Form.Get("text")
	if !strings.Contains(text, "Step-up required: approving #"+itemID[1]) || !strings.Contains(text, "https://countersign.hospital.example/ui/stepup?t=") {
		t.Fatalf("the private answer: %q, want the step-up link", text)
	}
	if n := len(f.Calls("views.open")); n != 0 {
		t.Fatalf("an edit form was opened (%d views.open, want 0) on a step-up request", n)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || st.Data["edited"] != false {
		t.Fatalf("after the Edit click: %s, want pending, not edited", st)
	}
}

// TestWebEditOnStepUpNeedsTheFreshSignIn: in the console, a step-up
// request's page offers the fresh sign-in instead of Approve and instead
// of the edit form, and an edit posted anyway (without the fresh sign-in)
// is refused with nothing recorded.
func TestWebEditOnStepUpNeedsTheFreshSignIn(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, setDoseTool+`principals:
  - {name: dr_smith, role: member, web: s@x.example}
step_up:
  tools: [set_dose]
web:
  public_url: https://countersign.hospital.example
  oidc:
    issuer: https://login.hospital.example
    client_id: countersign
    client_secret_env: OIDC_SECRET
`)
	e.env["OIDC_SECRET"] = "s3cret"
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	reqID := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "set_dose", "arguments": doseArgs}).Data["request_id"].(string)
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+reqID, nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil || !strings.Contains(page, `id="stepup"`) || strings.Contains(page, `id="edit"`) || strings.Contains(page, `name="edit_0"`) {
		t.Fatalf("a step-up request's page without a fresh sign-in, want a CSRF token, a nonce, the step-up button and no edit form:\n%s", page)
	}
	form := url.Values{"csrf": {csrf[1]}, "nonce": {nonce[1] + "e"}, "action": {"edit"}, "edit_0": {"2.5mg"}, "edit_1": {"apixaban"}}
	resp, _ = webDo(t, c, "POST", e.URL+itemPath+"/decide", form)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "problem=") || !strings.Contains(loc, "step-up") {
		t.Fatalf("an edit posted without the fresh sign-in answered %d %s, want %d to a problem= naming step-up", resp.StatusCode, loc, http.StatusSeeOther)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || st.Data["edited"] != false {
		t.Fatalf("after the refused edit: %s, want pending, not edited", st)
	}
}
