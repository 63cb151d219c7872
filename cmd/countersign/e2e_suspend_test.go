package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord/discordtest"
)

// Chat identity that follows the platform (issue 26 item 4): a Slack
// account the workspace deactivates, or a Discord member who leaves the
// server, is suspended from approving: audited, stored (so every replica's
// deciding transaction reads it), their pending approvals no longer
// count, their clicks refused by the one decision rule, until an admin
// lifts it.

// suspendConfig: a quorum of two for set_dose, dr_smith and nurse_jo in
// Slack.
func suspendConfig(f *slackFake) string {
	return `tools:
  - name: set_dose
    category: mutating
    quorum: 2
    schema: {type: object, required: [drug, dose]}
slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC}
  - {name: nurse_jo, role: member, slack: U0456DEF}
`
}

// postSlackEvent posts an Events API body to /slack/events, signed with
// secret as Slack signs it.
func postSlackEvent(t *testing.T, base string, body any, secret string) (int, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, raw)
	req, _ := http.NewRequest("POST", base+"/slack/events", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// userDeactivated is the event_callback Slack sends when the workspace
// deactivates user (user_change, deleted).
func userDeactivated(eventID, team, user string) map[string]any {
	return map[string]any{
		"type": "event_callback", "team_id": team, "api_app_id": "A1", "event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "user_change", "event_ts": "1767225600.000100", "cache_ts": time.Now().Unix(),
			"user": map[string]any{"id": user, "team_id": team, "name": "someone", "deleted": true, "profile": map[string]any{}}},
	}
}

func TestSlackDeactivatedApproverIsSuspended(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, suspendConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid, item := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) > 0 })
	m := approveValueRE.FindStringSubmatch(slackJSON(f.Calls("chat.postMessage")[0].Form.Get("blocks")))
	if m == nil {
		t.Fatalf("the card has no Approve: %s", f.Calls("chat.postMessage")[0].Form.Get("blocks"))
	}
	value := m[1] + ":" + m[2]
	slackApproveClick(t, e, "U0123ABC", "t-1", item, value)
	waitFor(t, "dr_smith's approval counted", func() bool {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["tally"] == "1 of 2 approvals: dr_smith"
	})
	// The click's private answer is posted after the vote commits: wait
	// for it, so that the answer read after the next click is that one's.
	waitCountedAnswer(t, f, "U0123ABC")

	// The Events API endpoint: signed, and it answers Slack's URL check.
	if code, body := postSlackEvent(t, e.URL, map[string]any{"type": "url_verification", "challenge": "c-42"}, e2eSlackSecret); code != 200 || body != "c-42" {
		t.Fatalf("url_verification answered %d %q, want 200 %q", code, body, "c-42")
	}
	if code, _ := postSlackEvent(t, e.URL, userDeactivated("Ev0", "T1", "U0123ABC"), "forged-secret"); code != http.StatusUnauthorized {
		t.Fatalf("an unsigned event answered %d, want 401", code)
	}
	if n := len(e.MustOK(admin, "list_suspensions", map[string]any{}).Data["suspensions"].([]any)); n != 0 {
		t.Fatalf("a forged event suspended someone (%d suspensions, want 0)", n)
	}

	// The workspace deactivates dr_smith: suspended, and the approval
	// already given stops counting, at once.
	for range 2 { // Slack retries an event: it is recorded once
		if code, body := postSlackEvent(t, e.URL, userDeactivated("Ev1", "T1", "U0123ABC"), e2eSlackSecret); code != 200 {
			t.Fatalf("the user_change event answered %d %s, want 200", code, body)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["tally"] != "0 of 2 approvals" || st.Data["status"] != "pending" {
		t.Fatalf("after the deactivation: %s, want 0 of 2 approvals, pending", st)
	}
	sus := e.MustOK(admin, "list_suspensions", map[string]any{})
	if !strings.Contains(sus.Text, "dr_smith  slack: the Slack account was deactivated") {
		t.Fatalf("list_suspensions: %s, want it to contain %q", sus.Text, "dr_smith  slack: the Slack account was deactivated")
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw
	if n := strings.Count(audit, `"action":"principal_suspended"`); n != 1 || !strings.Contains(audit, "account T1/U0123ABC") || !strings.Contains(audit, "approvals no longer counting on #"+item) {
		t.Fatalf("%d principal_suspended entries, want 1 naming the account and #%s:\n%s", n, item, audit)
	}
	// The card is updated: its tally no longer names dr_smith.
	waitFor(t, "the card updated", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(c.Form.Get("blocks"), "0 of 2 approvals") {
				return true
			}
		}
		return false
	})

	// Their next click, and a typed approval, are refused by the rule.
	before := len(f.Calls("chat.postEphemeral"))
	slackApproveClick(t, e, "U0123ABC", "t-2", item, value)
	waitFor(t, "the refusal", func() bool { return len(f.Calls("chat.postEphemeral")) > before })
	if eph := f.Calls("chat.postEphemeral")[before].Form.Get("text"); !strings.Contains(eph, "is suspended from approving") {
		t.Fatalf("the suspended approver's click answered %q, want it to say %q", eph, "is suspended from approving")
	}
	if reply := slackText(t, e, "U0123ABC", "approve "+item); !strings.Contains(reply, "suspended from approving") {
		t.Fatalf("a typed approval by the suspended approver answered %q, want it to say %q", reply, "suspended from approving")
	}
	// nurse_jo's approval is the first that counts: not yet a quorum.
	slackApproveClick(t, e, "U0456DEF", "t-3", item, value)
	waitFor(t, "nurse_jo's approval counted", func() bool {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["tally"] == "1 of 2 approvals: nurse_jo"
	})

	// An admin lifts the suspension: dr_smith approves again, and that
	// approval counts.
	if r := e.MustOK(admin, "lift_suspension", map[string]any{"name": "dr_smith", "reason": "account reactivated"}); r.Data["lifted"] != true {
		t.Fatalf("lift_suspension: %s, want lifted true", r)
	}
	slackText(t, e, "U0123ABC", "approve "+item)
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "approved" || st.Data["confirmed_by"] != "nurse_jo [U0456DEF], dr_smith [U0123ABC]" {
		t.Fatalf("after the suspension was lifted: %s, want approved, confirmed by %q", st, "nurse_jo [U0456DEF], dr_smith [U0123ABC]")
	}
	if audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw; !strings.Contains(audit, `"action":"suspension_lifted"`) || !strings.Contains(audit, "account reactivated") {
		t.Errorf("the lift is not audited:\n%s", audit)
	}
}

