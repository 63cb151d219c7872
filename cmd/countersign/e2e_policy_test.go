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

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// groupsUser is a test provider's user whose ID token carries auth_time
// (a fresh sign-in) and a groups claim.
type groupsUser struct {
	*mockoidc.MockUser
	authTime time.Time
	groups   []string
}

func (u groupsUser) Claims(scopes []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	c, err := u.MockUser.Claims(scopes, base)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m jwt.MapClaims
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["auth_time"] = u.authTime.Unix()
	if u.groups != nil {
		m["groups"] = u.groups
	}
	return m, nil
}

// oidcSignInHTTP signs a person in to the console through the test
// provider without a browser: the client follows the redirects to the
// provider and back, keeping the cookies.
func oidcSignInHTTP(t *testing.T, e *testEnv, m *mockoidc.MockOIDC, u mockoidc.User) *http.Client {
	t.Helper()
	m.QueueUser(u)
	c := webClient(t)
	next := e.URL + "/ui/signin/oidc"
	for range 8 {
		resp, body := webDo(t, c, "GET", next, nil)
		loc := resp.Header.Get("Location")
		if resp.StatusCode == http.StatusOK && strings.Contains(body, "Signed in.") {
			return c // the callback's page, which refreshes to the inbox
		}
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther || loc == "" {
			t.Fatalf("OIDC sign-in stopped at %s: %d, want a redirect (302 or 303 with a Location) or 200 %q\n%s", next, resp.StatusCode, "Signed in.", body)
		}
		if strings.HasPrefix(loc, "/") {
			loc = e.URL + loc
		}
		if strings.HasSuffix(loc, "/ui/") {
			return c
		}
		next = loc
	}
	t.Fatal("OIDC sign-in did not come back to the console")
	return nil
}

// consoleForm is the form of the item page that holds the submit button
// with id button: its hidden inputs, plus extra.
func consoleForm(t *testing.T, page, button string, extra url.Values) url.Values {
	t.Helper()
	i := strings.Index(page, `id="`+button+`"`)
	if i < 0 {
		t.Fatalf("no #%s on the page:\n%s", button, page)
	}
	start := strings.LastIndex(page[:i], "<form")
	form := page[start : i+strings.Index(page[i:], "</form>")]
	v := url.Values{"action": {button}} // the button's own value: approve, reject
	for _, m := range hiddenRE.FindAllStringSubmatch(form, -1) {
		v.Set(m[1], m[2])
	}
	for k, vs := range extra {
		v[k] = vs
	}
	return v
}

// consoleDecide opens the item page of request reqID as c and submits the
// form of button with extra fields; it returns the notice or problem the
// console redirects with.
func consoleDecide(t *testing.T, e *testEnv, c *http.Client, reqID, button string, extra url.Values) string {
	t.Helper()
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+reqID, nil)
	item := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+item, nil)
	resp, body := webDo(t, c, "POST", e.URL+item+"/decide", consoleForm(t, page, button, extra))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("%s on %s answered %d, want %d:\n%s", button, item, resp.StatusCode, http.StatusSeeOther, body)
	}
	loc, _ := url.QueryUnescape(resp.Header.Get("Location"))
	return loc
}

func mustUnescape(s string) string {
	u, _ := url.QueryUnescape(s)
	return u
}

var editLabelRE = regexp.MustCompile(`<label for="edit_(\d+)">([^<]+)</label>`)

const policyE2EConfig = `http:
  rate_burst: 1000
groups:
  doctors: [dr_smith, ph_kim]
  pharmacists: [ph_kim]
tools:
  - name: order_medication
    category: mutating
    schema:
      type: object
      required: [drug, dose_mg]
      properties: {drug: {type: string}, dose_mg: {type: number}}
    approvers: {groups: [doctors]}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {groups: [doctors]}}
          - {name: pharmacist, approvers: {groups: [pharmacists]}, step_up: true}
step_up:
  within: 5m
principals:
  - {name: dr_smith, role: member, slack: U0123ABC, web: dr.smith@hospital.example}
  - {name: ph_kim, role: member, slack: U0456DEF, web: ph.kim@hospital.example}
  - {name: ph_lee, role: member, web: ph.lee@hospital.example}
`

