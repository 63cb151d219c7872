package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Attacks of issue 19 open since the last round (19.14), played against
// the real server and its store: callback secrets in the store file, chat
// and API approvals that name no version of an edited request, and a vote
// list grown by editing.

// versionConfig: set_dose under a quorum of 2, Slack, dr_smith in Slack.
func versionConfig(f *slackFake) string {
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
`
}

var approveValueRE = regexp.MustCompile(`"action_id":"countersign.approve","value":"(\d+):([0-9a-f]+)"`)

// slackApproveClick is a signed Approve click of user on item id with
// the button's value.
func slackApproveClick(t *testing.T, e *testEnv, user, trigger, id, value string) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": trigger,
		"user": map[string]any{"id": user}, "team": map[string]any{"id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": "1767225600.000001"},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + id, "value": value, "action_ts": "1.1"}},
	})
	if code, body := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d %s, want %d", code, body, http.StatusOK)
	}
}

// TestAttackApprovalNamesNoVersion (issue 19.14): bob edits a quorum-2
// request (5mg -> 50mg). Before the fix dr_smith's `approve N` typed in
// chat, and an API approval without args_sha256, approved whatever
// version was current: the 50mg neither had seen. A card's Approve
// carried a 32-bit basis checked outside the deciding transaction. Now an
// approval of a request edited since it was created must name its
// version: refused with how to get it; the card carries the full version,
// checked again in the transaction; `show` gives it and `approve N
// <version>` approves it.
func TestAttackApprovalNamesNoVersion(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, versionConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	alice := e.CreateKey("alice", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid, item, proposal := r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"]), r.Data["args_sha256"].(string)
	// The card is posted by the outbox, after the call returns: wait for
	// it, so that it shows the proposal before bob edits it (else the
	// first card posted may already show the edit).
	waitFor(t, "the request's card posted", func() bool { return len(f.Calls("chat.postMessage")) > 0 })
	ed := e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "50mg"}})
	edited := ed.Data["edited_args_sha256"].(string)

	// Typed `approve N`: refused, saying how to name the version.
	if reply := slackText(t, e, "U0123ABC", "approve "+item); !strings.Contains(reply, "must name the version") || !strings.Contains(reply, "show "+item) {
		t.Fatalf("`approve %s` after an edit answered:\n%s\nwant it to say %q and %q", item, reply, "must name the version", "show "+item)
	}
	// The card, updated after the edit, names the edited version in full.
	waitFor(t, "the card updated after the edit", func() bool {
		for _, c := range f.Calls("chat.update") {
			if m := approveValueRE.FindStringSubmatch(slackJSON(c.Form.Get("blocks"))); m != nil && m[2] == edited {
				return true
			}
		}
		return false
	})
	if posts := f.Calls("chat.postMessage"); len(posts) == 0 {
		t.Fatal("the request was not posted: no chat.postMessage, want its card")
	} else if m := approveValueRE.FindStringSubmatch(slackJSON(posts[0].Form.Get("blocks"))); m == nil || m[1] != item || m[2] != proposal {
		t.Fatalf("the posted card's Approve carries %v, want %s:%s (the full version it shows)", m, item, proposal)
	}

	// A click on a card that still showed the proposal: refused.
	slackApproveClick(t, e, "U0123ABC", "t-stale", item, item+":"+proposal)
	waitFor(t, "the stale click's refusal", func() bool { return len(f.Calls("chat.postEphemeral")) >= 1 })
	if eph := f.Calls("chat.postEphemeral")[0].Form.Get("text"); !strings.Contains(eph, "changed after it was shown") {
		t.Fatalf("the stale click's answer = %q, want it to contain %q", eph, "changed after it was shown")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "pending" || st.Data["tally"] != "1 of 2 approvals: bob" {
		t.Fatalf("after the refused approvals: status = %v, tally = %v, want pending, %q: %s", st.Data["status"], st.Data["tally"], "1 of 2 approvals: bob", st)
	}
	// `show` gives the version; `approve N <version>` approves it.
	show := slackText(t, e, "U0123ABC", "show "+item)
	if !strings.Contains(show, "Version: "+edited) || !strings.Contains(show, "approve "+item+" "+edited) {
		t.Fatalf("show after an edit:\n%s\nwant it to contain %q and %q", show, "Version: "+edited, "approve "+item+" "+edited)
	}
	slackText(t, e, "U0123ABC", "approve "+item+" "+edited)
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "approved" || approvedArgs(t, st) != `{"dose":"50mg","drug":"apixaban"}` {
		t.Fatalf("after approving the named version: status = %v, want approved with arguments %s: %s", st.Data["status"], `{"dose":"50mg","drug":"apixaban"}`, st)
	}

	// The API: an approval without args_sha256 of an edited request is a
	// 409 that says how to get the version.
	r = e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "heparin", "dose": "5000u"}})
	rid = r.Data["request_id"].(string)
	ed = e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "heparin", "dose": "10000u"}})
	if a := e.Call(alice, "approve_action", map[string]any{"request_id": rid}); a.Status != http.StatusConflict || a.Field != "args_sha256" || !strings.Contains(a.Error, "edited_args_sha256") {
		t.Fatalf("an API approval naming no version: %s, want 409 on args_sha256", a)
	}
	if a := e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "args_sha256": ed.Data["edited_args_sha256"]}); a.Data["status"] != "approved" {
		t.Fatalf("an API approval naming the version: status = %v, want approved: %s", a.Data["status"], a)
	}
}

