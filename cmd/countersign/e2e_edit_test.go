package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/adapters/discord/discordtest"
)

// setDoseTool is a mutating tool (confirm mechanics) whose dose the
// schema constrains: the edits below change 5mg to 2.5mg.
const setDoseTool = `tools:
  - name: set_dose
    category: mutating
    schema: {type: object, required: [drug, dose], properties: {drug: {type: string, pattern: "^[a-z]+$"}, dose: {type: string, pattern: "^[0-9.]+mg$"}}}
    approvers: {roles: [member, admin]}
    channels: [ops]
`

// withSetDose adds set_dose to a config's tools.
func withSetDose(cfg string) string { return strings.Replace(cfg, "tools:\n", setDoseTool, 1) }

// doseArgs are the proposed arguments of the set_dose requests.
var doseArgs = map[string]any{"drug": "apixaban", "dose": "5mg"}

// approvedArgs is what action_status tells the agent was approved.
func approvedArgs(t *testing.T, st toolResponse) string {
	t.Helper()
	b, err := json.Marshal(st.Data["approved_arguments"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSlackModalEditApprovesEditedActionEndToEnd: a person clicks Edit &
// approve on a destructive action's card, Slack opens the prefilled modal
// (views.open through the real slack-go client), a db_name the tool's
// schema refuses comes back as a field error with nothing recorded, and
// the corrected submission approves the edited arguments: the agent gets
// them from action_status and the card says "approved with changes".
func TestSlackModalEditApprovesEditedActionEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, withSetDose(slackConfig(f, "http")))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()

	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs, "summary": "start apixaban"})
	reqID, _ := r.Data["request_id"].(string)
	waitFor(t, "the request to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	itemID := regexp.MustCompile(`"block_id":"countersign:(\d+)"`).FindStringSubmatch(post.Form.Get("blocks"))
	if itemID == nil || !strings.Contains(post.Form.Get("blocks"), `"countersign.edit"`) {
		t.Fatalf("the action's card has no Edit & approve button (want a countersign block_id and %q):\n%s", `"countersign.edit"`, post.Form.Get("blocks"))
	}
	interact := func(payload map[string]any) (int, string) {
		p, _ := json.Marshal(payload)
		return postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret)
	}
	if code, _ := interact(map[string]any{
		"type": "block_actions", "trigger_id": "t-edit", "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0OPS", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.edit", "block_id": "countersign:" + itemID[1], "value": itemID[1], "action_ts": "1.1"}},
	}); code != http.StatusOK {
		t.Fatalf("Edit & approve click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the edit modal to be opened", func() bool { return len(f.Calls("views.open")) == 1 })
	open := f.Calls("views.open")[0]
	view, _ := open.JSON["view"].(map[string]any)
	meta, _ := view["private_metadata"].(string)
	if open.JSON["trigger_id"] != "t-edit" || view["callback_id"] != "countersign.edit" || !strings.Contains(fmt.Sprint(view["blocks"]), "initial_value:5mg") {
		t.Fatalf("views.open: %v, want trigger t-edit, callback countersign.edit, the dose prefilled as 5mg", open.JSON)
	}
	// Inputs follow the arguments' order: edit_0 is dose, edit_1 drug
	// (canonical JSON sorts the keys).
	submit := func(trigger, dose, drug string) (int, string) {
		input := func(v string) map[string]any {
			return map[string]any{"input": map[string]any{"type": "plain_text_input", "value": v}}
		}
		return interact(map[string]any{
			"type": "view_submission", "trigger_id": trigger, "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
			"view": map[string]any{"id": "V1", "callback_id": "countersign.edit", "private_metadata": meta,
				"state": map[string]any{"values": map[string]any{"edit_0": input(dose), "edit_1": input(drug)}}},
		})
	}
	// The schema's error lands under the input of the argument it names.
	for _, bad := range []struct{ dose, drug, block string }{{"half a tablet", "apixaban", "edit_0"}, {"2.5mg", "Apixaban!", "edit_1"}} {
		code, body := submit("t-"+bad.block, bad.dose, bad.drug)
		var ack struct {
			Action string            `json:"response_action"`
			Errors map[string]string `json:"errors"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &ack) != nil || ack.Action != "errors" || len(ack.Errors) != 1 || ack.Errors[bad.block] == "" {
			t.Fatalf("an edit the schema refuses (%s) answered %d %s, want 200 with response_action errors on %s alone", bad.block, code, body, bad.block)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" {
		t.Fatalf("a refused edit decided the request: status = %v, want pending: %s", st.Data["status"], st)
	}
	if code, body := submit("t-s2", "2.5mg", "apixaban"); code != http.StatusOK || body != "" {
		t.Fatalf("the valid edit answered %d %q, want an empty 200", code, body)
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqID})
	if st.Data["status"] != "approved" || st.Data["edited"] != true || approvedArgs(t, st) != `{"dose":"2.5mg","drug":"apixaban"}` {
		t.Fatalf("action_status after the Slack edit: %s, want approved, edited, arguments %s", st, `{"dose":"2.5mg","drug":"apixaban"}`)
	}
	waitFor(t, "the card to be updated", func() bool { return len(f.Calls("chat.update")) == 1 })
	if ub := slackJSON(f.Calls("chat.update")[0].Form.Get("blocks")); !strings.Contains(ub, "Approved with changes by dr_smith [U0123ABC]: dose 5mg → 2.5mg") {
		t.Fatalf("updated card:\n%s\nwant it to contain %q", ub, "Approved with changes by dr_smith [U0123ABC]: dose 5mg → 2.5mg")
	}
}

// TestDiscordModalEditApprovesEditedActionEndToEnd: the same through a
// Discord modal on the HTTP interactions endpoint.
func TestDiscordModalEditApprovesEditedActionEndToEnd(t *testing.T) {
	t.Parallel()
	d := newDiscordEnvConfig(t, "http", withSetDose)
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs, "summary": "start apixaban"})
	reqID, _ := req.Data["request_id"].(string)
	msg, item := d.posted(discordOps, "set\\\\_dose")
	modal := d.click("e1", smith, discordOps, msg, "cs:edit:"+item)
	data, _ := modal["data"].(map[string]any)
	custom, _ := data["custom_id"].(string)
	if discordRespType(modal) != 9 || !strings.HasPrefix(custom, "cs:edited:"+item+":") || !strings.Contains(fmt.Sprint(data["components"]), "value:5mg") {
		t.Fatalf("Edit & approve answered %v, want a prefilled modal", modal)
	}
	status, resp := discordtest.Post(t, d.URL+"/discord/interactions", d.key, time.Now(), discordtest.Marshal(t,
		discordtest.SubmitForm("e2", smith, discordOps, msg, custom, map[string]string{"e0": "2.5mg", "e1": "apixaban", "note": "renal function"})))
	if status != 200 || discordRespType(resp) != 7 || !strings.Contains(fmt.Sprint(resp), "Approved with changes by dr\\_smith \\[111\\]: dose 5mg → 2.5mg") {
		t.Fatalf("the edit answered %d %v, want 200 type 7 saying %q", status, resp, "Approved with changes by dr\\_smith \\[111\\]: dose 5mg → 2.5mg")
	}
	st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID})
	if st.Data["status"] != "approved" || st.Data["edited"] != true || approvedArgs(t, st) != `{"dose":"2.5mg","drug":"apixaban"}` {
		t.Fatalf("action_status after the Discord edit: %s, want approved, edited, arguments %s", st, `{"dose":"2.5mg","drug":"apixaban"}`)
	}
}

var editInputRE = regexp.MustCompile(`name="edit_0" type="text" value="([^"]*)"`)
var basisRE = regexp.MustCompile(`name="basis" value="([^"]+)"`)

// TestWebEditFormApprovesEditedAction: the console's edit form, over HTTP:
// shown prefilled to an approver, refused without its CSRF token, and
// approving the edited arguments through the one decision path.
func TestWebEditFormApprovesEditedAction(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, setDoseTool+`principals:
  - {name: dr_smith, role: member, web: s@x.example}
`)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs})
	rid, _ := r.Data["request_id"].(string)
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+rid, nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce, in, basis := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page), editInputRE.FindStringSubmatch(page), basisRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil || in == nil || basis == nil || in[1] != "5mg" {
		t.Fatalf("item page has no prefilled edit form (want csrf, nonce, basis and edit_0 = 5mg):\n%s", page)
	}
	form := url.Values{"nonce": {nonce[1] + "e"}, "basis": {basis[1]}, "action": {"edit"}, "edit_0": {"2.5mg"}, "edit_1": {"apixaban"}, "reason": {"renal function"}}
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an edit without its CSRF token answered %d, want %d", resp.StatusCode, http.StatusForbidden)
	}
	form.Set("csrf", csrf[1])
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/?done=edit-") {
		t.Fatalf("the edit answered %d %s, want %d to %s…", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/?done=edit-")
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if st.Data["status"] != "approved" || st.Data["edited"] != true || approvedArgs(t, st) != `{"dose":"2.5mg","drug":"apixaban"}` {
		t.Fatalf("action_status after the web edit: %s, want approved, edited, arguments %s", st, `{"dose":"2.5mg","drug":"apixaban"}`)
	}
	if _, page = webDo(t, c, "GET", e.URL+itemPath, nil); !strings.Contains(page, "approved with changes by dr_smith") || !strings.Contains(page, "dose 5mg → 2.5mg") {
		t.Fatalf("the decided item's page does not show the changes (want %q and %q in it):\n%s", "approved with changes by dr_smith", "dose 5mg → 2.5mg", page)
	}
	// The card lists the edited version; its Details label the proposal
	// beside it.
	if !strings.Contains(page, "<dt>Proposed arguments (JSON)</dt>") || strings.Contains(page, "<dt>Arguments (JSON)</dt>") || !strings.Contains(page, "<dt>Edited arguments (JSON)</dt>") ||
		!strings.Contains(page, "<dt>dose</dt><dd>2.5mg</dd>") {
		t.Fatalf("the edited item's page does not label the proposal (want Proposed and Edited arguments, no plain Arguments, dose 2.5mg):\n%s", page)
	}
}

