package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/internal/nodetest"
)

// batchConfig has a tool whose requests may be approved together
// (restart_service), one of another tool (scale_service), a destructive
// one, one that needs two approvers, and one signed off in stages.
const batchConfig = `http:
  rate_burst: 1000
groups:
  pharmacists: [ph_kim]
tools:
  - name: restart_service
    category: mutating
  - name: scale_service
    category: mutating
  - name: delete_database
    category: destructive
  - name: rotate_keys
    category: mutating
    quorum: 2
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}}
          - {name: pharmacist, approvers: {groups: [pharmacists]}}
principals:
  - {name: dr_smith, role: member, web: dr.smith@hospital.example}
  - {name: ph_kim, role: member, web: ph.kim@hospital.example}
`

var pickRE = regexp.MustCompile(`<input type="checkbox" name="id" value="(\d+)" id="pick-(\d+)">`)

// batchItems asks for the requests of batchConfig as agent and returns
// their request and item ids by name: restart0..2, scale, destroy, quorum,
// staged.
func batchItems(t *testing.T, e *testEnv, agent string) (reqs, items map[string]string) {
	t.Helper()
	reqs, items = map[string]string{}, map[string]string{}
	ask := func(name, tool string, args map[string]any) {
		r := e.MustOK(agent, "confirm_action", map[string]any{"tool": tool, "arguments": args, "summary": name + " (" + tool + ")", "dry_run": "plan"})
		reqs[name], items[name] = r.Data["request_id"].(string), fmt.Sprint(r.Data["item_id"])
	}
	for i, svc := range []string{"api", "web", "worker"} {
		ask(fmt.Sprintf("restart%d", i), "restart_service", map[string]any{"service": svc})
	}
	ask("scale", "scale_service", map[string]any{"n": 3})
	ask("destroy", "delete_database", map[string]any{"db": "orders"})
	ask("quorum", "rotate_keys", map[string]any{"key": "k1"})
	ask("staged", "order_medication", map[string]any{"dose_mg": 50})
	return reqs, items
}

// TestWebBatchApproveOverHTTP: the console approves several items at once
// without JavaScript. The inbox offers a checkbox on exactly the items the
// batch rule admits (chat.CheckBatch: the typed "approve 12 13 14"'s);
// the review page refuses a selection with a destructive, a quorum, a
// staged or another tool's item whole, and one of a single item; the
// approving form needs its CSRF token and every card's basis; each item is
// then approved on its own, with an audit entry of its own naming the
// console's person, and the same form sent again decides nothing more.
func TestWebBatchApproveOverHTTP(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, batchConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	admin := e.CreateKey("root", "admin")
	e.Start()
	reqs, items := batchItems(t, e, agent)
	c := signInHTTP(t, e, "dr_smith")

	_, inbox := webDo(t, c, "GET", e.URL+"/ui/", nil)
	var picks []string
	for _, m := range pickRE.FindAllStringSubmatch(inbox, -1) {
		picks = append(picks, m[1])
	}
	want := []string{items["restart0"], items["restart1"], items["restart2"]} // scale_service has no other of its batch
	if strings.Join(sortedCopy(picks), ",") != strings.Join(sortedCopy(want), ",") {
		t.Fatalf("the inbox offers checkboxes on %v, want on %v (never destructive, quorum or staged items, nor one with nothing to batch it with)", picks, want)
	}
	if !strings.Contains(inbox, `<form method="get" action="/ui/batch"`) || !strings.Contains(inbox, `id="review-batch"`) {
		t.Fatalf("the inbox has no selection form:\n%s", inbox)
	}

	review := func(ids ...string) (int, string) {
		v := url.Values{"id": ids}
		resp, body := webDo(t, c, "GET", e.URL+"/ui/batch?"+v.Encode(), nil)
		return resp.StatusCode, body
	}
	for _, tc := range []struct {
		name   string
		ids    []string
		status int
		want   string
	}{
		{"destructive", []string{items["restart0"], items["destroy"]}, http.StatusConflict, "cannot be approved in a batch"},
		{"quorum", []string{items["restart0"], items["quorum"]}, http.StatusConflict, "cannot be approved in a batch"},
		{"staged", []string{items["restart0"], items["staged"]}, http.StatusConflict, "cannot be approved in a batch"},
		{"another tool", []string{items["restart0"], items["scale"]}, http.StatusConflict, "a batch is items of one tool under one rule"},
		{"one item", []string{items["restart0"]}, http.StatusBadRequest, "Select at least two items"},
		{"twice", []string{items["restart0"], items["restart0"]}, http.StatusBadRequest, "is named twice"},
		{"not a number", []string{items["restart0"], "x"}, http.StatusBadRequest, "not an item number"},
		{"no such item", []string{items["restart0"], "99999"}, http.StatusNotFound, "not an item you can see"},
	} {
		status, body := review(tc.ids...)
		if status != tc.status || !strings.Contains(body, tc.want) || strings.Contains(body, `id="approve-batch"`) {
			t.Errorf("%s: review answered %d, want %d with %q and no approve button:\n%s", tc.name, status, tc.status, tc.want, body)
		}
	}
	for _, name := range []string{"restart0", "destroy", "quorum", "staged", "scale"} {
		if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs[name]}).Data["status"]; st != "pending" {
			t.Fatalf("%s is %v after the refused reviews, want pending", name, st)
		}
	}

	ids := []string{items["restart0"], items["restart1"], items["restart2"]}
	status, page := review(ids...)
	if status != http.StatusOK || !strings.Contains(page, "Approve 3 items together") || !strings.Contains(page, "restart_service, no rule") {
		t.Fatalf("review of the three restarts: %d, want %d with %q and %q:\n%s", status, http.StatusOK, "Approve 3 items together", "restart_service, no rule", page)
	}
	for _, svc := range []string{"api", "web", "worker"} {
		if !strings.Contains(page, svc) {
			t.Errorf("the review page does not show the argument %q of its cards", svc)
		}
	}
	form := consoleForm(t, page, "approve-batch", nil)
	form.Del("action")
	form["id"] = ids // the hidden inputs repeat id; consoleForm keeps one
	if len(form.Get("nonce")) == 0 || len(form.Get("seen_"+ids[0])) != 64 {
		t.Fatalf("the approving form lacks its nonce or a card's hash: %v, want a nonce and a 64-character seen_%s", form, ids[0])
	}

	noCSRF := cloneForm(form)
	noCSRF.Del("csrf")
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/batch", noCSRF); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a batch without its CSRF token answered %d, want 403:\n%s", resp.StatusCode, body)
	}
	noBasis := cloneForm(form)
	noBasis.Del("basis_" + ids[1])
	if resp, body := webDo(t, c, "POST", e.URL+"/ui/batch", noBasis); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "was not shown on the review page") {
		t.Fatalf("a batch without a card's basis answered %d, want 400:\n%s", resp.StatusCode, body)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs["restart1"]}).Data["status"]; st != "pending" {
		t.Fatalf("restart1 is %v after the refused forms, want pending", st)
	}

	resp, done := webDo(t, c, "POST", e.URL+"/ui/batch", form)
	if resp.StatusCode != http.StatusOK || !strings.Contains(done, "Approved 3 of 3 items, each on its own, as dr_smith (member).") {
		t.Fatalf("the batch answered %d, want %d with %q:\n%s", resp.StatusCode, http.StatusOK, "Approved 3 of 3 items, each on its own, as dr_smith (member).", done)
	}
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 200})
	for i, id := range ids {
		if !strings.Contains(done, `id="result-`+id+`" class="ok"`) {
			t.Errorf("no approved result for #%s:\n%s", id, done)
		}
		name := fmt.Sprintf("restart%d", i)
		st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs[name]})
		if st.Data["status"] != "approved" || !strings.HasPrefix(fmt.Sprint(st.Data["confirmed_by"]), "dr_smith [") {
			t.Fatalf("%s after the batch: %v confirmed by %v, want approved by dr_smith", name, st.Data["status"], st.Data["confirmed_by"])
		}
		if n := strings.Count(audit.Text, reqs[name]+" by dr_smith ["); n != 1 {
			t.Errorf("%s has %d audit entries of its approval, want 1 of its own:\n%s", reqs[name], n, audit.Text)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs["scale"]}).Data["status"]; st != "pending" {
		t.Errorf("scale_service, not selected, is %v, want pending", st)
	}

	// The same form again: refused whole (the items are decided), nothing
	// recorded twice.
	resp, again := webDo(t, c, "POST", e.URL+"/ui/batch", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(again, "is already decided") {
		t.Fatalf("the form sent again answered %d, want %d with %q:\n%s", resp.StatusCode, http.StatusConflict, "is already decided", again)
	}
	audit2 := e.MustOK(admin, "audit_log", map[string]any{"limit": 200})
	if n := strings.Count(audit2.Text, reqs["restart0"]+" by dr_smith ["); n != 1 {
		t.Errorf("after the form was sent again %s has %d approval entries, want 1", reqs["restart0"], n)
	}
}

