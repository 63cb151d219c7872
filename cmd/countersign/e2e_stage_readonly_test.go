package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/adapters/teams/teamstest"
)

const (
	jonesOID = "00000000-0000-0000-0000-000000000003"
	jonesMRI = "29:1-dr-jones"
	kimOID   = "00000000-0000-0000-0000-000000000004"
	kimMRI   = "29:1-ph-kim"
)

// stagedTeamsConfig signs order_medication above 10 mg off in two stages
// on Teams: prescribers (any member) first, then the pharmacists group.
func stagedTeamsConfig(fake *teamstest.Server) string {
	return fmt.Sprintf(`
groups:
  pharmacists: [ph_kim]
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {drug: {type: string}, dose_mg: {type: number}}}
    channels: [ops]
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}}
          - {name: pharmacist, approvers: {groups: [pharmacists]}}
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
  - {name: dr_smith, role: member, teams: %s}
  - {name: dr_jones, role: member, teams: %s}
  - {name: ph_kim, role: member, teams: %s}
`, teamsTenant, fake.APIURL, fake.TokenURL, fake.MetadataURL, fake.Issuer, teamsDefault, teamsOps, smithOID, jonesOID, kimOID)
}

// refreshIDs are the Teams user ids a card's refresh names, sorted as the
// card has them.
func refreshIDs(card map[string]any) string {
	ref, _ := card["refresh"].(map[string]any)
	return fmt.Sprint(ref["userIds"])
}