// TestStagesEndToEnd is the ordered sign-off against the real
// server, the real slack-go client on a loopback fake and a real OIDC
// provider: order_medication above 10 mg needs a prescriber (a Slack
// click) then a pharmacist (in the console, with step-up; ph_lee is a
// pharmacist by the provider's groups claim alone); the same person
// cannot do both; a deny at stage 2 ends it; an edit at stage 2 restarts
// at stage 1; below the threshold one prescriber suffices.
func TestStagesEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, policyE2EConfig+`slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: `+f.srv.GetAPIURL()+`
  channels: {default: C0DEFAULT}
web:
  oidc:
    issuer: `+m.Issuer()+`
    client_id: `+m.ClientID+`
    client_secret_env: OIDC_SECRET
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"], e.env["OIDC_SECRET"] = "xoxb-e2e", e2eSlackSecret, m.ClientSecret
	agent := e.CreateKey("ward_bot", "agent")
	kimKey := e.CreateKey("ph_kim", "member", "--kind", "person")
	admin := e.CreateKey("root", "admin")
	e.Start()
	lee := func() *http.Client {
		return oidcSignInHTTP(t, e, m, groupsUser{&mockoidc.MockUser{Subject: "u-lee", Email: "ph.lee@hospital.example", EmailVerified: true}, time.Now(), []string{"pharmacists"}})
	}
	order := func(dose float64) (string, string) {
		r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose_mg": dose}})
		return r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	}
	// cards are the cards posted (not the notes in their threads).
	cards := func() []slackCall {
		var out []slackCall
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") == "" {
				out = append(out, c)
			}
		}
		return out
	}
	status := func(id string) toolResponse {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": id})
	}

	// Above the threshold: the card says which rule asked and why, and the stages.
	reqID, itemID := order(50)
	waitFor(t, "the request to be posted", func() bool { return len(cards()) == 1 })
	post := cards()[0]
	if b := slackJSON(post.Form.Get("blocks")); !strings.Contains(b, "asked by rule 1 (args.dose_mg &gt; 10): dose_mg 50 &gt; 10") ||
		!strings.Contains(b, "prescriber (group doctors), then pharmacist (group pharmacists, fresh sign-in)") {
		t.Fatalf("the card does not say which rule asked, why, and the stages:\n%s", b)
	}
	// ph_kim prescribes from Slack.
	slackClick(t, e, post, "U0456DEF", itemID, "t-st-1")
	waitFor(t, "the prescriber's approval", func() bool {
		return strings.Contains(fmt.Sprint(status(reqID).Data["tally"]), "stage 1 of 2 (prescriber): 1 of 1 approvals: ph_kim")
	})
	if st := status(reqID); st.Data["status"] != "pending" {
		t.Fatalf("after the prescriber: %s, want pending", st)
	}
	// The card's thread says which stage is open now.
	waitFor(t, "the note that the pharmacist stage is open", func() bool {
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") == post.TS && strings.Contains(c.Form.Get("text")+c.Form.Get("blocks"), "The pharmacist stage (2 of 2) is open") {
				return true
			}
		}
		return false
	})
	// The same person cannot do both: ph_kim is a pharmacist too.
	if res := e.Call(kimKey, "approve_action", map[string]any{"request_id": reqID}); res.Status != http.StatusForbidden ||
		!strings.Contains(res.Raw, "approved the prescriber stage of "+reqID+", and one person approves at most one stage") {
		t.Fatalf("ph_kim at the pharmacist stage: %s, want 403 saying %q", res, "approved the prescriber stage of "+reqID+", and one person approves at most one stage")
	}
	// A doctor who is no pharmacist sees the item read-only, saying who
	// decides the open stage, with no form to decide it (the read-only
	// hint reads the open stage's approvers); an approval posted anyway
	// is refused: no pharmacist.
	smith := signInHTTP(t, e, "dr_smith")
	_, smithPage := webDo(t, smith, "GET", e.URL+"/ui/items/"+itemID, nil)
	if !strings.Contains(smithPage, `id="readonly"`) || !strings.Contains(smithPage, "the open stage (pharmacist, stage 2 of 2) is decided by groups pharmacists") ||
		strings.Contains(smithPage, `id="reject"`) || strings.Contains(smithPage, `id="approve"`) {
		t.Fatalf("dr_smith's page at the pharmacist stage is not read-only with the stage's approvers:\n%s", smithPage)
	}
	forged := url.Values{"action": {"approve"}, "csrf": {csrfRE.FindStringSubmatch(smithPage)[1]}}
	if resp, _ := webDo(t, smith, "POST", e.URL+"/ui/items/"+itemID+"/decide", forged); !strings.Contains(mustUnescape(resp.Header.Get("Location")), "is decided by groups pharmacists") {
		t.Fatalf("dr_smith's approval at the pharmacist stage: %d %s, want a Location saying %q", resp.StatusCode, resp.Header.Get("Location"), "is decided by groups pharmacists")
	}
	// ph_lee, a pharmacist by the groups claim, with a fresh sign-in, approves.
	if loc := consoleDecide(t, e, lee(), reqID, "approve", nil); strings.Contains(loc, "problem=") {
		t.Fatalf("ph_lee's approval in the console: %s, want no problem=", loc)
	}
	st := status(reqID)
	if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "ph_kim [U0456DEF], ph_lee [web:ph_lee]" {
		t.Fatalf("after the pharmacist: %s, want approved, confirmed by %q", st, "ph_kim [U0456DEF], ph_lee [web:ph_lee]")
	}
	stages, _ := st.Data["stages"].([]any)
	if len(stages) != 2 || fmt.Sprint(stages[1].(map[string]any)["approved_by"]) != "[ph_lee [web:ph_lee]]" {
		t.Fatalf("the stages' approvers: %v, want 2 stages, the second approved by %s", st.Data["stages"], "[ph_lee [web:ph_lee]]")
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 50})
	if !regexp.MustCompile(reqID + ` by ph_kim \[U0456DEF\], ph_lee \[web:ph_lee\] step-up oidc auth_time=`).MatchString(audit.Text) {
		t.Fatalf("the approval's audit entry does not name both stages' approvers and the step-up:\n%s", audit.Text)
	}

	// A deny at stage 2 ends it.
	reqID, itemID = order(40)
	waitFor(t, "the second request to be posted", func() bool { return len(cards()) == 2 })
	slackClick(t, e, cards()[1], "U0123ABC", itemID, "t-st-2")
	waitFor(t, "dr_smith's approval", func() bool {
		return strings.Contains(fmt.Sprint(status(reqID).Data["tally"]), "1 of 1 approvals: dr_smith")
	})
	if loc := consoleDecide(t, e, lee(), reqID, "reject", url.Values{"action": {"reject"}, "reason": {"interacts with warfarin"}}); strings.Contains(loc, "problem=") {
		t.Fatalf("ph_lee's denial: %s, want no problem=", loc)
	}
	if st := status(reqID); st.Data["status"] != "denied" || st.Data["reason"] != "interacts with warfarin" {
		t.Fatalf("after a deny at stage 2: %s, want denied with reason %q", st, "interacts with warfarin")
	}

	// An edit at stage 2 restarts at stage 1.
	reqID, itemID = order(30)
	waitFor(t, "the third request to be posted", func() bool { return len(cards()) == 3 })
	slackClick(t, e, cards()[2], "U0123ABC", itemID, "t-st-3")
	waitFor(t, "dr_smith's approval", func() bool {
		return strings.Contains(fmt.Sprint(status(reqID).Data["tally"]), "1 of 1 approvals: dr_smith")
	})
	c := lee()
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+reqID, nil)
	_, page := webDo(t, c, "GET", e.URL+resp.Header.Get("Location"), nil)
	edit := url.Values{"action": {"edit"}}
	for _, l := range editLabelRE.FindAllStringSubmatch(page, -1) {
		switch l[2] {
		case "dose_mg":
			edit.Set("edit_"+l[1], "20")
		case "drug":
			edit.Set("edit_"+l[1], "apixaban")
		}
	}
	if len(edit) != 3 {
		t.Fatalf("the edit form's fields: %v, want 3 (action and the edit_ fields of drug and dose_mg)\n%s", edit, page)
	}
	if loc := consoleDecide(t, e, c, reqID, "edit-approve", edit); strings.Contains(loc, "problem=") {
		t.Fatalf("ph_lee's edit: %s, want no problem=", loc)
	}
	st = status(reqID)
	if st.Data["status"] != "pending" || st.Data["edited"] != true || !strings.Contains(fmt.Sprint(st.Data["tally"]), "stage 1 of 2 (prescriber): 0 of 1 approvals, open") {
		t.Fatalf("after an edit at stage 2: %s, want pending, edited, tally with %q", st, "stage 1 of 2 (prescriber): 0 of 1 approvals, open")
	}
	// dr_smith approves the edited arguments in the console, then ph_lee.
	if loc := consoleDecide(t, e, signInHTTP(t, e, "dr_smith"), reqID, "approve", nil); strings.Contains(loc, "problem=") {
		t.Fatalf("dr_smith after the edit: %s, want no problem=", loc)
	}
	if loc := consoleDecide(t, e, c, reqID, "approve", nil); strings.Contains(loc, "problem=") {
		t.Fatalf("ph_lee after the edit: %s, want no problem=", loc)
	}
	if st := status(reqID); st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [web:dr_smith], ph_lee [web:ph_lee]" || !strings.Contains(fmt.Sprint(st.Data["approved_arguments"]), "20") {
		t.Fatalf("after the edit's sign-off: %s, want approved, confirmed by %q, approved_arguments with 20", st, "dr_smith [web:dr_smith], ph_lee [web:ph_lee]")
	}

	// Below the threshold one prescriber suffices.
	reqID, itemID = order(5)
	waitFor(t, "the fourth request to be posted", func() bool { return len(cards()) == 4 })
	slackClick(t, e, cards()[3], "U0123ABC", itemID, "t-st-4")
	waitFor(t, "the approval below the threshold", func() bool { return status(reqID).Data["status"] == "approved" })
	if st := status(reqID); st.Data["confirmed_by"] != "dr_smith [U0123ABC]" || st.Data["rule"] != nil {
		t.Fatalf("below the threshold: %s, want confirmed by %q and no rule", st, "dr_smith [U0123ABC]")
	}
}

// TestBatchApproveEndToEnd: `/countersign approve 1 2 3` in Slack
// approves three pending calls of one tool under one rule, each decided
// on its own (its own audit entry, its own approver record); a batch
// that holds a staged, a destructive or another tool's item, or one
// already decided, is refused whole, nothing decided.
func TestBatchApproveEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, `groups:
  pharmacists: [ph_kim]
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
  - name: scale_service
    category: mutating
  - name: delete_database
    category: destructive
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}}
          - {name: pharmacist, approvers: {groups: [pharmacists]}}
