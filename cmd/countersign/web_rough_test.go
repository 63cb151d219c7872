package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// roughConfig gates two medication slots and a tool, for dr_smith (an
// unscoped member, as the README's) and boss (an admin).
const roughConfig = `memory:
  slots:
    - {name: active_medication, category: active_medication, confirm: true}
    - {name: allergy, category: allergy, confirm: true, multi: true}
tools:
  - name: restart_service
    category: mutating
principals:
  - {name: dr_smith, role: member, web: s@x.example}
  - {name: boss, role: admin, web: b@x.example}
`

// auditActions counts the entries of the deployment's log by action and
// principal name ("check_before_act dr_smith").
func auditActions(t *testing.T, e *testEnv, admin string) map[string]int {
	t.Helper()
	var out = map[string]int{}
	raw, _ := e.MustOK(admin, "audit_log", map[string]any{"limit": 1000}).Data["entries"].([]any)
	for _, x := range raw {
		m := x.(map[string]any)
		p, _ := m["principal"].(string)
		name, _, _ := strings.Cut(p, " ")
		out[fmt.Sprint(m["action"])+" "+name]++
	}
	return out
}

var noticeRE = regexp.MustCompile(`<p class="notice" role="status">([^<]*)</p>`)

// TestWebRoughEdges is issue 23 item 6 against the real server: viewing
// the Memory page four times writes four web_view entries and no
// check_before_act entry per subject, and the Audit page hides them until
// asked; an unscoped member's first look at Audit asks for a space
// instead of refusing; the notice after a decision says what was decided,
// for whom and as whom; and the Memory page fits a 390 px phone in
// Chromium, each verdict on screen.
func TestWebRoughEdges(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, roughConfig)
	agent := e.CreateKey("ward_bot", "agent")
	admin := e.CreateKey("ops_admin", "admin")
	e.Start()
	p42 := func(m map[string]any) map[string]any { m["user_id"] = "patient_42"; return m }
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "active_medication", "value": "warfarin 5mg daily", "text": "On warfarin.", "source": "fhir"}))
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "allergy", "value": "penicillin", "text": "Penicillin allergy.", "source": "fhir"}))
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "active_medication", "value": "apixaban 5mg twice daily", "replaces": "warfarin", "text": "Switch to apixaban."}))
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "weight", "value": "71 kg", "text": "71 kg"}))

	smith := signInHTTP(t, e, "dr_smith")
	before := auditActions(t, e, admin)
	for range 4 {
		resp, body := webDo(t, smith, "GET", e.URL+"/ui/memory?space=patient_42", nil)
		if resp.StatusCode != 200 || !strings.Contains(body, "verdict-BLOCKED") || !strings.Contains(body, "verdict-SAFE") {
			t.Fatalf("the memory page: %d, want 200 with %q and %q:\n%s", resp.StatusCode, "verdict-BLOCKED", "verdict-SAFE", body)
		}
	}
	after := auditActions(t, e, admin)
	if got := after["web_view dr_smith"] - before["web_view dr_smith"]; got != 4 {
		t.Errorf("four views of the memory page wrote %d web_view entries, want 4 (one per view)", got)
	}
	if got := after["check_before_act dr_smith"] - before["check_before_act dr_smith"]; got != 0 {
		t.Errorf("four views of the memory page wrote %d check_before_act entries, want none (the view's one entry holds them)", got)
	}
	views := e.MustOK(admin, "audit_log", map[string]any{"user_id": "patient_42", "limit": 1})
	if entries, _ := views.Data["entries"].([]any); len(entries) != 1 || !strings.Contains(fmt.Sprint(entries[0]), "web: memory page: check_before_act active_medication: BLOCKED") {
		t.Errorf("the newest entry of patient_42 is not the view with its verdicts: %s, want one entry containing %q", views.Raw, "web: memory page: check_before_act active_medication: BLOCKED")
	}

	// Audit: an unscoped member is asked for a space, not refused.
	resp, body := webDo(t, smith, "GET", e.URL+"/ui/audit", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `id="choose-space"`) || strings.Contains(body, `class="problem"`) || !strings.Contains(body, `href="/ui/audit?space=patient_42"`) {
		t.Errorf("an unscoped member's first look at Audit: %d, want 200 with %q and %q, and no %q:\n%s", resp.StatusCode, `id="choose-space"`, `href="/ui/audit?space=patient_42"`, `class="problem"`, body)
	}
	_, body = webDo(t, smith, "GET", e.URL+"/ui/audit?space=patient_42", nil)
	if strings.Contains(body, "web: memory page") || !strings.Contains(body, `id="views-hidden"`) || !strings.Contains(body, "remember") {
		t.Errorf("patient_42's trail must show the writes and hide the page views by default, want %q and %q, and no %q:\n%s", `id="views-hidden"`, "remember", "web: memory page", body)
	}
	_, body = webDo(t, smith, "GET", e.URL+"/ui/audit?space=patient_42&views=1", nil)
	if n := strings.Count(body, "web: memory page"); n != 4 {
		t.Errorf("with Show page views, %d views shown, want 4", n)
	}

	// The notice after a decision: what, for whom, as whom.
	req := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_a", "tool": "restart_service", "arguments": map[string]any{"service": "pumps"}, "summary": "Restart the pump service"})
	item := fmt.Sprint(req.Data["item_id"])
	_, page := webDo(t, smith, "GET", e.URL+"/ui/items/"+item, nil)
	form := url.Values{"csrf": {csrfRE.FindStringSubmatch(page)[1]}, "nonce": {nonceRE.FindStringSubmatch(page)[1]}, "action": {"reject"}, "reason": {"not during the ward round"}}
	resp, _ = webDo(t, smith, "POST", e.URL+"/ui/items/"+item+"/decide", form)
	_, inbox := webDo(t, smith, "GET", e.URL+resp.Header.Get("Location"), nil)
	want := "Rejected #" + item + ": “Restart the pump service” (ward_bot&#39;s action request, space ward_a), as dr_smith (member)."
	if m := noticeRE.FindStringSubmatch(inbox); m == nil || m[1] != want {
		t.Errorf("the notice after rejecting: %v, want %q", m, want)
	}

	// The Memory page on a phone.
	doc := person(t)
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	browse(t, doc, "a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
	browse(t, doc, "open Memory", chromedp.Navigate(e.URL+"/ui/memory?space=patient_42"), chromedp.WaitVisible(chromedp.CSS("table.facts")))
	if wide := read(t, doc, "sideways scroll", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth || [...document.querySelectorAll('.table-wrap')].some(w => w.scrollWidth > w.clientWidth)`)); wide {
		t.Error("the Memory page scrolls sideways on a 390 px screen")
	}
	offscreen := read(t, doc, "the verdicts' places", chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.facts .badge[class*="verdict-"]')].filter(b => { const r = b.getBoundingClientRect(); return r.width === 0 || r.right > window.innerWidth || r.left < 0 }).map(b => b.textContent)`))
	n := read(t, doc, "the verdicts", chromedp.Evaluate[int](`document.querySelectorAll('table.facts .badge[class*="verdict-"]').length`))
	if n < 3 || len(offscreen) != 0 {
		t.Errorf("%d verdicts on the phone, %v of them off screen; want every SAFE/BLOCKED visible", n, offscreen)
	}
	if r := read(t, doc, "a BLOCKED reason", chromedp.Text(chromedp.CSS("table.facts .reasons"))); !strings.Contains(r, "FLAGGED") && !strings.Contains(r, "conflict") {
		t.Errorf("the BLOCKED reason shown on the phone: %q, want it to contain %q or %q", r, "FLAGGED", "conflict")
	}
}

