package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestReplicasHoldADelegation: two serve processes on one PostgreSQL
// database. alice lends her approvals to bob with a Slack command on one
// replica; bob's click on the other approves in her name at once; Slack's
// deactivation of alice, on the first, ends it at once on the second:
// the delegation is read from the database in the deciding transaction,
// never from a replica's memory.
func TestReplicasHoldADelegation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two servers")
	}
	f := newSlackFake(t)
	leader, other, agent := slackReplicas(t, "http:\n  rate_per_minute: 600000\n  rate_burst: 100000\n"+delegationConfig(f), nil)
	status := func(rid string) map[string]any {
		t.Helper()
		st, m, err := leader.call(agent, "action_status", map[string]any{"request_id": rid})
		if err != nil || st != 200 {
			t.Fatalf("action_status: %d %v %v, want 200 and no error", st, m, err)
		}
		return data(m)
	}
	request := func(amount int) (rid, item, value string) {
		t.Helper()
		before := len(f.Calls("chat.postMessage"))
		st, m, err := other.call(agent, "confirm_action", map[string]any{"tool": "transfer_funds", "arguments": map[string]any{"amount": amount}})
		if err != nil || st != 200 {
			t.Fatalf("confirm_action: %d %v %v, want 200 and no error", st, m, err)
		}
		waitFor(t, "the card posted", func() bool { return len(f.Calls("chat.postMessage")) > before })
		v := approveValueRE.FindStringSubmatch(slackJSON(f.Calls("chat.postMessage")[before].Form.Get("blocks")))
		if v == nil {
			t.Fatal("the card has no Approve")
		}
		return data(m)["request_id"].(string), fmt.Sprint(data(m)["item_id"]), v[1] + ":" + v[2]
	}

	form := url.Values{"team_id": {"T1"}, "user_id": {"U0ALICE"}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {"delegate <@U0BOB> for 4h"}, "trigger_id": {"t-d"}}
	code, body := postSlack(t, other.URL, "/slack/commands", form, e2eSlackSecret)
	var resp struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK || !strings.HasPrefix(resp.Text, "Delegated: bob decides in your name until") {
		t.Fatalf("/countersign delegate on one replica answered %d %s, want 200 with JSON text starting %q", code, body, "Delegated: bob decides in your name until")
	}

	rid, item, value := request(120)
	slackClickAt(t, leader.URL, "U0BOB", "t-1", item, value)
	waitFor(t, "bob's approval on the other replica", func() bool { return status(rid)["status"] == "approved" })
	if got := status(rid)["confirmed_by"]; got != "bob [U0BOB] for alice" {
		t.Fatalf("confirmed_by %v, want bob [U0BOB] for alice", got)
	}

	if code, body := postSlackEvent(t, other.URL, userDeactivated("Ev1", "T1", "U0ALICE"), e2eSlackSecret); code != 200 {
		t.Fatalf("the deactivation on one replica answered %d %s, want 200", code, body)
	}
	rid2, item2, value2 := request(80)
	before := len(f.Calls("chat.postEphemeral"))
	slackClickAt(t, leader.URL, "U0BOB", "t-2", item2, value2)
	waitFor(t, "the refusal", func() bool { return len(f.Calls("chat.postEphemeral")) > before })
	if eph := f.Calls("chat.postEphemeral")[before].Form.Get("text"); !strings.Contains(eph, "not among them") {
		t.Fatalf("bob's click after alice's deactivation on the other replica answered %q, want it to contain %q", eph, "not among them")
	}
	if d := status(rid2); d["status"] != "pending" {
		t.Fatalf("after the refused click: %v, want status pending", d)
	}
}
