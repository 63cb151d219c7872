package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// cardsConfig is the Slack end-to-end config with the web identity of
// dr_smith and order_medication, whose approvals rest on the patient's
// allergy and active medication.
func cardsConfig(f *slackFake) string {
	return strings.Replace(webConfig(f), "principals:\n", `  - name: order_medication
    category: mutating
    schema: {type: object, required: [drug, dose]}
    context: [allergy, active_medication]
principals:
`, 1)
}

// TestApprovalRestsOnFactsEndToEnd is issue 23 item 3 against the real
// server: a pharmacist approves an order_medication call while the chart
// says no allergy; an allergy is recorded before the order runs;
// redeem_receipt is refused with the change, the request is pending again
// (audited), and the old receipt never redeems; a second approval on the
// new facts redeems.
func TestApprovalRestsOnFactsEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, cardsConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	ward := e.CreateKey("ward_bot", "agent")
	intake := e.CreateKey("intake", "agent")
	pharmacist := e.CreateKey("ph_lee", "member", "--kind", "person")
	admin := e.CreateKey("root", "admin")
	e.Start()

	e.MustOK(intake, "remember", map[string]any{"user_id": "patient_42", "subject": "allergy", "value": "none", "text": "No known allergies."})
	r := e.MustOK(ward, "confirm_action", map[string]any{"tool": "order_medication", "user_id": "patient_42",
		"arguments": map[string]any{"drug": "apixaban", "dose": "5 mg twice daily"}, "summary": "Start apixaban 5 mg twice daily"})
	id, _ := r.Data["request_id"].(string)
	if r.Data["status"] != "pending" {
		t.Fatalf("confirm_action: status = %v, want pending: %s", r.Data["status"], r)
	}
	if list := slackText(t, e, "U0123ABC", "pending"); !strings.Contains(list, fmt.Sprintf("#%v", r.Data["item_id"])) {
		t.Fatalf("chat pending does not list the new request #%v (want it in the list):\n%s", r.Data["item_id"], list)
	}
	e.MustOK(pharmacist, "approve_action", map[string]any{"request_id": id})
	if list := slackText(t, e, "U0123ABC", "pending"); strings.Contains(list, fmt.Sprintf("#%v", r.Data["item_id"])) {
		t.Fatalf("chat pending still lists the approved request #%v, want it gone:\n%s", r.Data["item_id"], list)
	}
	first, _ := e.MustOK(ward, "action_status", map[string]any{"request_id": id}).Data["receipt"].(string)
	if first == "" {
		t.Fatal("no receipt after the approval, want one in action_status")
	}

	// An allergy is recorded before the order runs.
	e.MustOK(intake, "remember", map[string]any{"user_id": "patient_42", "subject": "allergy", "value": "penicillin", "text": "Allergic to penicillin."})
	red := e.Call(ward, "redeem_receipt", map[string]any{"receipt": first})
	if red.Status != http.StatusConflict || !strings.Contains(red.Error, "allergy: none → penicillin") || red.Data["facts_changed"] != "allergy: none → penicillin" || red.Data["status"] != "pending" {
		t.Fatalf("redeem after the allergy was recorded: %s, want 409 naming the change", red)
	}
	st := e.MustOK(ward, "action_status", map[string]any{"request_id": id})
	if st.Data["status"] != "pending" || st.Data["receipt"] != nil || st.Data["executed_at"] != nil {
		t.Fatalf("the request after the refusal: %s, want pending again", st)
	}
	// Pending again means listed again: in chat's pending (the queue of
	// open items, soonest to expire first).
	if list := slackText(t, e, "U0123ABC", "pending"); !strings.Contains(list, fmt.Sprintf("#%v", r.Data["item_id"])) {
		t.Fatalf("chat pending after the reopening does not list #%v (want it in the list):\n%s", r.Data["item_id"], list)
	}
	if log := e.MustOK(admin, "audit_log", map[string]any{"limit": 20}); !strings.Contains(log.Text, "action_reopened") || !strings.Contains(log.Text, "allergy: none → penicillin") {
		t.Fatalf("the reopening is not audited (want %q and %q in the log):\n%s", "action_reopened", "allergy: none → penicillin", log.Text)
	}
	// The card tells the channel why it is back.
	waitFor(t, "the card to be updated and the note posted", func() bool {
		for _, c := range f.Calls("chat.postMessage") {
			if strings.Contains(c.Form.Get("text"), "allergy: none → penicillin") {
				return true
			}
		}
		return false
	})

	// The old receipt never redeems.
	if again := e.Call(ward, "redeem_receipt", map[string]any{"receipt": first}); again.Status != http.StatusConflict || !strings.Contains(again.Error, "earlier approval") {
		t.Fatalf("the old receipt while pending: %s, want %d saying %q", again, http.StatusConflict, "earlier approval")
	}
	// A second approval, on the facts as they are now, redeems.
	e.MustOK(pharmacist, "approve_action", map[string]any{"request_id": id})
	second, _ := e.MustOK(ward, "action_status", map[string]any{"request_id": id}).Data["receipt"].(string)
	if second == "" || second == first {
		t.Fatalf("the second approval's receipt %q (the first was %q), want a new one", second, first)
	}
	if again := e.Call(ward, "redeem_receipt", map[string]any{"receipt": first}); again.Status != http.StatusConflict {
		t.Fatalf("the old receipt after the new approval: %s, want %d", again, http.StatusConflict)
	}
	if ok := e.MustOK(ward, "redeem_receipt", map[string]any{"receipt": second}); ok.Data["executed_at"] == nil {
		t.Fatalf("the new receipt: %s, want it redeemed (executed_at set)", ok)
	}
}