// TestTeamsStagedCardReadOnlyForEarlierStage: the hints on Teams read the
// open stage's approvers (Items.ReadOnly), against the real server and the
// fake Bot Connector. While the prescriber stage is open the card refreshes
// for all three members; once dr_smith has approved it, the card's
// refresh.userIds names only the pharmacist, dr_jones (a prescriber, not a
// pharmacist) refreshing the card gets no buttons and his forged Approve
// is refused and audited, and ph_kim's view has the buttons and decides.
func TestTeamsStagedCardReadOnlyForEarlierStage(t *testing.T) {
	t.Parallel()
	fake := teamstest.New(t, teamsAppID, teamsPassword)
	for oid, mri := range map[string]string{smithOID: smithMRI, jonesOID: jonesMRI, kimOID: kimMRI} {
		fake.AddMember(teamsOps, oid, mri)
	}
	e0 := newTestEnv(t, stagedTeamsConfig(fake))
	e0.env["TEAMS_APP_ID"], e0.env["TEAMS_APP_PASSWORD"] = teamsAppID, teamsPassword
	e := &teamsEnv{testEnv: e0, fake: fake}
	e.agent = e0.CreateKey("ward_bot", "agent")
	e.adminKey = e0.CreateKey("ward_admin", "admin")
	e0.Start()

	req := e.MustOK(e.agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose_mg": 50}})
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
	for _, mri := range []string{smithMRI, jonesMRI, kimMRI} {
		if ids := refreshIDs(card); !strings.Contains(ids, mri) {
			t.Errorf("stage 1: refresh.userIds = %s, want it to name %s (a member may prescribe)", ids, mri)
		}
	}
	item := fmt.Sprint(card["refresh"].(map[string]any)["action"].(map[string]any)["data"].(map[string]any)["item"])

	// dr_smith approves the prescriber stage.
	kind, scard, _ := e.invoke(teamsClick("s-1", smithOID, smithMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	approve := verbs(scard)["approve"]
	if kind != "card" || approve == nil {
		t.Fatalf("dr_smith's stage-1 card = %v, want Approve", scard)
	}
	e.invoke(teamsClick("s-2", smithOID, smithMRI, teamsOps, msg.ID, "approve", strData(approve), e.fake.APIURL))
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after the prescriber the request is %v, want pending (the pharmacist stage is open)", st.Data["status"])
	}

	// The shared card is updated for stage 2: it refreshes for ph_kim only.
	e.fake.Wait("the card updated for the pharmacist stage", func() bool {
		m, _ := e.fake.Message(msg.ID)
		return m.Updates > 0 && refreshIDs(m.Card()) == "["+kimMRI+"]"
	})
	up, _ := e.fake.Message(msg.ID)
	if got := refreshIDs(up.Card()); got != "["+kimMRI+"]" {
		t.Errorf("stage 2: refresh.userIds = %s, want only the pharmacist [%s]", got, kimMRI)
	}

	// dr_jones, who could have prescribed, sees the stage-2 card read-only.
	kind, jcard, _ := e.invoke(teamsClick("j-1", jonesOID, jonesMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	if raw, _ := json.Marshal(jcard); kind != "card" || verbs(jcard)["approve"] != nil || verbs(jcard)["reject"] != nil {
		t.Errorf("dr_jones's stage-2 card = %s, want a card without Approve or Reject", raw)
	}
	// His forged Approve (the data of ph_kim's button) is refused.
	kind, kcard, _ := e.invoke(teamsClick("k-1", kimOID, kimMRI, teamsOps, msg.ID, "refresh", map[string]string{"item": item}, e.fake.APIURL))
	kapprove := verbs(kcard)["approve"]
	if kind != "card" || kapprove == nil {
		t.Fatalf("ph_kim's stage-2 card = %v, want Approve", kcard)
	}
	kind, rcard, text := e.invoke(teamsClick("j-2", jonesOID, jonesMRI, teamsOps, msg.ID, "approve", strData(kapprove), e.fake.APIURL))
	if raw, _ := json.Marshal(rcard); !strings.Contains(text+string(raw), "Access denied") {
		t.Errorf("dr_jones's forged stage-2 approval answered %s %s %s, want Access denied", kind, text, raw)
	}
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("after dr_jones's forged click the request is %v, want pending", st.Data["status"])
	}
	if !strings.Contains(e.auditText(t), "dr_jones") {
		t.Errorf("the refused stage-2 approval by dr_jones is not in the audit")
	}

	// ph_kim's click decides.
	e.invoke(teamsClick("k-2", kimOID, kimMRI, teamsOps, msg.ID, "approve", strData(kapprove), e.fake.APIURL))
	if st := e.MustOK(e.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "approved" {
		t.Fatalf("after the pharmacist the request is %v, want approved", st.Data["status"])
	}
}

// stagedDiscordConfig signs a destructive drop_table off in two stages on
// Discord: any member first, then the dbas group.
func stagedDiscordConfig(fake *discordtest.Server) string {
	return fmt.Sprintf(`
groups:
  dbas: [db_kim]
tools:
  - name: drop_table
    category: destructive
    schema: {type: object, required: [table]}
    channels: [ops]
    rules:
      - when: "true"
        stages:
          - {name: owner, approvers: {roles: [member]}}
          - {name: dba, approvers: {groups: [dbas]}}
discord:
  mode: http
  bot_token_env: DISCORD_BOT_TOKEN
  public_key_env: DISCORD_PUBLIC_KEY
  application_id: "APP"
  guild_id: %q
  api_url: %s
  channels: {default: %q, ops: %q}
principals:
  - {name: dr_smith, role: member, discord: "111"}
  - {name: dr_jones, role: member, discord: "333"}
  - {name: db_kim, role: member, discord: "444"}
`, discordGuild, fake.APIURL, discordDefault, discordOps)
}

// TestDiscordStagedForgedClickRefused: a Discord message shows the same
// buttons to everyone, so the read-only hint cannot hide them; a click by
// someone who is not an approver of the open stage must be refused by the
// one rule (Items.ReadOnly, then the decision), not offered the dangerous
// item's confirmation step. Against the real server and the Discord fake:
// dr_smith approves the owner stage, dr_jones (a member, not a dba) clicks
// Approve and then the confirmation button on the dba stage and is
// refused both times, and db_kim's confirmation decides.
func TestDiscordStagedForgedClickRefused(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, stagedDiscordConfig(fake))
	e.env["DISCORD_BOT_TOKEN"], e.env["DISCORD_PUBLIC_KEY"] = discordToken, hex.EncodeToString(pub)
	d := &discordEnv{testEnv: e, fake: fake, key: priv}
	d.agent = e.CreateKey("db_agent", "agent")
	e.Start()
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	jones := discordtest.Clicker{UserID: "333", GuildID: discordGuild}
	kim := discordtest.Clicker{UserID: "444", GuildID: discordGuild}
	status := func(id string) string {
		return fmt.Sprint(d.MustOK(d.agent, "action_status", map[string]any{"request_id": id}).Data["status"])
	}

	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "drop_table", "arguments": map[string]any{"table": "orders"}, "dry_run": "drop 1 table"})
	reqID, _ := req.Data["request_id"].(string)
	msg, item := d.posted(discordOps, "drop\\\\_table")
	if r := d.click("d1", smith, discordOps, msg, "cs:approve:"+item); !strings.Contains(fmt.Sprint(r), "cs:confirm:"+item) {
		t.Fatalf("dr_smith's stage-1 Approve answered %v, want the confirmation step", r)
	}
	d.click("d2", smith, discordOps, msg, "cs:confirm:"+item)
	if got := status(reqID); got != "pending" {
		t.Fatalf("after the owner stage the request is %s, want pending", got)
	}

	// dr_jones could have approved the owner stage, not the dba stage.
	r := d.click("d3", jones, discordOps, msg, "cs:approve:"+item)
	if s := fmt.Sprint(r); strings.Contains(s, "cs:confirm:") || !strings.Contains(s, "Access denied") || discordFlags(r)&64 == 0 {
		t.Errorf("dr_jones's stage-2 Approve answered %v, want a private Access denied and no confirmation step", r)
	}
	r = d.click("d4", jones, discordOps, msg, "cs:confirm:"+item)
	if s := fmt.Sprint(r); !strings.Contains(s, "Access denied") {
		t.Errorf("dr_jones's forged stage-2 confirmation answered %v, want Access denied", r)
	}
	if got := status(reqID); got != "pending" {
		t.Fatalf("after dr_jones's clicks the request is %s, want pending", got)
	}

	d.click("d5", kim, discordOps, msg, "cs:approve:"+item)
	d.click("d6", kim, discordOps, msg, "cs:confirm:"+item)
	if got := status(reqID); got != "approved" {
		t.Errorf("after db_kim's confirmation the request is %s, want approved", got)
	}
}
