package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/bot/bottest"
)

// Attacks of issue 19 on the approval queue and what it shows, played
// against the real server (and the store file): one agent crowding every
// approver's view, the inbox showing spaces outside a person's scopes, a
// sensitive tool's arguments over action_status. SECURITY.md ("What each
// surface shows") says what every surface checks.

// queueConfig: a mutating tool, a sensitive one, Slack for chat, and
// people in the console and in Slack: dr_a sees ward_a only, boss sees
// every ward, vic is a viewer.
func queueConfig(f *slackFake) string {
	return `http:
  rate_burst: 500
tools:
  - name: set_dose
    category: mutating
    schema: {type: object, required: [drug, dose]}
  - name: prescribe
    category: mutating
    sensitive: true
slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - {name: dr_a, role: member, web: a@x.example, slack: U0DRA, scopes: [ward_a]}
  - {name: boss, role: member, web: boss@x.example, slack: U0BOSS}
  - {name: vic, role: viewer, web: vic@x.example, slack: U0VIC}
`
}

func newQueueEnv(t *testing.T) (*testEnv, *slackFake) {
	t.Helper()
	f := newSlackFake(t)
	e := newTestEnv(t, queueConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	return e, f
}

// slackText runs a /countersign command as a Slack user and returns the
// private reply.
func slackText(t *testing.T, e *testEnv, user, text string) string {
	t.Helper()
	form := url.Values{"team_id": {"T1"}, "user_id": {user}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {text}, "trigger_id": {fmt.Sprintf("t-%s-%d", user, slackTriggers.Add(1))}}
	code, body := postSlack(t, e.URL, "/slack/commands", form, e2eSlackSecret)
	var resp struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK {
		t.Fatalf("/countersign %s answered %d %s, want %d and a JSON reply", text, code, body, http.StatusOK)
	}
	return resp.Text
}

// slackTriggers numbers the commands' trigger ids: a repeated one is a
// retried delivery, answered once.
var slackTriggers atomic.Int64

var inboxRowRE = regexp.MustCompile(`<li class="item[^"]*" id="item-(\d+)"`)
var nextPageRE = regexp.MustCompile(`<a href="([^"]+)" rel="next" id="next">`)

// inboxIDs are the item ids an inbox page lists, in order.
func inboxIDs(page string) []string {
	var ids []string
	for _, m := range inboxRowRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// flood has each agent key ask n confirmations in space, all at once, and
// fails unless every one is pending.
func flood(t *testing.T, e *testEnv, keys []string, space string, n int) {
	t.Helper()
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				body, _ := json.Marshal(map[string]any{"user_id": space, "tool": "set_dose", "arguments": map[string]any{"drug": "noise", "dose": fmt.Sprint(i)}})
				req, _ := http.NewRequest("POST", e.URL+"/v1/tools/confirm_action", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				var r struct {
					Data map[string]any `json:"data"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || r.Data["status"] != "pending" {
					errs <- fmt.Errorf("flood request %d answered %d %v", i, resp.StatusCode, r.Data)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestAttackFloodHidesOthersItems (issue 19.2): agents scoped to ward_b
// keep 1,100 requests pending (11 agents of 100, within the open-item
// quota). Before the fix the console inbox and chat `pending` read the
// 1,000 newest pending items and filtered afterwards, so dr_a (ward_a
// only) saw nothing, and the unscoped boss never saw the ward_a request,
// which timed out and was denied by automatic policy. Now each reader gets
// what it may see from the store, soonest to expire first, and every item
// is reachable page by page.
func TestAttackFloodHidesOthersItems(t *testing.T) {
	t.Parallel()
	e, _ := newQueueEnv(t)
	victim := e.CreateKey("ward_a_bot", "agent", "--scopes", "ward_a")
	var floods []string
	for i := range 11 {
		floods = append(floods, e.CreateKey(fmt.Sprintf("noisy_%d", i), "agent", "--scopes", "ward_b"))
	}
	e.Start()
	r := e.MustOK(victim, "confirm_action", map[string]any{"user_id": "ward_a", "tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}, "summary": "Reduce apixaban"})
	item := fmt.Sprint(r.Data["item_id"])
	flood(t, e, floods, "ward_b", 100)

	// dr_a, scoped to ward_a, finds it in the console and in chat.
	drA := signInHTTP(t, e, "dr_a")
	_, page := webDo(t, drA, "GET", e.URL+"/ui/", nil)
	if ids := inboxIDs(page); len(ids) != 1 || ids[0] != item {
		t.Fatalf("dr_a's inbox lists %v, want only #%s (ward_a's one request among 1,100 of ward_b)", ids, item)
	}
	if reply := slackText(t, e, "U0DRA", "pending"); !strings.Contains(reply, "#"+item+" ") || !strings.HasPrefix(reply, "1 item awaits a decision") {
		t.Fatalf("dr_a's chat pending:\n%s\nwant #%s", reply, item)
	}
	// boss sees every ward: the ward_a request expires first, so it is
	// first; the pages reach all 1,101 items, each once.
	boss := signInHTTP(t, e, "boss")
	_, page = webDo(t, boss, "GET", e.URL+"/ui/", nil)
	if ids := inboxIDs(page); len(ids) == 0 || ids[0] != item {
		t.Fatalf("boss's inbox starts %v, want #%s first (it expires soonest)", ids[:min(len(ids), 3)], item)
	}
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		for _, id := range inboxIDs(page) {
			if seen[id] {
				t.Fatalf("#%s is listed twice, want each item once", id)
			}
			seen[id] = true
		}
		m := nextPageRE.FindStringSubmatch(page)
		if m == nil {
			break
		}
		if pages > 20 {
			t.Fatal("the inbox's pages do not end: more than 20, want the last page to have no next link")
		}
		_, page = webDo(t, boss, "GET", e.URL+strings.ReplaceAll(m[1], "&amp;", "&"), nil)
	}
	if len(seen) != 1101 {
		t.Fatalf("boss's pages list %d items, want all 1,101", len(seen))
	}
	if reply := slackText(t, e, "U0BOSS", "pending"); !strings.Contains(reply, "• #"+item+" ") || !strings.Contains(reply, "`pending after ") {
		t.Fatalf("boss's chat pending:\n%s\nwant #%s first and a next page", reply, item)
	}
}

// TestAttackOpenItemQuota (issue 19.2): one agent may keep at most
// limits.open_items_per_requester items open (100 by default); the next
// request is refused with 429 saying so, nothing is asked of a person, and
// once one of its items is decided it may ask again.
func TestAttackOpenItemQuota(t *testing.T) {
	t.Parallel()
	e, _ := newQueueEnv(t)
	agent := e.CreateKey("noisy", "agent")
	bob := e.CreateKey("bob", "member")
	e.Start()
	ask := func(dose string) toolResponse {
		return e.Call(agent, "confirm_action", map[string]any{"user_id": "ward_b", "tool": "set_dose", "arguments": map[string]any{"drug": "noise", "dose": dose}})
	}
	first := ask("first")
	if first.Status != http.StatusOK {
		t.Fatalf("the first request: status = %d, want %d: %s", first.Status, http.StatusOK, first)
	}
	flood(t, e, []string{agent}, "ward_b", 99)
	r := ask("101")
	if r.Status != http.StatusTooManyRequests || !strings.Contains(r.Error, "limits.open_items_per_requester") || !strings.Contains(r.Error, "100 items awaiting a decision") {
		t.Fatalf("the 101st open request: %s, want 429 naming the quota", r)
	}
	// bob denies the first: the agent may ask once more, and no more.
	e.MustOK(bob, "deny_action", map[string]any{"request_id": first.Data["request_id"], "reason": "noise"})
	if r := ask("again"); r.Status != http.StatusOK || r.Data["status"] != "pending" {
		t.Fatalf("a request once one of its items is decided: status = %d, %v, want %d, pending: %s", r.Status, r.Data["status"], http.StatusOK, r)
	}
	if r := ask("once more"); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the next one: %s, want 429 again", r)
	}
}

// TestAttackInboxRevealsOutOfScopeSpaces (issue 19.5): dr_a may see
// ward_a only. Before the fix the inbox listed ward_b's items as withheld
// rows that still showed the space (for clinicians, a patient), the kind
// and the times; the Space filter listed ward_b; filtering on it listed its
// items. Now the inbox shows nothing of them, as chat does: not in the
// rows, not in the filter, not when asked for by name, not on the item page.
func TestAttackInboxRevealsOutOfScopeSpaces(t *testing.T) {
	t.Parallel()
	e, _ := newQueueEnv(t)
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	mine := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_a", "tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	other := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "patient_jane_doe", "tool": "set_dose", "arguments": map[string]any{"drug": "warfarin", "dose": "2mg"}})
	drA := signInHTTP(t, e, "dr_a")
	for _, path := range []string{"/ui/", "/ui/?space=patient_jane_doe", "/ui/?kind=action", "/ui/?space=patient_jane_doe&kind=action"} {
		_, page := webDo(t, drA, "GET", e.URL+path, nil)
		if strings.Contains(page, "patient_jane_doe") || strings.Contains(page, fmt.Sprintf(`id="item-%v"`, other.Data["item_id"])) {
			t.Fatalf("%s shows the out-of-scope space or its item (want no %q, no item-%v in it):\n%s", path, "patient_jane_doe", other.Data["item_id"], page)
		}
		want := path == "/ui/" || path == "/ui/?kind=action"
		if ids := inboxIDs(page); want != (len(ids) == 1 && ids[0] == fmt.Sprint(mine.Data["item_id"])) {
			t.Errorf("%s lists %v; want it to list only #%v: %t", path, ids, mine.Data["item_id"], want)
		}
	}
	resp, page := webDo(t, drA, "GET", e.URL+fmt.Sprintf("/ui/items/%v", other.Data["item_id"]), nil)
	for _, leak := range []string{"patient_jane_doe", "warfarin", "action request", "pending", "set_dose"} {
		if strings.Contains(page, leak) {
			t.Errorf("the out-of-scope item's page (%d) shows %q, want nothing of it:\n%s", resp.StatusCode, leak, page)
		}
	}
	if !strings.Contains(page, "outside your scope") {
		t.Errorf("the out-of-scope item's page does not say why nothing is shown (want %q in it):\n%s", "outside your scope", page)
	}
	_, poll := webDo(t, drA, "GET", e.URL+fmt.Sprintf("/ui/items/%v/status", other.Data["item_id"]), nil)
	if !strings.Contains(poll, `"status":"hidden"`) {
		t.Errorf("the status poll of an out-of-scope item = %s, want it to contain %s", poll, `"status":"hidden"`)
	}
}

