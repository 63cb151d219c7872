package main

import (
	"fmt"
	"strings"
	"testing"
)

// stageChannelsConfig signs order_medication above 10 mg off in two
// stages, each posted to a channel of its own.
func stageChannelsConfig(apiURL string) string {
	return `http:
  rate_burst: 1000
groups:
  pharmacists: [ph_kim]
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {drug: {type: string}, dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}, channels: [doctors]}
          - {name: pharmacist, approvers: {groups: [pharmacists]}, channels: [pharmacy]}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC}
  - {name: ph_kim, role: member, slack: U0456DEF}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + apiURL + `
  channels: {default: C0DEFAULT, doctors: C0DOCS, pharmacy: C0PHARM}
`
}

// TestStageChannelsEndToEnd: each stage of an ordered sign-off is posted
// to its own channel (tools[].rules[].stages[].channels) against the real
// server and slack-go on the loopback fake. The request's card goes to
// its channel and the first stage's when it is made; the pharmacy channel
// gets it only when the prescriber has approved, the earlier cards are
// updated to show the progress, the pharmacist approves from the pharmacy
// card, and all three cards show the outcome.
func TestStageChannelsEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, stageChannelsConfig(f.srv.GetAPIURL()))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	// cards are the cards posted (not the notes in their threads), by channel.
	cards := func() map[string]slackCall {
		out := map[string]slackCall{}
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") == "" {
				if _, dup := out[c.Form.Get("channel")]; dup {
					t.Fatalf("a second card in %s", c.Form.Get("channel"))
				}
				out[c.Form.Get("channel")] = c
			}
		}
		return out
	}
	// updated reports whether the card in channel was rewritten with text.
	updated := func(channel, ts, text string) bool {
		for _, c := range f.Calls("chat.update") {
			if c.Form.Get("channel") == channel && c.Form.Get("ts") == ts && strings.Contains(c.Form.Get("blocks")+c.Form.Get("text"), text) {
				return true
			}
		}
		return false
	}
	status := func(id string) toolResponse {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": id})
	}

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose_mg": 50}})
	reqID, itemID := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the card in the request's channel and the prescribers'", func() bool { return len(cards()) == 2 })
	first := cards()
	if _, ok := first["C0DEFAULT"]; !ok {
		t.Fatalf("no card in the request's channel: %v", first)
	}
	docs, ok := first["C0DOCS"]
	if !ok {
		t.Fatalf("no card in the prescriber stage's channel: %v", first)
	}
	if _, early := first["C0PHARM"]; early {
		t.Fatal("the pharmacy channel got the card before the prescriber stage was done")
	}

	// dr_smith prescribes from the doctors' card.
	slackClick(t, e, docs, "U0123ABC", itemID, "t-sc-1")
	waitFor(t, "the card in the pharmacist stage's channel", func() bool { _, ok := cards()["C0PHARM"]; return ok })
	if st := status(reqID); st.Data["status"] != "pending" {
		t.Fatalf("after the prescriber: %s, want pending", st)
	}
	pharm := cards()["C0PHARM"]
	progress := "stage 1 of 2 (prescriber): 1 of 1 approvals: dr_smith"
	if !strings.Contains(pharm.Form.Get("blocks"), progress) {
		t.Errorf("the pharmacy card does not show the prescriber's approval:\n%s", pharm.Form.Get("blocks"))
	}
	for ch, c := range first {
		waitFor(t, "the "+ch+" card to show the progress", func() bool { return updated(ch, c.TS, progress) })
	}

	// ph_kim approves from the pharmacy card: every card shows the outcome.
	slackClick(t, e, pharm, "U0456DEF", itemID, "t-sc-2")
	waitFor(t, "the approval", func() bool { return status(reqID).Data["status"] == "approved" })
	if got := status(reqID).Data["confirmed_by"]; got != "dr_smith [U0123ABC], ph_kim [U0456DEF]" {
		t.Errorf("confirmed by %v, want both stages' approvers", got)
	}
	for ch, c := range cards() {
		waitFor(t, "the "+ch+" card to show the approval", func() bool {
			return updated(ch, c.TS, "ph_kim") && !strings.Contains(lastUpdate(f, ch, c.TS), "countersign.approve")
		})
	}
	if n := len(cards()); n != 3 {
		t.Errorf("%d cards, want 3 (one per channel)", n)
	}
}

// lastUpdate is the blocks of the last chat.update of the card at ts in
// channel.
func lastUpdate(f *slackFake, channel, ts string) string {
	last := ""
	for _, c := range f.Calls("chat.update") {
		if c.Form.Get("channel") == channel && c.Form.Get("ts") == ts {
			last = c.Form.Get("blocks")
		}
	}
	return last
}