// TestDiscordMemberWhoLeavesIsSuspended: gateway mode with member_events:
// a GUILD_MEMBER_REMOVE of a mapped member suspends them; a member of
// another server, or one not mapped, suspends nobody.
func TestDiscordMemberWhoLeavesIsSuspended(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	e := newTestEnv(t, strings.Replace(discordConfig(fake, "gateway"), "  guild_id:", "  member_events: true\n  guild_id:", 1))
	e.env["DISCORD_BOT_TOKEN"] = discordToken
	d := &discordEnv{testEnv: e, fake: fake}
	d.agent = e.CreateKey("intake_agent", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()
	d.fake.Wait("identify", func() bool { return len(d.fake.Identifies()) == 1 })
	if in := d.fake.Identifies()[0].Intents; in&(1<<1) == 0 {
		t.Fatalf("identify intents %d, want GUILD_MEMBERS (1<<1)", in)
	}
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "full code"})
	d.MustOK(d.agent, "remember", map[string]any{"user_id": "patient_7", "subject": "code_status", "value": "DNR"})
	msg, item := d.posted(discordDefault, "code\\\\_status")

	left := func(guild, user string) map[string]any {
		return map[string]any{"guild_id": guild, "user": map[string]any{"id": user, "username": "someone"}}
	}
	d.fake.DispatchEvent("GUILD_MEMBER_REMOVE", left("999999999999999999", "111")) // another server
	d.fake.DispatchEvent("GUILD_MEMBER_REMOVE", left(discordGuild, "777"))         // not mapped
	d.fake.DispatchEvent("GUILD_MEMBER_REMOVE", left(discordGuild, "111"))         // dr_smith
	var list string
	d.fake.Wait("dr_smith suspended", func() bool {
		list = d.MustOK(admin, "list_suspensions", map[string]any{}).Text
		return strings.Contains(list, "dr_smith")
	})
	if !strings.Contains(list, "discord: left or was removed from the Discord server "+discordGuild) || strings.Count(list, "⛔") != 1 {
		t.Fatalf("list_suspensions: %s, want only dr_smith, for leaving %s", list, discordGuild)
	}
	// Their click is refused, and the proposal stays open.
	d.fake.Dispatch(discordtest.Click("g1", discordtest.Clicker{UserID: "111", GuildID: discordGuild}, discordDefault, msg, "cs:approve:"+item))
	d.fake.Wait("the interaction callback", func() bool { return len(d.fake.CallsTo("POST", "interactions/g1/")) == 1 })
	if r := d.fake.CallsTo("POST", "interactions/g1/")[0].JSON(); !strings.Contains(fmt.Sprint(r), "suspended from approving") {
		t.Fatalf("the departed member's click answered %v, want it to say %q", r, "suspended from approving")
	}
	if r := d.MustOK(d.agent, "pending_changes", map[string]any{"user_id": "patient_7"}); !strings.Contains(r.Text, "DNR") {
		t.Fatalf("the proposal was decided: %s, want the DNR change still awaiting approval", r.Text)
	}
	audit := d.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw
	if !strings.Contains(audit, `"action":"principal_suspended"`) || !strings.Contains(audit, "account 111") {
		t.Fatalf("the suspension is not audited:\n%s", audit)
	}
}

