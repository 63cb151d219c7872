package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestReplicasSCIMDeactivationDuringQuorum: two serve processes on one
// PostgreSQL database, Slack on a fake. A request needs two approvals;
// dr_smith approves it by a Slack click (on the leader, replica 0); the
// directory deactivates dr_smith through SCIM on replica 1 (Okta's
// PATCH). Then, read on replica 0 at once: dr_smith's approval no longer
// counts (and the card's tally says 0 of 2), dr_jones's approval is the
// first of two, not the second, and dr_smith's next Slack click is refused
// with the suspension; after the directory reactivates them (Entra's
// PATCH, on replica 1) their click approves it.
func TestReplicasSCIMDeactivationDuringQuorum(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two servers")
	}
	f := newSlackFake(t)
	config := `slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  channels: {default: C0DEFAULT}
tools:
  - name: order_medication
    category: mutating
    approvers: {roles: [member]}
    quorum: 2
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
    email: dr.smith@hospital.example
  - name: dr_jones
    role: member
    slack: U0456DEF
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`
	// Slack clicks go to the leader, the directory's requests to the other
	// replica (every replica decides the clicks it acknowledges:
	// TestReplicasDecideClicksOnEveryReplica).
	leader, other, agent := slackReplicas(t, config, map[string]string{"COUNTERSIGN_SCIM_TOKEN": e2eSCIMToken})
	reps := []*replica{leader, other}

	st, m, err := reps[0].call(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "order_medication", "arguments": map[string]any{"drug": "amoxicillin", "dose_mg": 500}})
	if err != nil || st != 200 || data(m)["status"] != "pending" {
		t.Fatalf("confirm_action: %d %v %v, want 200 with status pending and no error", st, m, err)
	}
	reqID := data(m)["request_id"].(string)
	waitFor(t, "the card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(post.Form.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	var itemID, approveValue string
	for _, b := range blocks {
		if id, ok := strings.CutPrefix(fmt.Sprint(b["block_id"]), "countersign:"); ok {
			itemID = id
		}
		els, _ := b["elements"].([]any)
		for _, el := range els {
			if el, _ := el.(map[string]any); el["action_id"] == "countersign.approve" {
				approveValue, _ = el["value"].(string)
			}
		}
	}
	if itemID == "" || approveValue == "" {
		t.Fatalf("no item or Approve button on the card: %s", post.Form.Get("blocks"))
	}
	ephemerals := func() int { return len(f.Calls("chat.postEphemeral")) }
	click := func(r *replica, user, trigger string) {
		t.Helper()
		slackClickOnCard(t, r.URL, post, user, trigger, itemID, approveValue)
	}
	status := func(r *replica) map[string]any {
		t.Helper()
		_, m, err := r.call(agent, "action_status", map[string]any{"request_id": reqID})
		if err != nil {
			t.Fatal(err)
		}
		return data(m)
	}
	counting := countingVotes

	// dr_smith approves on replica 0: 1 of 2.
	click(reps[0], "U0123ABC", "t1")
	waitFor(t, "dr_smith's approval to count", func() bool { return len(counting(status(reps[1]))) == 1 })
	waitCountedAnswer(t, f, "U0123ABC")

	// The directory provisions and then deactivates dr_smith, on replica 1.
	base := reps[1].URL + "/scim/v2"
	st, user := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"dr.smith@hospital.example","emails":[{"primary":true,"value":"dr.smith@hospital.example","type":"work"}],"active":true}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create: %d %v, want %d", st, user, http.StatusCreated)
	}
	uid := user["id"].(string)
	if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+uid, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","value":{"active":false}}]}`)); st != 200 || body["active"] != false {
		t.Fatalf("SCIM deactivate: %d %v, want 200 with active false", st, body)
	}
	// At once, read on the other replica: the vote no longer counts, and
	// it says why.
	d := status(reps[0])
	if d["status"] != "pending" || len(counting(d)) != 0 {
		t.Fatalf("after the deactivation, on replica 0: %v, want status pending with no counting vote", d)
	}
	votes, _ := d["votes"].([]any)
	if len(votes) != 1 || !strings.Contains(fmt.Sprint(votes[0].(map[string]any)["void"]), "suspended from approving: scim: deactivated in the organisation's directory") {
		t.Fatalf("votes after the deactivation: %v, want 1, its void containing %q", d["votes"], "suspended from approving: scim: deactivated in the organisation's directory")
	}
	waitFor(t, "the card's tally to drop", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(c.Form.Get("blocks"), "0 of 2 approvals") {
				return true
			}
		}
		return false
	})

	// dr_jones approves on replica 0: the first of two, not the second.
	click(reps[0], "U0456DEF", "t2")
	waitFor(t, "dr_jones's approval to count", func() bool { return len(counting(status(reps[1]))) == 1 })
	// Its private answer comes after the vote commits: wait for it, so
	// that the answer counted next is the refusal of dr_smith's click.
	waitCountedAnswer(t, f, "U0456DEF")
	if d := status(reps[1]); d["status"] != "pending" {
		t.Fatalf("dr_jones's approval decided a request whose other approver was deactivated: %v, want status pending", d)
	}

	// dr_smith clicks again, on replica 1: refused, privately, saying why.
	n := ephemerals()
	click(reps[0], "U0123ABC", "t3")
	waitFor(t, "the refusal", func() bool { return ephemerals() > n })
	if msg := f.Calls("chat.postEphemeral")[n].Form.Get("text"); !strings.Contains(msg, "suspended") || !strings.Contains(msg, "deactivated in the organisation's directory") {
		t.Fatalf("dr_smith's click after the deactivation was answered %q, want it to contain %q and %q", msg, "suspended", "deactivated in the organisation's directory")
	}
	if d := status(reps[0]); d["status"] != "pending" || len(counting(d)) != 1 {
		t.Fatalf("after the refused click: %v, want status pending with 1 counting vote", d)
	}

	// Reactivated (Entra's form of the PATCH, on replica 0), dr_smith's
	// click is the second approval.
	if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+uid, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"Replace","path":"active","value":true}]}`)); st != 200 || body["active"] != true {
		t.Fatalf("SCIM reactivate: %d %v, want 200 with active true", st, body)
	}
	click(reps[0], "U0123ABC", "t4")
	waitFor(t, "the approval", func() bool { return status(reps[0])["status"] == "approved" })
}

// slackClickOnCard is a signed Approve click of user on the card post
// (item itemID, the button's value), posted to the replica at base, with
// the message as the user saw it (what the click's basis is read from).
func slackClickOnCard(t *testing.T, base string, post slackCall, user, trigger, itemID, value string) {
	t.Helper()
	var msgBlocks any
	_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &msgBlocks)
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger, "user": map[string]any{"id": user, "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
		"message":   map[string]any{"ts": post.TS, "blocks": msgBlocks},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + itemID, "value": value, "action_ts": trigger}},
	})
	if code, body := postSlack(t, base, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d: %s, want %d", code, body, http.StatusOK)
	}
}

// countingVotes are the deciders (by) of the votes in action_status's
// data d that count now.
func countingVotes(d map[string]any) []string {
	var out []string
	votes, _ := d["votes"].([]any)
	for _, v := range votes {
		v, _ := v.(map[string]any)
		if v["counts"] == true {
			out = append(out, fmt.Sprint(v["by"]))
		}
	}
	return out
}
