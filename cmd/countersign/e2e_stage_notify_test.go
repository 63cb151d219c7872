package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/adapters/email/smtptest"
	"github.com/countersign/countersign/adapters/teams/teamstest"
)

// stageNotifyConfig signs order_medication above 10 mg off in two stages:
// the prescribers in their channel, then the pharmacist on call sent the
// card directly (tools[].rules[].stages[].notify).
func stageNotifyConfig(apiURL string) string {
	return `http:
  rate_burst: 1000
groups:
  pharmacists: [ph_kim, ph_lee]
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {drug: {type: string}, dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}, channels: [doctors]}
          - {name: pharmacist, approvers: {groups: [pharmacists]}, notify: [ph_kim]}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC}
  - {name: ph_kim, role: member, slack: U0456DEF}
  - {name: ph_lee, role: member, slack: U0789GHI}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + apiURL + `
  channels: {default: C0DEFAULT, doctors: C0DOCS}
`
}

// TestStageNotifyDirectMessageEndToEnd: a stage's notify sends the card
// to each person it names, directly, when the stage opens; against the
// real server and slack-go on the loopback fake. Nobody gets a direct
// message while the prescriber stage is open; once dr_smith approves it,
// conversations.open is called with ph_kim's Slack user only (not ph_lee,
// a pharmacist the stage does not name) and the card is posted in that
// direct message; ph_kim approves from it, and the direct card is updated
// with the outcome like the channel cards.
func TestStageNotifyDirectMessageEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, stageNotifyConfig(f.srv.GetAPIURL()))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
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
	status := func(id string) toolResponse {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": id})
	}

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose_mg": 50}})
	reqID, itemID := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the cards in the request's channel and the prescribers'", func() bool { return len(cards()) == 2 })
	if n := len(f.Calls("conversations.open")); n != 0 {
		t.Fatalf("%d direct messages opened while the prescriber stage is open, want 0", n)
	}

	slackClick(t, e, cards()["C0DOCS"], "U0123ABC", itemID, "t-sn-1")
	waitFor(t, "the card in ph_kim's direct message", func() bool { _, ok := cards()["DU0456DEF"]; return ok })
	opens := f.Calls("conversations.open")
	if len(opens) != 1 || opens[0].Form.Get("users") != "U0456DEF" {
		var users []string
		for _, o := range opens {
			users = append(users, o.Form.Get("users"))
		}
		t.Fatalf("conversations.open with %v, want [U0456DEF] only (the stage notifies ph_kim)", users)
	}
	dm := cards()["DU0456DEF"]
	if b := dm.Form.Get("blocks"); !strings.Contains(b, "countersign.approve") || !strings.Contains(b, "order_medication") {
		t.Errorf("the direct card is not the item's card with its buttons:\n%s", b)
	}
	if st := status(reqID); st.Data["status"] != "pending" {
		t.Fatalf("after the prescriber: %s, want pending", st)
	}

	// ph_kim approves from the direct message.
	slackClick(t, e, dm, "U0456DEF", itemID, "t-sn-2")
	waitFor(t, "the approval", func() bool { return status(reqID).Data["status"] == "approved" })
	waitFor(t, "the direct card to show the outcome", func() bool {
		last := lastUpdate(f, "DU0456DEF", dm.TS)
		return strings.Contains(last, "ph_kim") && !strings.Contains(last, "countersign.approve")
	})
	if n := len(cards()); n != 3 {
		t.Errorf("%d cards, want 3 (the request's channel, the doctors', ph_kim's direct message)", n)
	}
}

// dbaNotify is put before a chat config's tools: a vacuum_table whose one
// stage, the DBAs (dr_smith), sends dr_smith the card directly.
const dbaNotify = `groups:
  dbas: [dr_smith]
tools:
  - name: vacuum_table
    category: mutating
    schema: {type: object, required: [table]}
    channels: [ops]
    stages:
      - {name: dba, approvers: {groups: [dbas]}, notify: [dr_smith]}
`

// TestStageNotifyDiscordDirectMessage: on Discord a stage's notify opens
// the DM channel with the person (POST users/@me/channels) and posts the
// card there, against the real server and the Discord fake; the DM card's
// Approve decides like the channel's.
func TestStageNotifyDiscordDirectMessage(t *testing.T) {
	t.Parallel()
	d := newDiscordEnvConfig(t, "http", func(s string) string {
		return strings.Replace(s, "tools:\n", dbaNotify, 1)
	})
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "vacuum_table", "arguments": map[string]any{"table": "orders"}})
	reqID, _ := req.Data["request_id"].(string)
	d.posted(discordOps, "vacuum\\\\_table")
	msg, item := d.posted("DM111", "vacuum\\\\_table")
	if n := len(d.fake.CallsTo("POST", "users/@me/channels")); n != 1 {
		t.Errorf("%d DM channels opened, want 1 (dr_smith's)", n)
	}
	d.click("n1", smith, "DM111", msg, "cs:approve:"+item)
	if st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "approved" {
		t.Errorf("after dr_smith's click in the DM the request is %v, want approved", st.Data["status"])
	}
}

// TestStageNotifyByEmail: a stage's notify emails each person it names
// who has an address and may decide the open stage, against the real
// server, the Slack fake (for the prescriber's click) and a real SMTP
// server. dr_jones is told of the prescriber stage; once dr_smith has
// prescribed, the pharmacist stage names dr_jones then ph_kim: only
// ph_kim is emailed, since dr_jones (a prescriber, no pharmacist) may not
// decide it (the one check, Items.ReadOnly). The outbox delivers a sink's
// events in order, so ph_kim's message arriving means dr_jones's event
// was handled before it.
func TestStageNotifyByEmail(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Options{})
	f := newSlackFake(t)
	e := newTestEnv(t, fmt.Sprintf(`http:
  rate_burst: 1000
groups:
  pharmacists: [ph_kim]
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {drug: {type: string}, dose_mg: {type: number}}}
    stages:
      - {name: prescriber, approvers: {roles: [member]}, notify: [dr_jones]}
      - {name: pharmacist, approvers: {groups: [pharmacists]}, notify: [dr_jones, ph_kim]}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC}
  - {name: dr_jones, role: member, email: jones@hospital.example}
  - {name: ph_kim, role: member, email: kim@hospital.example}