// TestAttackSensitiveArgumentsOverActionStatus (issue 19.6): prescribe is
// sensitive. Before the fix its arguments went to a viewer key and to
// another agent over action_status, while the console, chat and
// list_grants withheld them. Now every read shows a sensitive request's
// arguments, summary and dry run only to its requester and to people who
// may decide in its space (policy.SeesDetails), and audit_log never
// carried them.
func TestAttackSensitiveArgumentsOverActionStatus(t *testing.T) {
	t.Parallel()
	e, _ := newQueueEnv(t)
	agent := e.CreateKey("ward_bot", "agent")
	other := e.CreateKey("other_bot", "agent")
	viewer := e.CreateKey("viewer_key", "viewer")
	auditor := e.CreateKey("auditor_key", "auditor")
	bob := e.CreateKey("bob", "member")
	e.Start()
	const secret = "methadone-80mg"
	r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_a", "tool": "prescribe", "arguments": map[string]any{"drug": secret}, "summary": "Start " + secret})
	rid := r.Data["request_id"].(string)
	if !strings.Contains(r.Raw, secret) {
		t.Fatalf("the requester does not see its own request (want %q in it): %s", secret, r.Raw)
	}
	for name, key := range map[string]string{"a viewer key": viewer, "another agent": other} {
		st := e.MustOK(key, "action_status", map[string]any{"request_id": rid})
		if strings.Contains(st.Raw, secret) || st.Data["details_withheld"] == nil || st.Data["status"] != "pending" {
			t.Errorf("action_status for %s: %s, want the status and no arguments", name, st.Raw)
		}
	}
	if st := e.MustOK(bob, "action_status", map[string]any{"request_id": rid}); !strings.Contains(st.Raw, secret) {
		t.Errorf("an approver of the space does not see the arguments (want %q in it): %s", secret, st.Raw)
	}
	// bob edits it; the edit's changes are details too.
	e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "methadone-40mg"}})
	for name, key := range map[string]string{"a viewer key": viewer, "another agent": other} {
		st := e.MustOK(key, "action_status", map[string]any{"request_id": rid})
		if strings.Contains(st.Raw, "methadone") {
			t.Errorf("action_status for %s after the edit: %s, want no %q in it", name, st.Raw, "methadone")
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); !strings.Contains(st.Raw, "methadone-40mg") {
		t.Errorf("the requester does not see the approved arguments (want %q in it): %s", "methadone-40mg", st.Raw)
	}
	if a := e.MustOK(auditor, "audit_log", map[string]any{"limit": 200}); strings.Contains(a.Raw, "methadone") {
		t.Errorf("audit_log carries the arguments, want no %q in it: %s", "methadone", a.Raw)
	}
	// The console and chat withhold them from vic, the viewer.
	vic := signInHTTP(t, e, "vic")
	if _, page := webDo(t, vic, "GET", e.URL+fmt.Sprintf("/ui/items/%v", r.Data["item_id"]), nil); strings.Contains(page, "methadone") {
		t.Errorf("the console shows vic the arguments, want no %q in it:\n%s", "methadone", page)
	}
	if reply := slackText(t, e, "U0VIC", fmt.Sprintf("show %v", r.Data["item_id"])); strings.Contains(reply, "methadone") {
		t.Errorf("chat shows vic the arguments, want no %q in it:\n%s", "methadone", reply)
	}
}