// TestDiscordMemberEventsNeedGatewayMode: HTTP interactions receive no
// member events, so asking for them there is a configuration error.
func TestDiscordMemberEventsNeedGatewayMode(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	cfg := strings.Replace(discordConfig(fake, "http"), "  guild_id:", "  member_events: true\n  guild_id:", 1)
	e := newTestEnv(t, cfg)
	var errb bytes.Buffer
	err := run(t.Context(), []string{"serve", "--config", e.cfg}, e.getenv, strings.NewReader(""), io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "discord.member_events") || !strings.Contains(err.Error(), "needs mode: gateway") {
		t.Fatalf("member_events in http mode: %v, want an error naming discord.member_events and saying %q", err, "needs mode: gateway")
	}
}

// TestSlackSocketModeDeactivationSuspends: the same user_change event
// over Socket Mode (an events_api envelope) suspends the mapped principal.
func TestSlackSocketModeDeactivationSuspends(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "socket"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_APP_TOKEN"] = "xoxb-e2e", "xapp-e2e"
	admin := e.CreateKey("ops", "admin")
	e.Start()
	waitFor(t, "the socket to open", func() bool { return len(f.Calls("apps.connections.open")) >= 1 })
	payload, _ := json.Marshal(userDeactivated("Ev9", "T1", "U0123ABC"))
	f.frames <- `{"type":"events_api","envelope_id":"env-9","accepts_response_payload":false,"payload":` + string(payload) + `}`
	waitFor(t, "the acknowledgement", func() bool {
		for _, a := range f.Acks() {
			if a["envelope_id"] == "env-9" {
				return true
			}
		}
		return false
	})
	waitFor(t, "dr_smith suspended", func() bool {
		return strings.Contains(e.MustOK(admin, "list_suspensions", map[string]any{}).Text, "dr_smith  slack: the Slack account was deactivated")
	})
}

// slackClickAt is a signed Approve click of user on item id, with the
// button's value, posted to the replica at base.
func slackClickAt(t *testing.T, base, user, trigger, id, value string) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger,
		"user": map[string]any{"id": user}, "team": map[string]any{"id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": "1767225600.000001"},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + id, "value": value, "action_ts": "1.1"}},
	})
	if code, body := postSlack(t, base, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d %s, want %d", code, body, http.StatusOK)
	}
}

// slackReplicas starts two serve processes on one throwaway PostgreSQL
// database with config (below listen, store and audit) and the Slack
// environment plus env, creates the agent key ward_bot, and returns the
// replicas leader first, with the key.
func slackReplicas(t *testing.T, config string, env map[string]string) (leader, follower *replica, agent string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	full := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + "\n" + config
	if err := os.WriteFile(cfg, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"COUNTERSIGN_DATABASE_URL": testDSN(t), "SLACK_BOT_TOKEN": "xoxb-e2e", "SLACK_SIGNING_SECRET": e2eSlackSecret}
	for k, v := range env {
		all[k] = v
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: all}
	agent = e.CreateKey("ward_bot", "agent")
	var envList []string
	for k, v := range all {
		envList = append(envList, k+"="+v)
	}
	reps := []*replica{startReplica(t, cfg, envList), startReplica(t, cfg, envList)}
	lead := -1
	waitFor(t, "a leader", func() bool {
		for i, r := range reps {
			if strings.Contains(r.logs.String(), "this replica leads") {
				lead = i
				return true
			}
		}
		return false
	})
	return reps[lead], reps[1-lead], agent
}