// TestWebEditInBrowser: a pharmacist opens a set_dose request in a real
// browser, opens Edit & approve (prefilled with the proposed dose), types
// the corrected dose and approves; the agent receives the edited arguments
// and the page says what was changed.
func TestWebEditInBrowser(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, setDoseTool+`principals:
  - {name: dr_smith, role: member, web: s@x.example}
`)
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs, "summary": "start apixaban"})
	rid, _ := r.Data["request_id"].(string)

	doc := person(t)
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	browse(t, doc, "open the request and its edit form",
		chromedp.Navigate(e.URL+"/ui/requests/"+rid),
		chromedp.WaitVisible(chromedp.CSS("#edit summary")),
		chromedp.Click(chromedp.CSS("#edit summary")),
		chromedp.WaitVisible(chromedp.CSS("#edit_0")),
	)
	if v := read(t, doc, "the prefilled dose", chromedp.Value(chromedp.CSS("#edit_0"))); v != "5mg" {
		t.Fatalf("the dose input starts as %q, want the proposed 5mg", v)
	}
	browse(t, doc, "correct the dose and approve",
		chromedp.SetValue(chromedp.CSS("#edit_0"), "2.5mg"),
		chromedp.SendKeys(chromedp.CSS("#edit_note"), "renal function"),
		chromedp.Click(chromedp.CSS("#edit-approve")),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if n := read(t, doc, "the notice", chromedp.Text(chromedp.CSS(".notice"))); !strings.Contains(n, "with your changes") {
		t.Fatalf("after the edit: %q, want it to say %q", n, "with your changes")
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if st.Data["status"] != "approved" || st.Data["edited"] != true || approvedArgs(t, st) != `{"dose":"2.5mg","drug":"apixaban"}` {
		t.Fatalf("action_status after the browser edit: %s, want approved, edited, arguments %s", st, `{"dose":"2.5mg","drug":"apixaban"}`)
	}
	browse(t, doc, "reopen the request", chromedp.Navigate(e.URL+"/ui/requests/"+rid), chromedp.WaitVisible(chromedp.CSS("#changes")))
	if ch := read(t, doc, "the changes line", chromedp.Text(chromedp.CSS("#changes"))); !strings.Contains(ch, "approved with changes by dr_smith") || !strings.Contains(ch, "dose 5mg → 2.5mg") {
		t.Fatalf("changes line %q, want %q and %q in it", ch, "approved with changes by dr_smith", "dose 5mg → 2.5mg")
	}
}

// TestSlackModalEditApprovesEditedValueEndToEnd: a memory proposal on a
// confirm slot is edited in the Slack modal (its value prefilled) and
// approved as edited: the memory reads the edited value, and the card says
// what was changed.
func TestSlackModalEditApprovesEditedValueEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	e.Start()
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code", "text": "She is full code."})
	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "DNR", "text": "Make her DNR"})
	waitFor(t, "the proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	itemID := regexp.MustCompile(`"block_id":"countersign:(\d+)"`).FindStringSubmatch(post.Form.Get("blocks"))
	if itemID == nil || !strings.Contains(post.Form.Get("blocks"), `"countersign.edit"`) {
		t.Fatalf("the proposal's card has no Edit & approve button (want a countersign block_id and %q):\n%s", `"countersign.edit"`, post.Form.Get("blocks"))
	}
	interact := func(payload map[string]any) (int, string) {
		p, _ := json.Marshal(payload)
		return postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, e2eSlackSecret)
	}
	interact(map[string]any{
		"type": "block_actions", "trigger_id": "t-edit", "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.edit", "block_id": "countersign:" + itemID[1], "value": itemID[1], "action_ts": "1.1"}},
	})
	waitFor(t, "the edit modal to be opened", func() bool { return len(f.Calls("views.open")) == 1 })
	view, _ := f.Calls("views.open")[0].JSON["view"].(map[string]any)
	if !strings.Contains(fmt.Sprint(view["blocks"]), "initial_value:DNR") {
		t.Fatalf("the value modal is not prefilled with the proposal (want initial_value DNR): %v", view)
	}
	code, body := interact(map[string]any{
		"type": "view_submission", "trigger_id": "t-s", "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"view": map[string]any{"id": "V1", "callback_id": "countersign.edit", "private_metadata": view["private_metadata"],
			"state": map[string]any{"values": map[string]any{"edit_0": map[string]any{"input": map[string]any{"type": "plain_text_input", "value": "DNR/DNI"}}}}},
	})
	if code != http.StatusOK || body != "" {
		t.Fatalf("the value edit answered %d %q, want an empty 200", code, body)
	}
	if r := e.MustOK(agent, "check_before_act", map[string]any{"subject": "code_status"}); !strings.Contains(r.Text, "code_status = DNR/DNI") {
		t.Fatalf("after the edit the memory reads: %q, want it to contain %q", r.Text, "code_status = DNR/DNI")
	}
	waitFor(t, "the card to be updated", func() bool { return len(f.Calls("chat.update")) == 1 })
	if ub := slackJSON(f.Calls("chat.update")[0].Form.Get("blocks")); !strings.Contains(ub, "Approved with changes by dr_smith [U0123ABC]") || !strings.Contains(ub, "DNR → DNR/DNI") {
		t.Fatalf("updated card:\n%s\nwant %q and %q in it", ub, "Approved with changes by dr_smith [U0123ABC]", "DNR → DNR/DNI")
	}
}