// TestAttackSensitiveDetailToAnotherWardsApprover (issue 19.6, found
// while checking every surface): Slack sends a sensitive item's details
// privately to the approvers in the channel. Before the fix it sent them
// to every principal whose role holds approve, so dr_a, who may see ward_a
// only, got a ward_b patient's prescription. Now only those the one rule
// lets see the details get them.
func TestAttackSensitiveDetailToAnotherWardsApprover(t *testing.T) {
	t.Parallel()
	e, f := newQueueEnv(t)
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_b", "tool": "prescribe", "arguments": map[string]any{"drug": "methadone-80mg"}})
	waitFor(t, "the private details", func() bool { return len(f.Calls("chat.postEphemeral")) >= 1 })
	e.Stop() // every delivery is done
	for _, c := range f.Calls("chat.postEphemeral") {
		if c.Form.Get("user") != "U0BOSS" {
			t.Errorf("the details of a ward_b item went to %s privately, want only to %s: %s", c.Form.Get("user"), "U0BOSS", c.Form.Get("text"))
		}
	}
	if post := f.Calls("chat.postMessage"); len(post) != 1 || strings.Contains(post[0].Form.Get("blocks"), "methadone") {
		t.Errorf("the channel cards = %v, want 1 with no %q in it", post, "methadone")
	}
}