principals:
  - {name: dr_smith, role: member, slack: U0123ABC}
slack:
  mode: http
  team_id: T1
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: `+f.srv.GetAPIURL()+`
  channels: {default: C0DEFAULT}
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("deploy_bot", "agent")
	admin := e.CreateKey("root", "admin")
	e.Start()
	ask := func(tool string, args map[string]any) (string, string) {
		r := e.MustOK(agent, "confirm_action", map[string]any{"tool": tool, "arguments": args, "dry_run": "drop it"})
		return r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	}
	var reqs, items []string
	for _, svc := range []string{"api", "web", "worker"} {
		r, i := ask("restart_service", map[string]any{"service": svc})
		reqs, items = append(reqs, r), append(items, i)
	}
	_, staged := ask("order_medication", map[string]any{"dose_mg": 50})
	_, destroy := ask("delete_database", map[string]any{"db": "x"})
	_, other := ask("scale_service", map[string]any{"n": 3})
	status := func(id string) string {
		return fmt.Sprint(e.MustOK(agent, "action_status", map[string]any{"request_id": id}).Data["status"])
	}

	for _, tc := range []struct{ batch, want string }{
		{items[0] + " " + staged, "cannot be approved in a batch"},
		{items[0] + " " + destroy, "cannot be approved in a batch"},
		{items[0] + " " + other, "a batch is items of one tool under one rule"},
	} {
		if got := slackText(t, e, "U0123ABC", "approve "+tc.batch); !strings.Contains(got, tc.want) || !strings.Contains(got, "I approved none of them") {
			t.Errorf("approve %s: %q, want %q", tc.batch, got, tc.want)
		}
	}
	if st := status(reqs[0]); st != "pending" {
		t.Fatalf("after the refused batches, %s is %s, want pending", reqs[0], st)
	}

	got := slackText(t, e, "U0123ABC", "approve "+strings.Join(items, " "))
	if !strings.HasPrefix(got, "Approving 3 items (restart_service, no rule), each on its own:") || strings.Count(got, "Approved #") != 3 {
		t.Fatalf("the batch's answer: %q, want it to start %q and hold 3 %q", got, "Approving 3 items (restart_service, no rule), each on its own:", "Approved #")
	}
	for _, id := range reqs {
		st := e.MustOK(agent, "action_status", map[string]any{"request_id": id})
		if st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [U0123ABC]" {
			t.Fatalf("%s after the batch: %s, want approved, confirmed by %q", id, st, "dr_smith [U0123ABC]")
		}
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	for _, id := range reqs {
		if !strings.Contains(audit.Text, id+" by dr_smith [U0123ABC] restart_service") {
			t.Errorf("no audit entry of its own for %s:\n%s", id, audit.Text)
		}
	}
	if got := slackText(t, e, "U0123ABC", "approve "+items[0]+" "+items[1]); !strings.Contains(got, "is already decided, so I approved none of them") {
		t.Errorf("a batch of decided items: %q, want it to contain %q", got, "is already decided, so I approved none of them")
	}
}

