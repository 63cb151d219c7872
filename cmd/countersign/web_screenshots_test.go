package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestWebScreenshots writes the screenshots docs/web.md shows (the inbox,
// a memory proposal, an action, memory, the audit log and insights, at desktop and phone
// widths) into docs/img/. It runs only with COUNTERSIGN_SCREENSHOTS=1:
//
//	COUNTERSIGN_SCREENSHOTS=1 go test ./cmd/countersign -run TestWebScreenshots
func TestWebScreenshots(t *testing.T) {
	t.Parallel()
	if os.Getenv("COUNTERSIGN_SCREENSHOTS") != "1" {
		t.Skip("set COUNTERSIGN_SCREENSHOTS=1 to write docs/img/web-*.png")
	}
	out := filepath.Join("..", "..", "docs", "img")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, `memory:
  slots:
    - {name: active_medication, category: active_medication, confirm: true}
    - {name: allergy, category: allergy, confirm: true, multi: true}
    - {name: code_status, category: code_status, confirm: true}
tools:
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
    approvers: {roles: [member, admin]}
    quorum: 2
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, session, duration]}
principals:
  - name: dr_smith
    role: admin
    web: dr.smith@hospital.example
`)
	agent := e.CreateKey("ward_agent", "agent")
	lee := e.CreateKey("ph_lee", "member")
	e.Start()
	p42 := map[string]any{"user_id": "patient_42"}
	with := func(m map[string]any) map[string]any {
		for k, v := range p42 {
			m[k] = v
		}
		return m
	}
	e.MustOK(agent, "remember", with(map[string]any{"subject": "active_medication", "value": "apixaban 5mg twice daily", "text": "Started apixaban 5mg twice daily for AF.", "source": "fhir", "confidence": 0.98}))
	e.MustOK(agent, "remember", with(map[string]any{"subject": "code_status", "value": "full code", "text": "Patient is full code.", "source": "admission note", "confidence": 0.95}))
	e.MustOK(agent, "remember", with(map[string]any{"subject": "active_medication", "value": "warfarin 5mg daily", "text": "Family says she switched to warfarin 5mg daily last month.", "source": "ward round", "confidence": 0.7}))
	e.MustOK(agent, "remember", with(map[string]any{"subject": "code_status", "value": "DNR", "text": "Daughter mentioned a DNR order from the GP.", "source": "phone call", "confidence": 0.6}))
	e.MustOK(agent, "confirm_action", actDelete(""))
	// Decisions for the Insights charts: two approvals (one with a grant,
	// which approves the next identical call), a denial.
	for i, svc := range []string{"pumps", "lab", "beds"} {
		r := e.MustOK(agent, "confirm_action", with(map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": svc}, "summary": "Restart " + svc}))
		switch i {
		case 0:
			e.MustOK(lee, "approve_action", map[string]any{"request_id": r.Data["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h"}})
			e.MustOK(agent, "confirm_action", with(map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": svc}, "summary": "Restart " + svc}))
		case 1:
			e.MustOK(lee, "approve_action", map[string]any{"request_id": r.Data["request_id"]})
		case 2:
			e.MustOK(lee, "deny_action", map[string]any{"request_id": r.Data["request_id"], "reason": "beds are fine"})
		}
	}

	doc := person(t)
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	id := read(t, doc, "the proposal's id", chromedp.AttributeValue(chromedp.CSS(`li[data-kind="memory_change"]`), "id")).Value[len("item-"):]
	act := read(t, doc, "the action's id", chromedp.AttributeValue(chromedp.CSS(`li[data-kind="action"]`), "id")).Value[len("item-"):]
	shots := []struct{ name, path string }{
		{"inbox", "/ui/"},
		{"item", "/ui/items/" + id},
		{"action", "/ui/items/" + act},
		{"memory", "/ui/memory?space=patient_42"},
		{"audit", "/ui/audit"},
		{"insights", "/ui/insights"},
	}
	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 860, false}, {"phone", 390, 844, true}} {
		var opts []chromedp.EmulateViewportOption
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
		}
		browse(t, doc, "set the viewport", chromedp.EmulateViewport(size.width, size.height, opts...))
		for _, s := range shots {
			browse(t, doc, "open "+s.name, chromedp.Navigate(e.URL+s.path), chromedp.WaitVisible(chromedp.CSS("h1")))
			png := read(t, doc, "screenshot "+s.name, chromedp.FullScreenshot(100))
			if err := os.WriteFile(filepath.Join(out, "web-"+s.name+"-"+size.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