// TestReplicasHoldASuspension: two serve processes on one PostgreSQL
// database. Slack's deactivation event reaches one replica; on the other,
// at once, the approval the person gave no longer counts and their next
// click is refused: the suspension is read from the database in the
// deciding transaction, never from a replica's memory.
func TestReplicasHoldASuspension(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	f := newSlackFake(t)
	// Slack's clicks go to the leader; the event goes to the other replica.
	leader, other, agent := slackReplicas(t, "http:\n  rate_per_minute: 600000\n  rate_burst: 100000\n"+suspendConfig(f), nil)
	status := func(r *replica, rid string) map[string]any {
		t.Helper()
		st, m, err := r.call(agent, "action_status", map[string]any{"request_id": rid})
		if err != nil || st != 200 {
			t.Fatalf("action_status: %d %v %v, want 200", st, m, err)
		}
		return data(m)
	}
	st, m, err := other.call(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	if err != nil || st != 200 {
		t.Fatalf("confirm_action: %d %v %v, want 200", st, m, err)
	}
	rid, item := data(m)["request_id"].(string), fmt.Sprint(data(m)["item_id"])
	waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) > 0 })
	v := approveValueRE.FindStringSubmatch(slackJSON(f.Calls("chat.postMessage")[0].Form.Get("blocks")))
	if v == nil {
		t.Fatal("the card has no Approve")
	}
	value := v[1] + ":" + v[2]
	slackClickAt(t, leader.URL, "U0123ABC", "t-1", item, value)
	waitFor(t, "an answer to dr_smith's click", func() bool { return len(f.Calls("chat.postEphemeral")) > 0 })
	if d := status(leader, rid); d["tally"] != "1 of 2 approvals: dr_smith" {
		t.Fatalf("after dr_smith's click (%s): %v, want tally %q", f.Calls("chat.postEphemeral")[0].Form.Get("text"), d, "1 of 2 approvals: dr_smith")
	}

	if code, body := postSlackEvent(t, other.URL, userDeactivated("Ev1", "T1", "U0123ABC"), e2eSlackSecret); code != 200 {
		t.Fatalf("the event on the other replica answered %d %s, want 200", code, body)
	}
	if d := status(leader, rid); d["tally"] != "0 of 2 approvals" {
		t.Fatalf("the leader right after the suspension on the other replica: %v, want tally %q", d, "0 of 2 approvals")
	}
	before := len(f.Calls("chat.postEphemeral"))
	slackClickAt(t, leader.URL, "U0123ABC", "t-2", item, value)
	waitFor(t, "the refusal", func() bool { return len(f.Calls("chat.postEphemeral")) > before })
	if eph := f.Calls("chat.postEphemeral")[before].Form.Get("text"); !strings.Contains(eph, "is suspended from approving") {
		t.Fatalf("the suspended approver's click on the leader answered %q, want it to say %q", eph, "is suspended from approving")
	}
	if d := status(leader, rid); d["status"] != "pending" || d["tally"] != "0 of 2 approvals" {
		t.Fatalf("after the refused click: %v, want pending, tally %q", d, "0 of 2 approvals")
	}
}

// TestReplicasDecideClicksOnEveryReplica: two serve processes on one
// PostgreSQL database; Slack's clicks reach whichever replica the load
// balancer picks. A click acknowledged by the follower is decided (it
// was answered 200 and then never decided while only the leader ran
// the click workers), and the leader, which delivers, updates the card.
func TestReplicasDecideClicksOnEveryReplica(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two servers")
	}
	f := newSlackFake(t)
	leader, follower, agent := slackReplicas(t, "http:\n  rate_per_minute: 600000\n  rate_burst: 100000\n"+suspendConfig(f), nil)
	status := func(rid string) map[string]any {
		t.Helper()
		st, m, err := leader.call(agent, "action_status", map[string]any{"request_id": rid})
		if err != nil || st != 200 {
			t.Fatalf("action_status: %d %v %v, want 200", st, m, err)
		}
		return data(m)
	}
	st, m, err := leader.call(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	if err != nil || st != 200 {
		t.Fatalf("confirm_action: %d %v %v, want 200", st, m, err)
	}
	rid, item := data(m)["request_id"].(string), fmt.Sprint(data(m)["item_id"])
	waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) > 0 })
	v := approveValueRE.FindStringSubmatch(slackJSON(f.Calls("chat.postMessage")[0].Form.Get("blocks")))
	if v == nil {
		t.Fatal("the card has no Approve")
	}
	value := v[1] + ":" + v[2]

	slackClickAt(t, follower.URL, "U0123ABC", "t-f1", item, value)
	waitFor(t, "dr_smith's click on the follower to count", func() bool { return status(rid)["tally"] == "1 of 2 approvals: dr_smith" })
	slackClickAt(t, follower.URL, "U0456DEF", "t-f2", item, value)
	waitFor(t, "nurse_jo's click on the follower to approve", func() bool { return status(rid)["status"] == "approved" })
	if d := status(rid); fmt.Sprint(d["decided_by"]) == "" {
		t.Errorf("approved without deciders: %v", d)
	}
	waitFor(t, "the leader to update the card", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(c.Form.Get("blocks"), "Approved") {
				return true
			}
		}
		return false
	})
}
