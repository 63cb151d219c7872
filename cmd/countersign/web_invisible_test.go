package main

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestWebInvisibleCharactersEscaped: an argument value that differs from
// another only by a zero-width space, and an argument name with a
// right-to-left override, read differently wherever the console shows
// arguments or values (the item's arguments, the "Hold fixed" list, the
// edit form, the memory page): no raw invisible character reaches a page.
// The edit form, approved unchanged, approves exactly the arguments the
// agent sent.
func TestWebInvisibleCharactersEscaped(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [once, duration]}
principals:
  - {name: dr_smith, role: admin, web: s@x.example}
`)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"user_id": "ward7", "tool": "restart_service",
		"arguments": map[string]any{"service": "pay\u200bments", "re\u202eason": "oom"}})
	rid := r.Data["request_id"].(string)
	e.MustOK(agent, "remember", map[string]any{"user_id": "ward7", "subject": "on_call", "value": "al\u200bice", "text": "alice is on call"})
	c := signInHTTP(t, e, "dr_smith")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+rid, nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	if !strings.Contains(page, `<code>service</code> = <code>pay\u200bments</code>`) || !strings.Contains(page, `<code>re\u202eason</code>`) {
		t.Errorf("the Hold fixed list does not show the invisible characters as escapes:\n%s", page)
	}
	_, mem := webDo(t, c, "GET", e.URL+"/ui/memory?space=ward7", nil)
	if !strings.Contains(mem, `al\u200bice`) {
		t.Errorf("the memory page does not show the value's invisible character as an escape:\n%s", mem)
	}
	for what, body := range map[string]string{"item page": page, "memory page": mem} {
		if i := strings.IndexAny(body, "\u200b\u202e"); i >= 0 {
			t.Errorf("the %s holds a raw invisible character: …%s…", what, body[max(0, i-80):min(len(body), i+40)])
		}
	}
	// Edit & approve, unchanged: the form's text is what the agent sent.
	m := editAreaRE.FindStringSubmatch(page)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	basis := basisRE.FindStringSubmatch(page)
	if m == nil || csrf == nil || nonce == nil || basis == nil {
		t.Fatalf("the item page has no edit form:\n%s", page)
	}
	form := url.Values{"csrf": {csrf[1]}, "nonce": {nonce[1] + "e"}, "action": {"edit"}, "basis": {basis[1]}, "edit_0": {html.UnescapeString(m[1])}}
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/?done=edit-") {
		t.Fatalf("approving the edit form unchanged answered %d %q, want %d to a location starting %q", resp.StatusCode, resp.Header.Get("Location"), http.StatusSeeOther, "/ui/?done=edit-")
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	approved, _ := st.Data["approved_arguments"].(map[string]any)
	if st.Data["status"] != "approved" || approved["service"] != "pay\u200bments" || approved["re\u202eason"] != "oom" {
		t.Fatalf("after the unchanged edit: %s; want the agent's arguments exactly", st)
	}
}

var editAreaRE = regexp.MustCompile(`<textarea id="edit_0" name="edit_0"[^>]*>([^<]*)</textarea>`)