// TestAttackDecidingAnotherSpacesExpiredRequest (issue 19.5, found while
// checking every surface): approve_action on a request that had expired
// answered its recorded outcome, with its arguments, before checking the
// caller's scope, so nurse_a (ward_a only) read a ward_b patient's request
// by approving it. Now a request of another space is refused first (403),
// nothing of it shown, as for a pending one.
func TestAttackDecidingAnotherSpacesExpiredRequest(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Now().UTC())
	e, _ := newQueueEnv(t)
	e.clock = clock.Now
	agent := e.CreateKey("ward_bot", "agent")
	nurse := e.CreateKey("nurse_a", "member", "--scopes", "ward_a")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_b", "tool": "set_dose", "arguments": map[string]any{"drug": "warfarin-jane-doe", "dose": "2mg"}})
	for _, tool := range []string{"approve_action", "deny_action"} {
		if a := e.Call(nurse, tool, map[string]any{"request_id": r.Data["request_id"], "reason": "x"}); a.Status != http.StatusForbidden || strings.Contains(a.Raw, "warfarin") {
			t.Fatalf("%s of a pending request of another space: %s, want %d with no %q in it", tool, a, http.StatusForbidden, "warfarin")
		}
	}
	clock.Advance(2 * time.Hour) // past the default timeout
	for _, tool := range []string{"approve_action", "deny_action"} {
		if a := e.Call(nurse, tool, map[string]any{"request_id": r.Data["request_id"], "reason": "x"}); a.Status != http.StatusForbidden || strings.Contains(a.Raw, "warfarin") {
			t.Errorf("%s of an expired request of another space: %s, want 403 showing nothing of it", tool, a)
		}
	}
	q := e.MustOK(agent, "ask_user", map[string]any{"user_id": "ward_b", "question": "Is Jane Doe allergic to penicillin?"})
	clock.Advance(2 * time.Hour)
	if a := e.Call(nurse, "answer_question", map[string]any{"request_id": q.Data["request_id"], "text": "no"}); a.Status != http.StatusForbidden || strings.Contains(a.Raw, "Jane") {
		t.Errorf("answer_question of an expired question of another space: %s, want %d with no %q in it", a, http.StatusForbidden, "Jane")
	}
}