// TestAttackVoteListGrowsByEditing (issue 19.14): before the fix one
// approver could grow a request's vote list without bound by editing it
// again and again (each edit is kept for the record). Now one person casts
// at most 10 votes on a request; the next edit is refused (409) saying
// so, and a denial is still recorded.
func TestAttackVoteListGrowsByEditing(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, versionConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	alice := e.CreateKey("alice", "member")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}).Data["request_id"]
	for i := range 10 {
		e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": fmt.Sprintf("%dmg", 6+i%2)}})
	}
	r := e.Call(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "9mg"}})
	if r.Status != http.StatusConflict || !strings.Contains(r.Error, "the most one person casts") {
		t.Fatalf("bob's 11th edit: %s, want 409 saying the vote list is full", r)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); strings.Contains(st.Raw, "9mg") {
		t.Fatalf("the refused edit changed the request, want no %q in it: %s", "9mg", st)
	}
	if d := e.MustOK(alice, "deny_action", map[string]any{"request_id": rid, "reason": "edited too often"}); d.Data["status"] != "denied" {
		t.Fatalf("a denial after the cap: status = %v, want denied: %s", d.Data["status"], d)
	}
}

// TestAttackCallbackSecretInStoreFile (issue 19.14): before the fix each
// principal's callback signing secret was stored as it is, so a copy of
// the store file let anyone sign callbacks its receiver accepts. Now the
// file holds it sealed with a key derived from the signing key (kept
// beside the store, not in it); a plaintext row of an older store keeps
// signing and is sealed at the next start.
func TestAttackCallbackSecretInStoreFile(t *testing.T) {
	t.Parallel()
	rc, srv := newActReceiver(t, http.StatusOK)
	e := newTestEnv(t, actConfig(srv))
	e.env["CS_CALLBACK_SECRET"] = actSecret
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	secret := e.RotateCallbackSecret("ward_bot")
	rows := func() (map[string][]byte, string) {
		db := e.openTestStore()
		defer db.Close()
		out := map[string][]byte{}
		var id string
		err := db.Update(context.Background(), func(tx kv.Tx) error {
			p, err := bot.PrincipalByName(tx, "ward_bot")
			if err != nil {
				return err
			}
			id = p.ID
			return tx.Ascend("callback_secrets", nil, nil, func(k, v []byte) error {
				out[string(k)] = bytes.Clone(v)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, id
	}
	stored, id := rows()
	if len(stored) < 2 {
		t.Fatalf("the store holds %d callback secrets, want one per principal", len(stored))
	}
	for k, v := range stored {
		if bytes.Contains(v, secret) {
			t.Fatalf("the store file holds %s's callback secret as it is (%x), want it sealed", k, v)
		}
	}
	// An older store: the agent's secret in plaintext.
	db := e.openTestStore()
	if err := db.Update(context.Background(), func(tx kv.Tx) error { return tx.Put("callback_secrets", []byte(id), secret) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rc.secret = secret
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}, "callback_url": srv.URL + "/cb"}).Data["request_id"]
	e.MustOK(bob, "approve_action", map[string]any{"request_id": rid})
	actWait(t, "the callback", func() bool { _, got, _ := rc.state(); return len(got) == 1 })
	if _, _, bad := rc.state(); bad != 0 {
		t.Fatalf("%d callbacks failed verification with the older store's secret, want 0", bad)
	}
	e.Stop()
	stored, _ = rows()
	if bytes.Contains(stored[id], secret) {
		t.Fatal("the plaintext secret was not sealed at start: the store file still holds it as it is")
	}
}