var seenFieldRE = regexp.MustCompile(`name="seen" value="([0-9a-f]{64})"`)

// TestCardsInBrowser is issue 23's console on a 390 px phone in Chromium:
// the card says in plain words what approving does; the facts the
// approval rests on are shown with their verdicts (a BLOCKED reason before
// anyone clicks); the developer detail is folded under Details; nothing
// scrolls sideways. A destructive item's Approve is red and Reject is not;
// a click without typing the database's name decides nothing (checked by
// the server: the form's required attribute removed first), nor does a
// wrong name; the right one approves, and the vote shows the SHA-256 of
// the page it was cast on.
func TestCardsInBrowser(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, cardsConfig(f))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	ward := e.CreateKey("ward_bot", "agent")
	e.Start()

	e.MustOK(ward, "remember", map[string]any{"user_id": "patient_42", "subject": "allergy", "value": "none", "text": "No known allergies."})
	order := e.MustOK(ward, "confirm_action", map[string]any{"tool": "order_medication", "user_id": "patient_42",
		"arguments": map[string]any{"drug": "apixaban", "dose": "5 mg twice daily"}, "summary": "Start apixaban 5 mg twice daily for patient_42"})
	drop := e.MustOK(ward, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"},
		"summary": "Drop orders_prod after the migration", "dry_run": "DROP DATABASE orders_prod; -- 42 tables"})
	orderItem, dropItem := fmt.Sprint(order.Data["item_id"]), fmt.Sprint(drop.Data["item_id"])

	doc := person(t)
	browse(t, doc, "a phone's screen", chromedp.EmulateViewport(390, 844))
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	browse(t, doc, "open the order", chromedp.Navigate(e.URL+"/ui/items/"+orderItem), chromedp.WaitVisible(chromedp.CSS("#approve")))

	if title := read(t, doc, "the first line", chromedp.Text(chromedp.CSS("#title"))); title != "Start apixaban 5 mg twice daily for patient_42" {
		t.Errorf("the first line %q, want the agent's summary", title)
	}
	want := "If you approve: ward_bot runs order_medication once with these arguments, within 1 hour of the approval. If allergy or active_medication changes first, it does not run and comes back for a new decision."
	if eff := read(t, doc, "what approving does", chromedp.Text(chromedp.CSS("#effect"))); eff != want {
		t.Errorf("the effect line\n%q\nwant\n%q", eff, want)
	}
	facts := read(t, doc, "the facts panel", chromedp.Text(chromedp.CSS("#facts")))
	for _, w := range []string{"The approval rests on these facts (now):", "allergy: none SAFE", "active_medication: none BLOCKED no active fact for this subject — nothing safe to act on"} {
		if !strings.Contains(strings.Join(strings.Fields(facts), " "), w) {
			t.Errorf("the facts panel lacks %q, want it there:\n%s", w, facts)
		}
	}
	if args := read(t, doc, "the arguments", chromedp.Text(chromedp.CSS("#args"))); args != "dose\n5 mg twice daily\ndrug\napixaban" {
		t.Errorf("the arguments %q, want a readable list %q", args, "dose\n5 mg twice daily\ndrug\napixaban")
	}
	// Folded: what a developer checks is in the page, not in sight.
	visible := read(t, doc, "the card's visible text", chromedp.Evaluate[string](`document.querySelector("article").innerText`))
	for _, dev := range []string{"SHA-256", "prin_", "mechanics", "Configured", "req_", "Channel", "{"} {
		if strings.Contains(visible, dev) {
			t.Errorf("the card shows %q outside the folded Details, want it folded:\n%s", dev, visible)
		}
	}
	if open := read(t, doc, "Details", chromedp.Evaluate[bool](`document.querySelector("details#details").open`)); open {
		t.Error("Details is open; it must be folded")
	}
	browse(t, doc, "unfold Details", chromedp.Click(chromedp.CSS("#details summary")))
	if d := read(t, doc, "the unfolded Details", chromedp.Text(chromedp.CSS("#details"))); !strings.Contains(d, "Arguments SHA-256") || !strings.Contains(d, "category mutating, mechanics confirm") || !strings.Contains(d, "ward_bot [prin_") {
		t.Errorf("the unfolded Details:\n%s\nwant %q, %q and %q in them", d, "Arguments SHA-256", "category mutating, mechanics confirm", "ward_bot [prin_")
	}
	if wide := read(t, doc, "sideways scroll", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("the item page scrolls sideways on a 390 px screen")
	}
	browse(t, doc, "approve the order", chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	if n := read(t, doc, "the notice", chromedp.Text(chromedp.CSS(".notice"))); !strings.HasPrefix(n, "Approved #"+orderItem+": “Start apixaban 5 mg twice daily for patient_42” (ward_bot's action request, space patient_42), as dr_smith (member). Now: ward_bot may run order_medication once with these arguments, before ") {
		t.Errorf("the notice after approving %q: it must say what was decided, for whom, as whom and what happens now (want it to start %q)", n, "Approved #"+orderItem+": “Start apixaban 5 mg twice daily for patient_42” (ward_bot's action request, space patient_42), as dr_smith (member). Now: ward_bot may run order_medication once with these arguments, before ")
	}

	// The destructive item.
	browse(t, doc, "open the destructive item", chromedp.Navigate(e.URL+"/ui/items/"+dropItem), chromedp.WaitVisible(chromedp.CSS("#approve")))
	if w := read(t, doc, "the warning", chromedp.Text(chromedp.CSS("#danger"))); !strings.Contains(w, "delete_database is destructive: approving it cannot be undone") {
		t.Errorf("the warning %q, want it to contain %q", w, "delete_database is destructive: approving it cannot be undone")
	}
	if c := read(t, doc, "Approve's class", chromedp.AttributeValue(chromedp.CSS("#approve"), "class")).Value; !strings.Contains(c, "danger") {
		t.Errorf("Approve's class %q, want %q in it: the dangerous action must look dangerous", c, "danger")
	}
	if c := read(t, doc, "Reject's class", chromedp.AttributeValue(chromedp.CSS("#reject"), "class")).Value; strings.Contains(c, "danger") {
		t.Errorf("Reject's class %q, want no %q in it: Reject is not the dangerous action here", c, "danger")
	}
	if l := read(t, doc, "the confirmation", chromedp.Text(chromedp.CSS(".confirm-label"))); l != "To approve, type the db_name: orders_prod" {
		t.Errorf("the confirmation asks %q, want %q", l, "To approve, type the db_name: orders_prod")
	}
	page := read(t, doc, "the page", chromedp.OuterHTML(chromedp.CSS("html")))
	seen := seenFieldRE.FindStringSubmatch(page)
	if seen == nil {
		t.Fatalf("the approve form carries no hash of the page (want a seen field of 64 hex digits):\n%s", page)
	}
	dropID, _ := drop.Data["request_id"].(string)
	pending := func(what string) {
		t.Helper()
		if st := e.MustOK(ward, "action_status", map[string]any{"request_id": dropID}); st.Data["status"] != "pending" {
			t.Fatalf("%s decided: status = %v, want pending: %s", what, st.Data["status"], st)
		}
	}
	// Without the name (the browser's check removed): the server refuses.
	read(t, doc, "drop the browser's own check", chromedp.Evaluate[bool](`document.querySelector("#confirm").removeAttribute("required"), true`))
	browse(t, doc, "approve without typing the name", chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	if p := read(t, doc, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(p, "takes a confirmation; nothing was recorded") {
		t.Errorf("a click without the name: %q, want it to contain %q", p, "takes a confirmation; nothing was recorded")
	}
	pending("a click without the name")
	browse(t, doc, "approve with another name", chromedp.Navigate(e.URL+"/ui/items/"+dropItem), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), "orders_staging"),
		chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".problem")))
	if p := read(t, doc, "the refusal", chromedp.Text(chromedp.CSS(".problem"))); !strings.Contains(p, "What you typed is not the db_name") {
		t.Errorf("a click with the wrong name: %q, want it to contain %q", p, "What you typed is not the db_name")
	}
	pending("a click with the wrong name")
	browse(t, doc, "reload the item", chromedp.Navigate(e.URL+"/ui/items/"+dropItem), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	page = read(t, doc, "the page", chromedp.OuterHTML(chromedp.CSS("html")))
	seen = seenFieldRE.FindStringSubmatch(page)
	browse(t, doc, "approve with the name", chromedp.SendKeys(chromedp.CSS("#confirm"), "orders_prod"),
		chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	if st := e.MustOK(ward, "action_status", map[string]any{"request_id": dropID}); st.Data["status"] != "approved" || st.Data["confirmed_by"] != "dr_smith [web:dr_smith]" {
		t.Fatalf("after typing the name: status = %v, confirmed_by = %v, want approved, %q: %s", st.Data["status"], st.Data["confirmed_by"], "dr_smith [web:dr_smith]", st)
	}
	// What the approver saw, beside the vote.
	browse(t, doc, "the decided item", chromedp.Navigate(e.URL+"/ui/items/"+dropItem), chromedp.WaitVisible(chromedp.CSS("#details")),
		chromedp.Click(chromedp.CSS("#details summary")))
	votes := read(t, doc, "the votes", chromedp.Text(chromedp.CSS("#votes")))
	if !strings.Contains(votes, "dr_smith [web:dr_smith] approved at") || !strings.Contains(votes, "web page sha256 "+seen[1][:16]) || !strings.Contains(votes, seen[1]) {
		t.Errorf("the vote does not show the page it was cast on (want %q and %s in it):\n%s", "dr_smith [web:dr_smith] approved at", seen[1], votes)
	}
}
