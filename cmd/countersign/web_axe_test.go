package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/internal/nodetest"
)

// axeResult is what the check returns of axe.run: the violations, each
// with its impact and the elements at fault.
type axeResult struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun injects axe-core (npm, testdata/node) into the page open in doc
// through the DevTools protocol (the page's CSP allows no inline script,
// and the page's own scripts are not involved) and returns the serious and
// critical violations of the WCAG 2.x A/AA and best-practice rules.
func axeRun(t *testing.T, doc context.Context, src string) []axeResult {
	t.Helper()
	if ok := read(t, doc, "inject axe-core", chromedp.Evaluate[bool](src+"\n;typeof axe === 'object'")); !ok {
		t.Fatal("axe-core did not load into the page")
	}
	raw := read(t, doc, "run axe-core", chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice']}, resultTypes: ['violations']}).then(r => JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))))`, chromedp.EvalAwaitPromise))
	var out []axeResult
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("axe-core's answer %q: %v", raw, err)
	}
	return out
}

// TestWebAccessibility runs axe-core in Chromium over every console page
// (signed out and in: sign-in, the link page, the inbox, a memory
// proposal, an action with facts, a destructive action, a question, a
// decided item, Memory, Audit and its space chooser, Grants, Insights, a
// not-found page, the inbox with its batch checkboxes and a batch review), at desktop and phone widths and in the dark scheme, and
// fails on any serious or critical violation, and on a page that scrolls
// sideways on the phone.
func TestWebAccessibility(t *testing.T) {
	t.Parallel()
	mods := nodetest.Modules(t, "axe-core")
	src, err := os.ReadFile(filepath.Join(mods, "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, `memory:
  slots:
    - {name: active_medication, category: active_medication, confirm: true}
    - {name: allergy, category: allergy, confirm: true, multi: true}
tools:
  - name: order_medication
    category: mutating
    context: [allergy, active_medication]
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, session, duration]}
  - name: scale_service
    category: mutating
principals:
  - {name: dr_smith, role: member, web: s@x.example}
`)
	agent := e.CreateKey("ward_bot", "agent")
	lee := e.CreateKey("ph_lee", "member")
	e.Start()
	p42 := func(m map[string]any) map[string]any { m["user_id"] = "patient_42"; return m }
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "active_medication", "value": "warfarin 5mg daily", "text": "On warfarin.", "source": "fhir"}))
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "allergy", "value": "none", "text": "No known allergies.", "source": "fhir"}))
	e.MustOK(agent, "remember", p42(map[string]any{"subject": "active_medication", "value": "apixaban 5mg twice daily", "replaces": "warfarin", "text": "Switch to apixaban."}))
	order := e.MustOK(agent, "confirm_action", p42(map[string]any{"tool": "order_medication", "arguments": map[string]any{"drug": "apixaban", "dose": "5 mg"}, "summary": "Start apixaban 5 mg twice daily"}))
	drop := e.MustOK(agent, "confirm_action", map[string]any{"tool": "delete_database", "arguments": map[string]any{"db_name": "orders_prod"}, "summary": "Drop orders_prod", "dry_run": "DROP DATABASE orders_prod"})
	q := e.MustOK(agent, "ask_user", map[string]any{"question": "Which ward?", "options": []string{"ward 3", "ward 5"}})
	granted := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "pumps"}, "summary": "Restart pumps"})
	e.MustOK(lee, "approve_action", map[string]any{"request_id": granted.Data["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h"}})
	e.MustOK(lee, "delegate_approvals", map[string]any{"to": "dr_smith", "for": "4h"}) // the Delegation page lists one lent
	item := func(r toolResponse) string { return fmt.Sprint(r.Data["item_id"]) }
	// Two of one tool: the inbox offers its checkboxes, and their batch
	// review page is checked too.
	scale1 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "scale_service", "arguments": map[string]any{"n": 3}, "summary": "Scale api to 3"})
	scale2 := e.MustOK(agent, "confirm_action", map[string]any{"tool": "scale_service", "arguments": map[string]any{"n": 4}, "summary": "Scale web to 4"})

	pages := []string{
		"/ui/items/" + item(order), "/ui/items/" + item(drop), "/ui/items/" + item(q), "/ui/items/" + item(granted),
		"/ui/", "/ui/memory?space=patient_42", "/ui/audit", "/ui/audit?space=patient_42", "/ui/grants", "/ui/insights", "/ui/delegation", "/ui/nothing-here",
		"/ui/batch?id=" + item(scale1) + "&id=" + item(scale2),
	}
	doc := person(t)
	browse(t, doc, "open the sign-in page", chromedp.Navigate(e.URL+"/ui/signin"), chromedp.WaitVisible(chromedp.CSS("h1")))
	check := func(where string) {
		t.Helper()
		for _, v := range axeRun(t, doc, string(src)) {
			t.Errorf("%s: axe-core violation %s (%s), want none: %s\n  %s", where, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		}
	}
	check("the sign-in page")
	// The check can fail: an image without a text alternative, added to
	// the page, is found (image-alt, critical).
	read(t, doc, "add an image without alt", chromedp.Evaluate[bool](`document.querySelector('main').insertAdjacentHTML('beforeend', '<img src="/ui/static/none.png">'), true`))
	if v := axeRun(t, doc, string(src)); len(v) == 0 || v[0].ID != "image-alt" {
		t.Fatalf("axe-core did not find an image without alt: %v, want the first violation to be %q", v, "image-alt")
	}
	link := e.webLink("dr_smith")
	browse(t, doc, "open the link page", chromedp.Navigate(e.URL+link), chromedp.WaitVisible(chromedp.CSS("#continue")))
	check("the link page")
	browse(t, doc, "sign in", chromedp.Click(chromedp.CSS("#continue")), chromedp.WaitVisible(chromedp.CSS(".me")))
	memItem := read(t, doc, "the proposal's id", chromedp.AttributeValue(chromedp.CSS(`li[data-kind="memory_change"]`), "id")).Value[len("item-"):]
	pages = append(pages, "/ui/items/"+memItem)

	for _, mode := range []struct {
		name          string
		width, height int64
		mobile, dark  bool
	}{{"desktop", 1280, 900, false, false}, {"phone", 390, 844, true, false}, {"phone, dark", 390, 844, true, true}} {
		var opts []chromedp.EmulateViewportOption
		if mode.mobile {
			opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
		}
		browse(t, doc, "set the viewport", chromedp.EmulateViewport(mode.width, mode.height, opts...))
		scheme := "light"
		if mode.dark {
			scheme = "dark"
		}
		if _, err := chromedp.Call(doc, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatalf("emulating the %s scheme: %v", scheme, err)
		}
		for _, p := range pages {
			browse(t, doc, "open "+p, chromedp.Navigate(e.URL+p), chromedp.WaitVisible(chromedp.CSS("h1")))
			check(p + " (" + mode.name + ")")
			if mode.mobile {
				if wide := read(t, doc, "sideways scroll", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
					t.Errorf("%s scrolls sideways on a 390 px screen", p)
				}
			}
		}
	}
}
