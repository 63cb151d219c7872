package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestReplicasSCIMGroupApprovers: two serve processes on one PostgreSQL
// database, Slack on a fake. order_medication is signed off in two
// stages; the second is the group pharmacists, which config.yaml does
// not declare: only the directory provides it. The identity provider
// provisions two pharmacists (POST /Users, Okta's and Entra's bodies),
// creates the group empty and adds them (POST /Groups, then PATCH add in
// Okta's and Entra's forms), all on replica 1. On replica 0, dr_smith
// prescribes by a Slack click and ph_lee's click is the first of the two
// pharmacist approvals. The directory removes ph_lee (Okta's PATCH
// remove members[value eq …], on replica 1): read at once on replica 0,
// ph_lee's approval no longer counts (why is on the vote, the card's
// tally drops), and their next click is refused as not among the
// pharmacists; ph_kim's approval is then the first of two, not the
// second. Added back (Entra's PATCH Add), ph_lee's click approves it.
func TestReplicasSCIMGroupApprovers(t *testing.T) {
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
    stages:
      - {name: prescriber, approvers: {roles: [member]}}
      - {name: pharmacist, approvers: {groups: [pharmacists]}, quorum: 2}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
  - name: ph_lee
    role: member
    slack: U0456DEF
    email: ph.lee@hospital.example
  - name: ph_kim
    role: member
    slack: U0789GHI
    email: ph.kim@hospital.example
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`
	leader, other, agent := slackReplicas(t, config, map[string]string{"COUNTERSIGN_SCIM_TOKEN": e2eSCIMToken})
	base := other.URL + "/scim/v2"

	// The directory provisions the pharmacists and their group, on replica 1.
	st, lee := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ph.lee@hospital.example","name":{"givenName":"Li","familyName":"Lee"},"emails":[{"primary":true,"value":"ph.lee@hospital.example","type":"work"}],"active":true}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create ph.lee (Okta): %d %v, want %d", st, lee, http.StatusCreated)
	}
	st, kim := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],"externalId":"4a5b","userName":"ph.kim@hospital.example","active":true,"displayName":"Kim, Pat","emails":[{"primary":true,"type":"work","value":"ph.kim@hospital.example"}],"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"department":"Pharmacy"}}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create ph.kim (Entra): %d %v, want %d", st, kim, http.StatusCreated)
	}
	leeID, kimID := lee["id"].(string), kim["id"].(string)
	st, group := scimDo(t, base, e2eSCIMToken, "POST", "/Groups", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"pharmacists","members":[]}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create group: %d %v, want %d", st, group, http.StatusCreated)
	}
	gid := group["id"].(string)
	patch := func(what, ops string) {
		t.Helper()
		if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Groups/"+gid, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":`+ops+`}`)); st != http.StatusOK && st != http.StatusNoContent {
			t.Fatalf("SCIM %s: %d %v, want %d or %d", what, st, body, http.StatusOK, http.StatusNoContent)
		}
	}
	patch("add ph.lee (Okta)", `[{"op":"add","path":"members","value":[{"value":"`+leeID+`","display":"ph.lee@hospital.example"}]}]`)
	patch("add ph.kim (Entra)", `[{"op":"Add","path":"members","value":[{"value":"`+kimID+`"}]}]`)

	st, m, err := leader.call(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "order_medication", "arguments": map[string]any{"drug": "warfarin", "dose_mg": 5}})
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
	ephemeral := func(n int) string {
		t.Helper()
		waitFor(t, "the private answer", func() bool { return len(f.Calls("chat.postEphemeral")) > n })
		return f.Calls("chat.postEphemeral")[n].Form.Get("text")
	}

	// dr_smith prescribes, ph_lee is the first pharmacist: on replica 0.
	click(leader, "U0123ABC", "t1")
	waitFor(t, "dr_smith's approval", func() bool { return len(counting(status(other))) == 1 })
	waitCountedAnswer(t, f, "U0123ABC")
	click(leader, "U0456DEF", "t2")
	waitFor(t, "ph_lee's approval", func() bool { return len(counting(status(other))) == 2 })
	// The private answers come after the votes commit: wait for ph_lee's,
	// so that the answer read after ph_lee's next click is that click's.
	waitCountedAnswer(t, f, "U0456DEF")
	if tally := fmt.Sprint(status(other)["tally"]); !strings.Contains(tally, "stage 2 of 2 (pharmacist): 1 of 2 approvals: ph_lee") {
		t.Fatalf("tally after ph_lee's approval: %s, want it to contain %q", tally, "stage 2 of 2 (pharmacist): 1 of 2 approvals: ph_lee")
	}

	// The directory removes ph_lee from the group (Okta's form), on replica 1.
	patch("remove ph.lee (Okta)", `[{"op":"remove","path":"members[value eq \"`+leeID+`\"]"}]`)

	// At once, read on replica 0: ph_lee's approval no longer counts, and says why.
	d := status(leader)
	if d["status"] != "pending" || len(counting(d)) != 1 {
		t.Fatalf("after the removal, on replica 0: %v, want status pending with 1 counting vote", d)
	}
	votes, _ := d["votes"].([]any)
	if len(votes) != 2 || !strings.Contains(fmt.Sprint(votes[1].(map[string]any)["void"]), "the directory removed them from the group pharmacists") {
		t.Fatalf("ph_lee's votes after the removal: %v, want 2, the second's void containing %q", d["votes"], "the directory removed them from the group pharmacists")
	}
	if tally := fmt.Sprint(d["tally"]); !strings.Contains(tally, "stage 2 of 2 (pharmacist): 0 of 2 approvals") {
		t.Fatalf("tally after the removal: %s, want it to contain %q", tally, "stage 2 of 2 (pharmacist): 0 of 2 approvals")
	}
	waitFor(t, "the card's tally to drop", func() bool {
		for _, c := range f.Calls("chat.update") {
			if strings.Contains(c.Form.Get("blocks"), "0 of 2 approvals") {
				return true
			}
		}
		return false
	})

	// ph_lee clicks again on replica 0: refused, privately, as no pharmacist.
	n := len(f.Calls("chat.postEphemeral"))
	click(leader, "U0456DEF", "t3")
	if msg := ephemeral(n); !strings.Contains(msg, "decided by groups pharmacists") || !strings.Contains(msg, "ph_lee") || !strings.Contains(msg, "is not among them") {
		t.Fatalf("ph_lee's click after the removal was answered %q, want it to contain %q, %q and %q", msg, "decided by groups pharmacists", "ph_lee", "is not among them")
	}
	// ph_kim's approval is the first of two, not the second.
	click(leader, "U0789GHI", "t4")
	waitFor(t, "ph_kim's approval", func() bool { return len(counting(status(other))) == 2 })
	if d := status(other); d["status"] != "pending" {
		t.Fatalf("ph_kim's approval decided a request whose other pharmacist left the group: %v, want status pending", d)
	}

	// Added back (Entra's form, on replica 1), ph_lee's click approves it.
	patch("add ph.lee back (Entra)", `[{"op":"Add","path":"members","value":[{"value":"`+leeID+`"}]}]`)
	click(leader, "U0456DEF", "t5")
	waitFor(t, "the approval", func() bool { return status(other)["status"] == "approved" })
}