var pendingLineRE = regexp.MustCompile(`(?m)^• #(\d+) `)

// TestInboxAndChatPendingInOneOrder: the console's inbox and chat's
// `pending` list the same items in the same order, soonest to expire
// first (the request expiring in 10 minutes above the one made before it
// that expires in 6 hours), and both flag the destructive one.
func TestInboxAndChatPendingInOneOrder(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, strings.Replace(webConfig(f), "principals:\n", `  - name: restart_service
    category: mutating
    timeout: 6h
  - name: drop_cache
    category: destructive
    timeout: 10m
principals:
`, 1))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ops_bot", "agent")
	e.Start()
	late := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "a"}, "summary": "Restart a"})
	soon := e.MustOK(agent, "confirm_action", map[string]any{"tool": "drop_cache", "arguments": map[string]any{"name": "b"}, "summary": "Drop cache b", "dry_run": "DEL b"})
	want := []string{fmt.Sprint(soon.Data["item_id"]), fmt.Sprint(late.Data["item_id"])}

	smith := signInHTTP(t, e, "dr_smith")
	_, inbox := webDo(t, smith, "GET", e.URL+"/ui/", nil)
	reply := slackText(t, e, "U0123ABC", "pending")
	var chat []string
	for _, m := range pendingLineRE.FindAllStringSubmatch(reply, -1) {
		chat = append(chat, m[1])
	}
	if got := inboxIDs(inbox); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the inbox lists %v, want %v (soonest to expire first)", got, want)
	}
	if strings.Join(chat, ",") != strings.Join(want, ",") {
		t.Errorf("chat pending lists %v, want %v (soonest to expire first):\n%s", chat, want, reply)
	}
	if !strings.Contains(reply, "#"+want[0]+" action request — ⚠ cannot be undone: Drop cache b") || strings.Count(inbox, `class="danger-badge"`) != 1 {
		t.Errorf("the destructive request is not flagged on both, want %q in chat and one danger badge in the inbox:\n%s\n%s", "#"+want[0]+" action request — ⚠ cannot be undone: Drop cache b", reply, inbox)
	}
}
