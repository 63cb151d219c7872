package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const attackBatchConfig = `http:
  rate_burst: 1000
tools:
  - name: restart_service
    category: mutating
  - name: delete_database
    category: destructive
principals:
  - {name: dr_smith, role: member, web: dr.smith@hospital.example, scopes: [ward_a]}
  - {name: dr_jones, role: member, web: dr.jones@hospital.example}
`

// TestAttackBatchFormTampering: the console's batch form, reviewed for
// two restarts, is sent back tampered. An item swapped for a destructive
// one (with its real args hash as its basis), or for one in a space
// outside the person's scopes, refuses the batch whole: nothing of it is
// decided. The review page tells an item outside one's scopes apart from
// no item at all by nothing, and shows none of it. Another person's
// session cannot send the form (its CSRF token is the session's). The form
// as reviewed then approves both.
func TestAttackBatchFormTampering(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackBatchConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	ask := func(tool, space, arg string) (rid, item, sum string) {
		r := e.MustOK(agent, "confirm_action", map[string]any{"tool": tool, "arguments": map[string]any{"target": arg}, "user_id": space, "dry_run": "plan"})
		rid = r.Data["request_id"].(string)
		st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
		return rid, fmt.Sprint(r.Data["item_id"]), fmt.Sprint(st.Data["args_sha256"])
	}
	r1, i1, _ := ask("restart_service", "ward_a", "api")
	r2, i2, _ := ask("restart_service", "ward_a", "web")
	r3, i3, s3 := ask("restart_service", "ward_b", "ward-b-secret")
	rd, id, sd := ask("delete_database", "ward_a", "orders")
	pending := func(when string) {
		t.Helper()
		for _, rid := range []string{r1, r2, r3, rd} {
			if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["status"]; st != "pending" {
				t.Fatalf("%s: %s is %v, want pending", when, rid, st)
			}
		}
	}

	smith := signInHTTP(t, e, "dr_smith")
	resp, page := webDo(t, smith, "GET", e.URL+"/ui/batch?"+url.Values{"id": {i1, i2}}.Encode(), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("review of two restarts: %d, want %d:\n%s", resp.StatusCode, http.StatusOK, page)
	}
	form := consoleForm(t, page, "approve-batch", nil)
	form.Del("action")
	form["id"] = []string{i1, i2}

	swap := func(name, other, basis string, status int, want string) {
		t.Helper()
		f := cloneForm(form)
		f["id"] = []string{i1, other}
		f.Set("basis_"+other, basis)
		f.Set("seen_"+other, f.Get("seen_"+i2))
		resp, body := webDo(t, smith, "POST", e.URL+"/ui/batch", f)
		if resp.StatusCode != status || !strings.Contains(body, want) {
			t.Errorf("%s: answered %d, want %d with %q:\n%s", name, resp.StatusCode, status, want, body)
		}
		pending(name)
	}
	swap("a destructive item swapped in", id, sd, http.StatusConflict, "cannot be approved in a batch")
	swap("an item outside the scopes swapped in", i3, s3, http.StatusNotFound, "not an item you can see")

	_, hidden := webDo(t, smith, "GET", e.URL+"/ui/batch?"+url.Values{"id": {i1, i3}}.Encode(), nil)
	_, none := webDo(t, smith, "GET", e.URL+"/ui/batch?"+url.Values{"id": {i1, "99999"}}.Encode(), nil)
	if strings.Contains(hidden, "ward-b-secret") || strings.Contains(hidden, r3) ||
		strings.Replace(hidden, "#"+i3, "#N", -1) != strings.Replace(none, "#99999", "#N", -1) {
		t.Errorf("the review tells an item outside the scopes from no item (want the same page, with no %q and no %s in it):\n%s\n---\n%s", "ward-b-secret", r3, hidden, none)
	}

	jones := signInHTTP(t, e, "dr_jones")
	if resp, body := webDo(t, jones, "POST", e.URL+"/ui/batch", form); resp.StatusCode != http.StatusForbidden {
		t.Errorf("dr_smith's form sent from dr_jones's session: %d, want 403:\n%s", resp.StatusCode, body)
	}
	pending("after the forged forms")

	resp, done := webDo(t, smith, "POST", e.URL+"/ui/batch", form)
	if resp.StatusCode != http.StatusOK || !strings.Contains(done, "Approved 2 of 2 items") {
		t.Fatalf("the form as reviewed: %d, want %d saying %q:\n%s", resp.StatusCode, http.StatusOK, "Approved 2 of 2 items", done)
	}
	for _, rid := range []string{r3, rd} {
		if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["status"]; st != "pending" {
			t.Errorf("%s, never in the batch, is %v, want pending", rid, st)
		}
	}
}