email:
  from: Countersign <countersign@hospital.example>
  include: none
  smtp: {host: %s, port: %d, starttls: false}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: %s
  channels: {default: C0DEFAULT}
`, srv.Host, srv.Port, f.srv.GetAPIURL()))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	to := func(ms []smtptest.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, strings.Join(m.To, ","))
		}
		return out
	}

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose_mg": 50}})
	itemID := fmt.Sprint(r.Data["item_id"])
	if got := to(srv.Wait(1)); len(got) != 1 || got[0] != "jones@hospital.example" {
		t.Fatalf("the prescriber stage emailed %v, want dr_jones only", got)
	}
	var card slackCall
	waitFor(t, "the card in the channel", func() bool {
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("channel") == "C0DEFAULT" && c.Form.Get("thread_ts") == "" {
				card = c
				return true
			}
		}
		return false
	})
	slackClick(t, e, card, "U0123ABC", itemID, "t-se-1")
	got := to(srv.Wait(2))
	if len(got) != 2 || got[1] != "kim@hospital.example" {
		t.Fatalf("emails %v, want dr_jones's (the prescriber stage) then ph_kim's (the pharmacist stage)", got)
	}
	if n := len(srv.Messages()); n != 2 {
		t.Errorf("%d emails (%v), want 2: dr_jones may not decide the pharmacist stage and is not emailed of it", n, to(srv.Messages()))
	}
}

// TestStageNotifyTeamsDirectMessage: on Teams a stage's notify looks the
// person up in a configured channel's roster, opens the bot's one-to-one
// chat with them (POST v3/conversations, their Teams user id the one
// member) and posts the card there, its refresh naming them; their click
// on that card decides like a channel card's.
func TestStageNotifyTeamsDirectMessage(t *testing.T) {
	t.Parallel()
	fake := teamstest.New(t, teamsAppID, teamsPassword)
	fake.AddMember(teamsOps, smithOID, smithMRI)
	conf := strings.Replace(teamsConfig(fake), "tools:\n", dbaNotify, 1)
	e := newTestEnv(t, conf)
	e.env["TEAMS_APP_ID"], e.env["TEAMS_APP_PASSWORD"] = teamsAppID, teamsPassword
	agent := e.CreateKey("ops_agent", "agent")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "vacuum_table", "arguments": map[string]any{"table": "orders"}}).Data["request_id"].(string)
	dm := "a:personal-" + smithMRI // the fake's id of the chat with smithMRI
	var msg teamstest.Message
	fake.Wait("the card posted in dr_smith's chat", func() bool {
		for _, m := range fake.Messages(dm) {
			if m.Card() != nil {
				msg = m
				return true
			}
		}
		return false
	})
	var opened []teamstest.Call
	for _, c := range fake.CallsTo("POST", "v3/conversations") {
		if c.Path == "v3/conversations" {
			opened = append(opened, c)
		}
	}
	if len(opened) != 1 || !strings.Contains(string(opened[0].Body), `"members":[{"id":"`+smithMRI+`"`) {
		t.Fatalf("chats opened: %d %s, want one with dr_smith's Teams user id", len(opened), func() string {
			if len(opened) > 0 {
				return string(opened[0].Body)
			}
			return ""
		}())
	}
	ref, _ := msg.Card()["refresh"].(map[string]any)
	if ids := fmt.Sprint(ref["userIds"]); !strings.Contains(ids, smithMRI) {
		t.Fatalf("the chat card's refresh.userIds = %s, want dr_smith's %s", ids, smithMRI)
	}
	item := fmt.Sprint(ref["action"].(map[string]any)["data"].(map[string]any)["item"])
	te := &teamsEnv{testEnv: e, fake: fake, agent: agent}
	click := teamsClick("dm-1", smithOID, smithMRI, dm, msg.ID, "approve", map[string]string{"item": item}, fake.APIURL)
	click["conversation"] = map[string]any{"id": dm, "conversationType": "personal", "tenantId": teamsTenant}
	te.invoke(click)
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "approved" {
		t.Fatalf("after dr_smith's click in the chat the request is %v, want approved", st.Data["status"])
	}
}