func cloneForm(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestWebBatchApproveInBrowser: in Chromium, a person ticks two items in
// the inbox, reviews them, approves them together and sees each approved;
// the review page and the results page pass axe-core's WCAG checks (the
// inbox with its checkboxes is in TestWebAccessibility).
func TestWebBatchApproveInBrowser(t *testing.T) {
	t.Parallel()
	mods := nodetest.Modules(t, "axe-core")
	src, err := os.ReadFile(filepath.Join(mods, "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, batchConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	reqs, items := batchItems(t, e, agent)
	doc := person(t)
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	check := func(where string) {
		t.Helper()
		for _, v := range axeRun(t, doc, string(src)) {
			t.Errorf("%s: axe-core violation %s (%s), want none: %s\n  %s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		}
	}
	browse(t, doc, "tick two restarts and review them",
		chromedp.Click(chromedp.CSS("#pick-"+items["restart0"])),
		chromedp.Click(chromedp.CSS(`label[for="pick-`+items["restart2"]+`"]`)), // the label is the target too
		chromedp.Click(chromedp.CSS("#review-batch")),
		chromedp.WaitVisible(chromedp.CSS("#approve-batch")),
	)
	if h := read(t, doc, "the review heading", chromedp.Text(chromedp.CSS("h1"))); h != "Approve 2 items together" {
		t.Fatalf("the review page's heading is %q, want %q", h, "Approve 2 items together")
	}
	check("the batch review page")
	browse(t, doc, "approve them", chromedp.Click(chromedp.CSS("#approve-batch")), chromedp.WaitVisible(chromedp.CSS("#results")))
	notice := read(t, doc, "the notice", chromedp.Text(chromedp.CSS(".notice")))
	if !strings.HasPrefix(notice, "Approved 2 of 2 items, each on its own") {
		t.Fatalf("the notice after the batch is %q, want it to start with %q", notice, "Approved 2 of 2 items, each on its own")
	}
	check("the batch results page")
	for _, name := range []string{"restart0", "restart2"} {
		if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs[name]}).Data["status"]; st != "approved" {
			t.Errorf("%s is %v after the batch, want approved", name, st)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": reqs["restart1"]}).Data["status"]; st != "pending" {
		t.Errorf("restart1, not ticked, is %v, want pending", st)
	}
}
