package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestWebNoticesAreServerChosen plays the attacker's words on Countersign
// pages: a provider error carries free text; a problem message this server
// made for one person's item quotes what they typed, and its URL is sent to
// another person, or opened on another item.
func TestWebNoticesAreServerChosen(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	e := newTestEnv(t, `tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, duration]}
principals:
  - {name: dr_smith, role: member, web: dr.smith@hospital.example}
  - {name: dr_jones, role: member, web: dr.jones@hospital.example}
`+oidcConfig(m))
	e.env["OIDC_SECRET"] = m.ClientSecret
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	const words = "Your account is locked. Call +1-555-0100"

	for _, q := range []string{
		"error=" + url.QueryEscape(words),
		"error=access_denied&error_description=" + url.QueryEscape(words),
	} {
		resp, page := webDo(t, webClient(t), "GET", e.URL+"/ui/oidc/callback?"+q, nil)
		if strings.Contains(page, "555-0100") || strings.Contains(page, "locked") {
			t.Errorf("the callback with %s shows the attacker's words (%d):\n%s", q, resp.StatusCode, page)
		}
	}
	if _, page := webDo(t, webClient(t), "GET", e.URL+"/ui/oidc/callback?error=access_denied", nil); !strings.Contains(page, "declined") {
		t.Errorf("a known provider error is not explained, want %q in the page:\n%s", "declined", page)
	}

	item := func(service string) string {
		r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "restart_service", "arguments": map[string]any{"service": service, "reason": "oom"}})
		return r.Data["request_id"].(string)
	}
	smith := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, smith, "GET", e.URL+"/ui/requests/"+item("payments"), nil)
	itemA := resp.Header.Get("Location")
	resp, _ = webDo(t, smith, "GET", e.URL+"/ui/requests/"+item("billing"), nil)
	itemB := resp.Header.Get("Location")
	_, page := webDo(t, smith, "GET", e.URL+itemA, nil)
	csrf := csrfRE.FindStringSubmatch(page)
	form := url.Values{"csrf": {csrf[1]}, "action": {"approve"}, "grant": {"duration|1h"}, "match": {words}}
	resp, _ = webDo(t, smith, "POST", e.URL+itemA+"/decide", form)
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || loc.Query().Get("problem") == "" {
		t.Fatalf("a match on an argument the request lacks answered %d %s, want a problem on the item", resp.StatusCode, resp.Header.Get("Location"))
	}
	if strings.Contains(loc.Query().Get("problem"), "555-0100") {
		t.Errorf("the server's problem message quotes the form's input: %q", loc.Query().Get("problem"))
	}
	if _, page := webDo(t, smith, "GET", e.URL+loc.RequestURI(), nil); !strings.Contains(page, `role="alert"`) {
		t.Errorf("the person's own problem message is not shown on their item:\n%s", page)
	}
	// The same MAC'd URL, opened by another person, or on another item.
	jones := signInHTTP(t, e, "dr_jones")
	if _, page := webDo(t, jones, "GET", e.URL+loc.RequestURI(), nil); strings.Contains(page, `class="problem" role="alert"`) {
		t.Errorf("dr_smith's problem URL shows its message to dr_jones:\n%s", page)
	}
	other := itemB + "?" + loc.RawQuery
	if _, page := webDo(t, smith, "GET", e.URL+other, nil); strings.Contains(page, `class="problem" role="alert"`) {
		t.Errorf("item A's problem URL shows its message on item B:\n%s", page)
	}
	// The grants page's problem is bound to the session too.
	_, page = webDo(t, smith, "GET", e.URL+"/ui/grants", nil)
	csrf = csrfRE.FindStringSubmatch(page)
	resp, _ = webDo(t, smith, "POST", e.URL+"/ui/grants/99/revoke", url.Values{"csrf": {csrf[1]}})
	gloc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(gloc, "problem=") {
		t.Fatalf("revoking an unknown grant answered %d %q, want %d to a location with %q", resp.StatusCode, gloc, http.StatusSeeOther, "problem=")
	}
	if _, page := webDo(t, smith, "GET", e.URL+gloc, nil); !strings.Contains(page, "No grant #99") {
		t.Errorf("the grants page does not show the person's own problem, want %q in it:\n%s", "No grant #99", page)
	}
	if _, page := webDo(t, jones, "GET", e.URL+gloc, nil); strings.Contains(page, "No grant #99") {
		t.Errorf("dr_smith's grants problem URL shows its message to dr_jones")
	}
}