// TestRuleReadsRequesterGroups: a rule may read the groups of who asks
// (requester.groups): the night agent's request needs two approvals by the
// rule, the day agent's one by the tool's own policy; the group is kept
// with the request, so an edit is judged by the same rule.
func TestRuleReadsRequesterGroups(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `groups:
  night_agents: [night_bot]
tools:
  - name: set_dose
    category: mutating
    schema: {type: object, required: [dose], properties: {dose: {type: string}}}
    rules:
      - when: "'night_agents' in requester.groups"
        quorum: 2
`)
	night := e.CreateKey("night_bot", "agent")
	day := e.CreateKey("day_bot", "agent")
	lee := e.CreateKey("dr_lee", "member")
	e.Start()
	ask := func(key string) toolResponse {
		rid := e.MustOK(key, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"dose": "5mg"}}).Data["request_id"].(string)
		return e.MustOK(key, "action_status", map[string]any{"request_id": rid})
	}
	n, d := ask(night), ask(day)
	if !strings.Contains(fmt.Sprint(n.Data["tally"]), "0 of 2 approvals") || n.Data["rule"] == nil {
		t.Fatalf("the night agent's request: %s, want the rule's quorum of 2", n)
	}
	if !strings.Contains(fmt.Sprint(d.Data["tally"]), "0 of 1 approvals") || d.Data["rule"] != nil {
		t.Fatalf("the day agent's request: %s, want the tool's own policy", d)
	}
	// dr_lee, in no group, edits the night request: the rule still
	// applies (the requester's groups are the request's), so the edit
	// stands and the request still needs a second approval.
	rid := n.Data["request_id"].(string)
	r := e.MustOK(lee, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"dose": "2.5mg"}})
	if r.Data["tally"] != "1 of 2 approvals: dr_lee" {
		t.Fatalf("an edit of the night request: %s, want it counted under the same rule (1 of 2)", r)
	}
}
