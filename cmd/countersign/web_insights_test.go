package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/bot/bottest"
)

// insightsConfig gives unanswered requests 12 h: the set clock moves 3 h
// past the last ones asked, and a sweep may run at any moment of the
// test, so with the default 30 min one of them would expire or not as
// the sweep's timing fell.
const insightsConfig = `approvals: {default_timeout: 12h}
tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, session, duration]}
  - name: delete_database
    category: destructive
    schema: {type: object, required: [db_name]}
principals:
  - {name: dr_smith, role: member, web: s@x.example}
  - {name: nurse_b, role: member, web: b@x.example, scopes: [ward_b]}
`

// metricValue is the value of one sample line of /metrics (name with its
// labels, as exposed), or -1 when it is absent.
func metricValue(body, sample string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestWebInsights is issue 23 item 7 against the real server on a set
// clock, in Chromium with JavaScript off: the Insights page draws the
// queue by age, decisions per day by outcome (a grant's too), time to
// decision per tool and the approvals made within seconds of the card
// (flagged: a person's on a surface, never an API key's), and the grants
// in use, each an SVG image with its text alternative; a scoped member sees only their space's figures; /metrics
// says how long the oldest item has waited and observes the time to each
// decision.
func TestWebInsights(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := newTestEnv(t, insightsConfig)
	e.clock = clock.Now
	agent := e.CreateKey("ward_bot", "agent")
	lee := e.CreateKey("ph_lee", "member")
	e.Start()
	ask := func(space, tool string, args map[string]any) toolResponse {
		return e.MustOK(agent, "confirm_action", map[string]any{"user_id": space, "tool": tool, "arguments": args, "summary": "do " + tool, "dry_run": "plan"})
	}

	// Day 1: an approval in the console 2 s after the card appeared, and
	// one over the API after 1 s (a program's call: no rubber stamp).
	r := ask("ward_a", "restart_service", map[string]any{"service": "pumps"})
	clock.Advance(2 * time.Second)
	if loc := consoleDecide(t, e, signInHTTP(t, e, "dr_smith"), r.Data["request_id"].(string), "approve", nil); strings.Contains(loc, "problem=") {
		t.Fatalf("dr_smith's approval in the console went to %q, want no %q in it", loc, "problem=")
	}
	r = ask("ward_a", "restart_service", map[string]any{"service": "fans"})
	clock.Advance(time.Second)
	e.MustOK(lee, "approve_action", map[string]any{"request_id": r.Data["request_id"]})
	// Day 2: a denial after 10 minutes; an approval after 20 with an 8h
	// grant, which approves the next identical call at once; two
	// requests left waiting.
	clock.Advance(24 * time.Hour)
	d := ask("ward_a", "delete_database", map[string]any{"db_name": "scratch"})
	clock.Advance(10 * time.Minute)
	e.MustOK(lee, "deny_action", map[string]any{"request_id": d.Data["request_id"], "reason": "not today"})
	r = ask("ward_a", "restart_service", map[string]any{"service": "xray"})
	clock.Advance(20 * time.Minute)
	e.MustOK(lee, "approve_action", map[string]any{"request_id": r.Data["request_id"], "grant": map[string]any{"kind": "duration", "for": "8h"}})
	if g := ask("ward_a", "restart_service", map[string]any{"service": "xray"}); g.Data["status"] != "approved" {
		t.Fatalf("the grant did not approve the identical call: %s, want status approved", g)
	}
	ask("ward_a", "restart_service", map[string]any{"service": "lab"})
	clock.Advance(3 * time.Hour)
	ask("ward_b", "restart_service", map[string]any{"service": "beds"})
	clock.Advance(time.Minute)

	doc := person(t)
	signInWithLink(t, doc, e.URL, e.webLink("dr_smith"), "dr_smith")
	if _, err := chromedp.Call(doc, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("turning JavaScript off: %v", err)
	}
	browse(t, doc, "open Insights", chromedp.Navigate(e.URL+"/ui/insights"), chromedp.WaitVisible(chromedp.CSS("#chart-queue")))
	desc := func(id string) string {
		t.Helper()
		return read(t, doc, "the text of "+id, chromedp.Text(chromedp.CSS("#"+id+"-desc")))
	}
	for id, want := range map[string]string{
		"queue":     "2 item(s) await a decision: 1 under 5 min, 1 2–12 h. The oldest has waited 3h1m.",
		"decisions": "5 decisions in the last 14 days: 3 approved, 1 by grant, 1 denied. The busiest day had 3.",
		"latency":   "Time from the card appearing to the decision: delete_database median 10m, p90 10m (1 decision); restart_service median 2s, p90 20m (3 decisions).",
		"quick":     "Approvals made within 5s of the card appearing, of all approvals: dr_smith 1 of 1.",
	} {
		if got := desc(id); got != want {
			t.Errorf("the %s chart's text:\n got %q\nwant %q", id, got, want)
		}
	}
	if g := desc("grants"); !strings.Contains(g, "restart_service, duration for ward_bot) used 1 time(s)") {
		t.Errorf("the grants chart's text: %q, want it to contain %q", g, "restart_service, duration for ward_bot) used 1 time(s)")
	}
	for _, id := range []string{"queue", "decisions", "latency", "quick", "grants"} {
		role := read(t, doc, "the chart's role", chromedp.AttributeValue(chromedp.CSS("#chart-"+id), "role"))
		bars := read(t, doc, "the chart's bars", chromedp.Evaluate[int](`document.querySelectorAll('#chart-`+id+` rect').length`))
		if role.Value != "img" || bars == 0 {
			t.Errorf("chart %s: role %q, %d bars; want an image with bars", id, role.Value, bars)
		}
	}
	if f := read(t, doc, "the flag", chromedp.Text(chromedp.CSS("#flagged"))); !strings.Contains(f, "Possible rubber-stamping") || !strings.Contains(f, "dr_smith: 1 of 1 approval(s) within 5s") || strings.Contains(f, "ph_lee") {
		t.Errorf("the rubber-stamping flag: %q, want %q and %q in it, and no %q", f, "Possible rubber-stamping", "dr_smith: 1 of 1 approval(s) within 5s", "ph_lee")
	}
	browse(t, doc, "a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#chart-queue")))
	if wide := read(t, doc, "sideways scroll", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("the Insights page scrolls sideways on a 390 px screen")
	}

	// A scoped member: ward_b only.
	b := signInHTTP(t, e, "nurse_b")
	_, body := webDo(t, b, "GET", e.URL+"/ui/insights", nil)
	if !strings.Contains(body, "1 item(s) await a decision: 1 under 5 min.") || !strings.Contains(body, "No decisions in the last 14 days.") || strings.Contains(body, "delete_database") || strings.Contains(body, "ph_lee") {
		t.Errorf("nurse_b's insights show more than ward_b, want %q and %q, and no delete_database or ph_lee:\n%s", "1 item(s) await a decision: 1 under 5 min.", "No decisions in the last 14 days.", body)
	}
	if resp, _ := webDo(t, b, "GET", e.URL+"/ui/insights?days=0", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("days=0 answered %d, want 400", resp.StatusCode)
	}

	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(raw)
	if got := metricValue(m, "countersign_pending_oldest_seconds"); got != (3*time.Hour + time.Minute).Seconds() {
		t.Errorf("countersign_pending_oldest_seconds = %v, want %v", got, (3*time.Hour + time.Minute).Seconds())
	}
	for sample, want := range map[string]float64{
		`countersign_decision_latency_seconds_count{kind="action",outcome="denied"}`:           1,
		`countersign_decision_latency_seconds_sum{kind="action",outcome="denied"}`:             600,
		`countersign_decision_latency_seconds_count{kind="action",outcome="approved"}`:         3,
		`countersign_decision_latency_seconds_bucket{kind="action",outcome="approved",le="5"}`: 2,
		`countersign_decision_latency_seconds_bucket{kind="action",outcome="denied",le="300"}`: 0,
		`countersign_decision_latency_seconds_bucket{kind="action",outcome="denied",le="900"}`: 1,
	} {
		if got := metricValue(m, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
}

// TestWebInsightsSensitiveTool: on the Insights page a sensitive tool's
// name is shown to people who may see its details (an approver of the
// space) and withheld from a viewer, whose figures still count it.
func TestWebInsightsSensitiveTool(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: release_records
    category: mutating
    sensitive: true
principals:
  - {name: dr_smith, role: member, web: s@x.example}
  - {name: clerk, role: viewer, web: c@x.example}
`)
	agent := e.CreateKey("ward_bot", "agent")
	lee := e.CreateKey("ph_lee", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward_a", "tool": "release_records", "arguments": map[string]any{"patient": "jane"}, "summary": "Release Jane's records"})
	e.MustOK(lee, "approve_action", map[string]any{"request_id": r.Data["request_id"]})

	_, approver := webDo(t, signInHTTP(t, e, "dr_smith"), "GET", e.URL+"/ui/insights", nil)
	_, viewer := webDo(t, signInHTTP(t, e, "clerk"), "GET", e.URL+"/ui/insights", nil)
	if !strings.Contains(approver, "release_records median") {
		t.Errorf("an approver of the space does not see the tool's name:\n%s", approver)
	}
	if strings.Contains(viewer, "release_records") || strings.Contains(viewer, "jane") || !strings.Contains(viewer, "(sensitive action) median") || !strings.Contains(viewer, "1 decision in the last 14 days: 1 approved.") {
		t.Errorf("the viewer's insights, want %q and %q, and no release_records or jane:\n%s", "(sensitive action) median", "1 decision in the last 14 days: 1 approved.", viewer)
	}
}
