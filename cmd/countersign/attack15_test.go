package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/discord/discordtest"
	"github.com/countersign/countersign/bot/bottest"
)

// Attacks on issue 15's risk-scaled approval (edit before approving,
// standing grants, step-up), played against the real server. SECURITY.md
// ("Risk-scaled approval: attacks tested") lists them.

// attackConfig: a dose under a quorum of 2, an exec tool whose allowlist
// mixes categories, and a tool that allows standing grants.
const attackConfig = `tools:
  - name: set_dose
    category: mutating
    quorum: 2
    schema: {type: object, required: [drug, dose], properties: {drug: {type: string}, dose: {type: string}}}
  - name: exec
    category: mutating
    commands:
      - {command: kubectl get, category: read-only}
      - {command: kubectl rollout restart, category: mutating}
      - {command: kubectl scale, category: mutating}
      - {command: kubectl delete, category: destructive}
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
    grants: {max: 8h, allow: [once, session, duration]}
principals:
  - {name: dr_web, role: member, web: w@x.example}
`

// TestAttackStaleConsoleApproveAfterEdit: dr_web opens a quorum-2 request
// in the console; while the page is open, bob approves it with changes
// (dose 5mg -> 50mg). dr_web's plain Approve, posted from the page that
// showed 5mg, must not count as an approval of 50mg, which they never saw:
// each approver approves the same bytes. The request stays pending with
// bob's vote only, and the refusal says why.
func TestAttackStaleConsoleApproveAfterEdit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid := r.Data["request_id"].(string)

	c := signInHTTP(t, e, "dr_web")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+rid, nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	if !strings.Contains(page, "5mg") {
		t.Fatalf("the page does not show the proposal (want %q in it):\n%s", "5mg", page)
	}
	form := approveForm(t, page)

	// bob edits while the page is open: 1 of 2 on the edited version.
	if r := e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "50mg"}}); r.Data["tally"] != "1 of 2 approvals: bob" {
		t.Fatalf("bob's edit: tally = %v, want %q: %s", r.Data["tally"], "1 of 2 approvals: bob", r)
	}
	resp, body := webDo(t, c, "POST", e.URL+itemPath+"/decide", form)
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if st.Data["status"] != "pending" || st.Data["tally"] != "1 of 2 approvals: bob" {
		t.Fatalf("a stale Approve (the page showed 5mg) approved the edit to 50mg: status = %v, tally = %v, want pending, %q: %s", st.Data["status"], st.Data["tally"], "1 of 2 approvals: bob", st)
	}
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the stale Approve answered %d, want %d:\n%s", resp.StatusCode, http.StatusSeeOther, body)
	}
	_, page = webDo(t, c, "GET", e.URL+resp.Header.Get("Location"), nil)
	if !strings.Contains(page, "changed") {
		t.Fatalf("the refusal does not say the item changed (want %q in it):\n%s", "changed", page)
	}
	// A fresh page (showing 50mg) approves the edited version.
	_, page = webDo(t, c, "GET", e.URL+itemPath, nil)
	if resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", approveForm(t, page)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a fresh Approve answered %d, want %d", resp.StatusCode, http.StatusSeeOther)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "approved" || approvedArgs(t, st) != `{"dose":"50mg","drug":"apixaban"}` {
		t.Fatalf("after a fresh Approve: status = %v, want approved with arguments %s: %s", st.Data["status"], `{"dose":"50mg","drug":"apixaban"}`, st)
	}
}

// approveForm is the item page's Approve form: every hidden input of it,
// and action=approve.
func approveForm(t *testing.T, page string) url.Values {
	t.Helper()
	i := strings.Index(page, `class="approve"`)
	if i < 0 {
		t.Fatalf("no Approve form (want %q in the page):\n%s", `class="approve"`, page)
	}
	form := page[i:]
	form = form[:strings.Index(form, "</form>")]
	v := url.Values{"action": {"approve"}}
	for _, m := range hiddenRE.FindAllStringSubmatch(form, -1) {
		v.Set(m[1], m[2])
	}
	if v.Get("csrf") == "" {
		t.Fatalf("the Approve form has no CSRF token (want a hidden csrf input):\n%s", form)
	}
	return v
}

// TestAttackStaleAPIApproveAfterEdit: the API's approve_action may name
// the version the approver reviewed (args_sha256); an approval of a
// version another approver's edit replaced is refused (409), nothing is
// recorded.
func TestAttackStaleAPIApproveAfterEdit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid, seen := r.Data["request_id"].(string), r.Data["args_sha256"].(string)
	e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "50mg"}})
	if r := e.Call(alice, "approve_action", map[string]any{"request_id": rid, "args_sha256": seen}); r.Status != http.StatusConflict || !strings.Contains(r.Text+r.Error, "50mg") {
		t.Fatalf("a stale approval: status = %d, want %d naming %q: %s", r.Status, http.StatusConflict, "50mg", r)
	}
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if st.Data["tally"] != "1 of 2 approvals: bob" {
		t.Fatalf("after a refused stale approval: tally = %v, want %q: %s", st.Data["tally"], "1 of 2 approvals: bob", st)
	}
	if r := e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "args_sha256": st.Data["edited_args_sha256"]}); r.Data["status"] != "approved" {
		t.Fatalf("a current approval: status = %v, want approved: %s", r.Data["status"], r)
	}
}

// TestAttackEditBadJSON: edits too deep, too large or with duplicate keys
// are 4xx naming the field, never a 500, and record nothing.
func TestAttackEditBadJSON(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid := r.Data["request_id"].(string)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for name, body := range map[string]string{
		"deep":      `{"request_id":"` + rid + `","arguments":{"drug":"apixaban","dose":"5mg","x":` + deep + `}}`,
		"huge":      `{"request_id":"` + rid + `","arguments":{"drug":"apixaban","dose":"` + strings.Repeat("5", 70000) + `mg"}}`,
		"duplicate": `{"request_id":"` + rid + `","arguments":{"drug":"apixaban","dose":"2.5mg","dose":"50mg"}}`,
	} {
		r := e.Call(alice, "approve_action", body)
		if r.Status < 400 || r.Status >= 500 {
			t.Errorf("%s edit: status = %d, want a 4xx: %.300s", name, r.Status, r.Raw)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["edited"] != false || st.Data["tally"] != "0 of 2 approvals" {
		t.Fatalf("after refused edits: edited = %v, tally = %v, want false, %q: %s", st.Data["edited"], st.Data["tally"], "0 of 2 approvals", st)
	}
}

// TestAttackEditEscapesAllowlist: an edit of an exec request cannot leave
// its allowlist entry or category: shell characters, another entry of the
// same category, a destructive or a read-only entry, a flag that hides a
// stricter subcommand.
func TestAttackEditEscapesAllowlist(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "rollout", "restart", "deploy/web"}}})
	rid := r.Data["request_id"].(string)
	for _, cmd := range []any{
		"kubectl rollout restart deploy/web; rm -rf /",
		"kubectl rollout restart deploy/web $(id)",
		[]string{"kubectl", "delete", "deploy/web"},
		[]string{"kubectl", "get", "pods"},
		[]string{"kubectl", "scale", "deploy/web", "--replicas=0"},
		[]string{"kubectl", "--context", "prod", "delete", "rollout", "restart"},
		[]string{"rm", "-rf", "/"},
	} {
		r := e.Call(alice, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"command": cmd}})
		if r.Status != http.StatusBadRequest || !strings.HasPrefix(r.Field, "arguments") {
			t.Errorf("edit to %v: status = %d, field = %q, want %d on a field under %q: %s", cmd, r.Status, r.Field, http.StatusBadRequest, "arguments", r)
		}
	}
	// The tool and space are the request's: extra fields are not an edit of them.
	for _, body := range []string{
		`{"request_id":"` + rid + `","tool":"restart_service","arguments":{"service":"web"}}`,
		`{"request_id":"` + rid + `","user_id":"other","arguments":{"command":["kubectl","rollout","restart","deploy/api"]}}`,
	} {
		if r := e.Call(alice, "approve_action", body); r.Status != http.StatusBadRequest {
			t.Errorf("%s: status = %d, want %d: %s", body, r.Status, http.StatusBadRequest, r)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "pending" || st.Data["edited"] != false {
		t.Fatalf("after refused edits: status = %v, edited = %v, want pending, false: %s", st.Data["status"], st.Data["edited"], st)
	}
	// A destructive request is approved as proposed (its dry run describes
	// it) or denied: never edited, not even to a narrower command.
	del := e.MustOK(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "delete", "pod", "web-1"}}, "dry_run": "delete pod web-1"})
	if r := e.Call(alice, "approve_action", map[string]any{"request_id": del.Data["request_id"], "arguments": map[string]any{"command": []string{"kubectl", "delete", "pod", "web-2"}}}); r.Status != http.StatusBadRequest || r.Field != "arguments" {
		t.Errorf("an edit of a destructive request: status = %d, field = %q, want %d on %q: %s", r.Status, r.Field, http.StatusBadRequest, "arguments", r)
	}
}

// TestAttackEditByWhoMayNotDecide: the requester, another agent, and an
// edit after expiry record nothing.
func TestAttackEditByWhoMayNotDecide(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Now().UTC())
	e := newTestEnv(t, attackConfig)
	e.clock = clock.Now
	agent := e.CreateKey("ward_bot", "agent")
	other := e.CreateKey("other_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}})
	rid := r.Data["request_id"].(string)
	edit := map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "50mg"}}
	for name, key := range map[string]string{"requester": agent, "other agent": other} {
		if r := e.Call(key, "approve_action", edit); r.Status != http.StatusForbidden {
			t.Errorf("%s: status = %d, want %d: %s", name, r.Status, http.StatusForbidden, r)
		}
	}
	clock.Advance(31 * time.Minute)
	if r := e.Call(alice, "approve_action", edit); r.Status != http.StatusConflict {
		t.Errorf("an edit after expiry: status = %d, want %d: %s", r.Status, http.StatusConflict, r)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "expired" || st.Data["edited"] != false {
		t.Fatalf("after refused edits: status = %v, edited = %v, want expired, false: %s", st.Data["status"], st.Data["edited"], st)
	}
}

// TestAttackOnceGrantRace: a once grant, and 8 identical confirm_action
// calls at the same time: exactly one is approved under it.
func TestAttackOnceGrantRace(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	call := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}}
	rid := e.MustOK(agent, "confirm_action", call).Data["request_id"].(string)
	e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "once"}})
	var wg sync.WaitGroup
	statuses := make([]string, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "action_id": fmt.Sprintf("race-%d", i)}
			statuses[i], _ = e.Call(agent, "confirm_action", c).Data["status"].(string)
		}()
	}
	wg.Wait()
	n := 0
	for _, s := range statuses {
		if s == "approved" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d calls approved under a once grant, want 1: %v", n, statuses)
	}
}

// TestAttackGrantScope: a grant applies to its agent, space, run and
// exact value only: another agent, another user_id, a value that differs
// in case, white space or unicode form, and a call just after revocation
// or at the expiry all wait for a person.
func TestAttackGrantScope(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Now().UTC())
	e := newTestEnv(t, attackConfig)
	e.clock = clock.Now
	agent := e.CreateKey("deploy_bot", "agent")
	other := e.CreateKey("other_bot", "agent")
	alice := e.CreateKey("alice", "member")
	carol := e.CreateKey("carol", "member", "--scopes", "team_b")
	e.Start()
	base := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}, "user_id": "team_a", "run_id": "r1"}
	// An agent key cannot approve, with or without a grant.
	pre := e.MustOK(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "payments"}, "user_id": "team_a", "run_id": "r0"}).Data["request_id"]
	if r := e.Call(other, "approve_action", map[string]any{"request_id": pre, "grant": map[string]any{"kind": "session"}}); r.Status != http.StatusForbidden {
		t.Errorf("an agent approving with a grant: status = %d, want %d: %s", r.Status, http.StatusForbidden, r)
	}
	rid := e.MustOK(agent, "confirm_action", base).Data["request_id"].(string)
	g := e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "duration", "for": "1h", "match": map[string]any{"service": "payments"}}})
	gid := g.Data["grant"].(map[string]any)["grant_id"]
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	if s := e.MustOK(agent, "confirm_action", with("run_id", "r2")).Data["status"]; s != "approved" {
		t.Fatalf("a duration grant in another run of its space: status = %v, want approved", s)
	}
	for name, c := range map[string]struct {
		key  string
		args map[string]any
	}{
		"other agent": {other, base},
		"other space": {agent, with("user_id", "team_b")},
		"case":        {agent, with("arguments", map[string]any{"service": "Payments"})},
		"space":       {agent, with("arguments", map[string]any{"service": "payments "})},
		"unicode":     {agent, with("arguments", map[string]any{"service": "ｐayments"})},
		"number":      {agent, with("arguments", map[string]any{"service": 1})},
	} {
		if r := e.Call(c.key, "confirm_action", c.args); r.Data["status"] == "approved" {
			t.Errorf("%s: approved under the grant, want it not approved: %s", name, r)
		}
	}
	// An agent can neither revoke nor make a grant.
	if r := e.Call(agent, "revoke_grant", map[string]any{"grant_id": gid}); r.Status != http.StatusForbidden {
		t.Errorf("agent revoke_grant: status = %d, want %d: %s", r.Status, http.StatusForbidden, r)
	}
	// Another agent and a person scoped to another space see none of it.
	for name, key := range map[string]string{"another agent": other, "a person scoped to team_b": carol} {
		if r := e.MustOK(key, "list_grants", map[string]any{"all": true}); len(r.Data["grants"].([]any)) != 0 {
			t.Errorf("list_grants of %s: %d grants, want 0: %s", name, len(r.Data["grants"].([]any)), r)
		}
		if r := e.Call(key, "revoke_grant", map[string]any{"grant_id": gid}); r.Status != http.StatusForbidden && r.Status != http.StatusNotFound {
			t.Errorf("revoke_grant by %s: status = %d, want %d or %d: %s", name, r.Status, http.StatusForbidden, http.StatusNotFound, r)
		}
	}
	clock.Advance(time.Hour)
	if s := e.MustOK(agent, "confirm_action", with("run_id", "r3")).Data["status"]; s != "pending" {
		t.Fatalf("at the grant's expiry: status = %v, want pending", s)
	}
}

// TestAttackGrantRevokedThenConfirm: revoke, then confirm_action at once.
func TestAttackGrantRevokedThenConfirm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	call := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "run_id": "r1"}
	rid := e.MustOK(agent, "confirm_action", call).Data["request_id"].(string)
	g := e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "session"}})
	gid := g.Data["grant"].(map[string]any)["grant_id"]
	call["action_id"] = "a1"
	if s := e.MustOK(agent, "confirm_action", call).Data["status"]; s != "approved" {
		t.Fatalf("inside the grant: status = %v, want approved", s)
	}
	e.MustOK(alice, "revoke_grant", map[string]any{"grant_id": gid})
	call["action_id"] = "a2"
	if s := e.MustOK(agent, "confirm_action", call).Data["status"]; s != "pending" {
		t.Fatalf("after revocation: status = %v, want pending", s)
	}
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// TestAttackStepUpEditAndGrantPaths: a set_dose under step-up, approved
// from a console session without a fresh sign-in (a one-time sign-in
// link) through the paths beside Approve: the edit form, a forged grant
// on the Approve form, and an API key's edit. Each is refused with the
// step-up sentence, and nothing is recorded.
func TestAttackStepUpEditAndGrantPaths(t *testing.T) {
	t.Parallel()
	m, _ := stepUpProvider(t)
	e := newTestEnv(t, `tools:
  - name: set_dose
    category: mutating
    schema: {type: object, required: [drug, dose], properties: {drug: {type: string}, dose: {type: string}}}
step_up:
  tools: [set_dose]
principals:
  - {name: dr_web, role: member, web: w@x.example}
web:
  oidc:
    issuer: `+m.Issuer()+`
    client_id: `+m.ClientID+`
    client_secret_env: OIDC_SECRET
`)
	e.env["OIDC_SECRET"] = m.ClientSecret
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}).Data["request_id"].(string)

	if r := e.Call(alice, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "2.5mg"}}); r.Status != http.StatusForbidden || !strings.Contains(r.Text+r.Error, "step-up required") {
		t.Fatalf("an API key's edit of a step-up request: status = %d, want %d saying %q: %s", r.Status, http.StatusForbidden, "step-up required", r)
	}
	c := signInHTTP(t, e, "dr_web")
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/requests/"+rid, nil)
	itemPath := resp.Header.Get("Location")
	_, page := webDo(t, c, "GET", e.URL+itemPath, nil)
	csrf, nonce := csrfRE.FindStringSubmatch(page), nonceRE.FindStringSubmatch(page)
	if csrf == nil || nonce == nil {
		t.Fatalf("no forms on the item page (want a csrf and a nonce input):\n%s", page)
	}
	if strings.Contains(page, `name="basis"`) {
		t.Fatalf("the edit form is offered to a session that cannot approve without a fresh sign-in (want no %q in the page):\n%s", `name="basis"`, page)
	}
	for name, form := range map[string]url.Values{
		"edit":  {"csrf": {csrf[1]}, "nonce": {nonce[1] + "e"}, "action": {"edit"}, "edit_0": {"2.5mg"}, "edit_1": {"apixaban"}},
		"grant": {"csrf": {csrf[1]}, "nonce": {nonce[1]}, "action": {"approve"}, "grant": {"once"}},
	} {
		resp, _ := webDo(t, c, "POST", e.URL+itemPath+"/decide", form)
		_, back := webDo(t, c, "GET", e.URL+resp.Header.Get("Location"), nil)
		if !strings.Contains(back, "step-up required") {
			t.Errorf("%s from a session without a fresh sign-in: %d %s, want the page to say %q:\n%s", name, resp.StatusCode, resp.Header.Get("Location"), "step-up required", back)
		}
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "pending" || st.Data["edited"] != false || st.Data["tally"] != "0 of 1 approvals" {
		t.Fatalf("after the refused paths: status = %v, edited = %v, tally = %v, want pending, false, %q: %s", st.Data["status"], st.Data["edited"], st.Data["tally"], "0 of 1 approvals", st)
	}
}

// TestAttackEditedValuesStayData: an edited memory value with a
// bidirectional override (which would show "apixaban 2.5mg twice daily"
// while holding other text), a zero-width or a control character is a
// 400 on value, and nothing is recorded.
func TestAttackEditedValuesStayData(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, memoryConfig)
	agent := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42")
	member := e.CreateKey("dr_smith", "member")
	fhir := e.CreateKey("fhir", "agent")
	e.Start()
	p42 := map[string]any{"user_id": "patient_42"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range p42 {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	e.MustOK(fhir, "remember", with("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir"))
	e.MustOK(agent, "remember", with("subject", "meds", "value", "apixaban 5mg twice daily", "replaces", "warfarin"))
	for _, v := range []string{"apixaban 2.5mg \u202eylaid eciwt", "apixaban 2.5mg\u200b twice daily", "apixaban 2.5mg\x00"} {
		if r := e.Call(member, "confirm_change", with("memory_id", 2, "value", v)); r.Status != http.StatusBadRequest || r.Field != "value" {
			t.Errorf("edited value %q: status = %d, field = %q, want %d on %q: %s", v, r.Status, r.Field, http.StatusBadRequest, "value", r)
		}
	}
}

// TestAttackStaleSlackApproveAfterEdit: dr_smith clicks Approve on the
// card Slack shows, but bob's edit (5mg -> 50mg) landed first and the
// card's update had not reached dr_smith's client. The click carries the
// version the card showed, so it is refused privately ("changed after it
// was shown to you") and does not count for 50mg. A forged click (bad
// signature) is a 401 and records nothing. The updated card's Approve
// counts.
func TestAttackStaleSlackApproveAfterEdit(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, strings.Replace(slackConfig(f, "http"), "tools:\n", `tools:
  - name: set_dose
    category: mutating
    quorum: 2
    schema: {type: object, required: [drug, dose], properties: {drug: {type: string}, dose: {type: string}}}
    channels: [ops]
`, 1))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}).Data["request_id"].(string)
	waitFor(t, "the card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	post := f.Calls("chat.postMessage")[0]
	item, stale := slackItemID(t, post), slackApproveValue(t, post.Form.Get("blocks"))

	e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "50mg"}})
	waitFor(t, "the card's update", func() bool { return len(f.Calls("chat.update")) >= 1 })
	fresh := slackApproveValue(t, f.Calls("chat.update")[len(f.Calls("chat.update"))-1].Form.Get("blocks"))
	if fresh == stale {
		t.Fatalf("the updated card's Approve carries the same version as before the edit: %s, want a new one", fresh)
	}

	click := func(value, secret string) int {
		p, _ := json.Marshal(map[string]any{
			"type": "block_actions", "trigger_id": "trig-" + value + secret, "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
			"container": map[string]any{"type": "message", "channel_id": post.Form.Get("channel"), "message_ts": post.TS},
			"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + item, "value": value, "action_ts": "1.1"}},
		})
		code, _ := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(p)}}, secret)
		return code
	}
	if code := click(fresh, "not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("a forged click answered %d, want %d", code, http.StatusUnauthorized)
	}
	if code := click(stale, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("the stale click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the private refusal", func() bool { return len(f.Calls("chat.postEphemeral")) == 1 })
	if txt := f.Calls("chat.postEphemeral")[0].Form.Get("text"); !strings.Contains(txt, "changed after it was shown to you") {
		t.Fatalf("the stale click's answer = %q, want it to contain %q", txt, "changed after it was shown to you")
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "pending" || st.Data["tally"] != "1 of 2 approvals: bob" {
		t.Fatalf("a stale Slack click counted for the edit it never showed: status = %v, tally = %v, want pending, %q: %s", st.Data["status"], st.Data["tally"], "1 of 2 approvals: bob", st)
	}
	if code := click(fresh, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("the fresh click answered %d, want %d", code, http.StatusOK)
	}
	waitFor(t, "the approval", func() bool {
		return e.MustOK(agent, "action_status", map[string]any{"request_id": rid}).Data["status"] == "approved"
	})
}

// slackApproveValue is the value of the Approve button in a card's blocks.
func slackApproveValue(t *testing.T, blocks string) string {
	t.Helper()
	m := regexp.MustCompile(`"action_id":"countersign\.approve","text":\{[^}]*\},"value":"([^"]+)"|"action_id":"countersign\.approve"[^}]*?"value":"([^"]+)"`).FindStringSubmatch(blocks)
	if m == nil {
		t.Fatalf("no Approve button (want a countersign.approve action with a value):\n%s", blocks)
	}
	return m[1] + m[2]
}

// TestAttackGrantAfterReconfig: a session grant made while the tool
// allowed session grants stops applying after a restart with a config
// that no longer allows them (the store keeps the grant, the new config
// decides).
func TestAttackGrantAfterReconfig(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackConfig)
	agent := e.CreateKey("deploy_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	call := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "run_id": "r1"}
	rid := e.MustOK(agent, "confirm_action", call).Data["request_id"].(string)
	e.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "session"}})
	call["action_id"] = "a1"
	if s := e.MustOK(agent, "confirm_action", call).Data["status"]; s != "approved" {
		t.Fatalf("inside the grant: status = %v, want approved", s)
	}
	e.Stop()
	raw, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := strings.Replace(string(raw), "allow: [once, session, duration]", "allow: [once]", 1)
	if narrowed == string(raw) {
		t.Fatal("the config was not narrowed")
	}
	if err := os.WriteFile(e.cfg, []byte(narrowed), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Start()
	call["action_id"] = "a2"
	if s := e.MustOK(agent, "confirm_action", call).Data["status"]; s != "pending" {
		t.Fatalf("a session grant after the tool stopped allowing them: status = %v, want pending", s)
	}
}

// TestAttackDiscordEditFromUnmappedUser: a Discord user who maps to no
// principal submits the edit modal of a set_dose request (its custom id
// copied from a mapped user's form): refused privately, nothing recorded.
func TestAttackDiscordEditFromUnmappedUser(t *testing.T) {
	t.Parallel()
	d := newDiscordEnvConfig(t, "http", withSetDose)
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	stranger := discordtest.Clicker{UserID: "999", GuildID: discordGuild}
	req := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs})
	reqID, _ := req.Data["request_id"].(string)
	msg, item := d.posted(discordOps, "set\\\\_dose")
	modal := d.click("e1", smith, discordOps, msg, "cs:edit:"+item)
	data, _ := modal["data"].(map[string]any)
	custom, _ := data["custom_id"].(string)
	if !strings.HasPrefix(custom, "cs:edited:"+item+":") {
		t.Fatalf("no edit modal: custom_id = %q, want the prefix %q: %v", custom, "cs:edited:"+item+":", modal)
	}
	status, resp := discordtest.Post(t, d.URL+"/discord/interactions", d.key, time.Now(), discordtest.Marshal(t,
		discordtest.SubmitForm("e2", stranger, discordOps, msg, custom, map[string]string{"e0": "50mg", "e1": "apixaban"})))
	if status != 200 || !strings.Contains(fmt.Sprint(resp), "not mapped") {
		t.Fatalf("the unmapped user's edit answered %d %v, want 200 saying %q", status, resp, "not mapped")
	}
	if st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || st.Data["edited"] != false {
		t.Fatalf("after the unmapped user's edit: status = %v, edited = %v, want pending, false: %s", st.Data["status"], st.Data["edited"], st)
	}
}

// TestAttackGrantAcrossReplicas: two servers on one PostgreSQL database. A
// grant made on one approves on the other; revoked on the first, the very
// next confirm_action on the second waits for a person; a once grant raced
// from both replicas approves exactly one call.
func TestAttackGrantAcrossReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and two servers")
	}
	a := pgEnv(t, testDSN(t), attackConfig)
	agent := a.CreateKey("deploy_bot", "agent")
	alice := a.CreateKey("alice", "member")
	a.Start()
	b := &testEnv{t: t, dir: a.dir, cfg: a.cfg, env: a.env}
	t.Cleanup(b.Stop)
	b.Start()

	call := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "run_id": "r1"}
	rid := a.MustOK(agent, "confirm_action", call).Data["request_id"].(string)
	gid := a.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "session"}}).Data["grant"].(map[string]any)["grant_id"]
	call["action_id"] = "b1"
	if s := b.MustOK(agent, "confirm_action", call).Data["status"]; s != "approved" {
		t.Fatalf("the grant on the other replica: status = %v, want approved", s)
	}
	a.MustOK(alice, "revoke_grant", map[string]any{"grant_id": gid})
	call["action_id"] = "b2"
	if s := b.MustOK(agent, "confirm_action", call).Data["status"]; s != "pending" {
		t.Fatalf("the other replica after revocation: status = %v, want pending", s)
	}

	once := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}}
	rid = a.MustOK(agent, "confirm_action", once).Data["request_id"].(string)
	a.MustOK(alice, "approve_action", map[string]any{"request_id": rid, "grant": map[string]any{"kind": "once"}})
	var wg sync.WaitGroup
	statuses := make([]string, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := []*testEnv{a, b}[i%2]
			c := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}, "action_id": fmt.Sprintf("once-%d", i)}
			statuses[i], _ = e.Call(agent, "confirm_action", c).Data["status"].(string)
		}()
	}
	wg.Wait()
	if n := strings.Count(strings.Join(statuses, " "), "approved"); n != 1 {
		t.Fatalf("%d calls approved under a once grant across replicas, want 1: %v", n, statuses)
	}
}

// TestAttackStepUpEditFromDiscord: Edit & approve on a step-up request in
// Discord, by a person who may approve it: the edit never lands without a
// fresh sign-in; the answer is the private one-time step-up link, and
// nothing is recorded.
func TestAttackStepUpEditFromDiscord(t *testing.T) {
	t.Parallel()
	fake := discordtest.New(t, discordToken)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := withSetDose(strings.Replace(discordConfig(fake, "http"), "    discord: \"111\"\n", "    discord: \"111\"\n    web: dr.smith@hospital.example\n", 1)) + `step_up:
  tools: [set_dose]
web:
  public_url: https://countersign.hospital.example
  oidc:
    issuer: https://login.hospital.example
    client_id: countersign
    client_secret_env: OIDC_SECRET
`
	e := newTestEnv(t, cfg)
	e.env["DISCORD_BOT_TOKEN"], e.env["DISCORD_PUBLIC_KEY"], e.env["OIDC_SECRET"] = discordToken, hex.EncodeToString(pub), "s3cret"
	d := &discordEnv{testEnv: e, fake: fake, key: priv}
	d.agent = e.CreateKey("intake_agent", "agent")
	e.Start()
	smith := discordtest.Clicker{UserID: "111", GuildID: discordGuild}
	reqID := d.MustOK(d.agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": doseArgs}).Data["request_id"].(string)
	msg, item := d.posted(discordOps, "set\\\\_dose")
	answer := d.click("su1", smith, discordOps, msg, "cs:edit:"+item)
	if discordRespType(answer) == 9 { // the form opened: its submission is what counts
		data, _ := answer["data"].(map[string]any)
		custom, _ := data["custom_id"].(string)
		_, answer = discordtest.Post(t, d.URL+"/discord/interactions", d.key, time.Now(), discordtest.Marshal(t,
			discordtest.SubmitForm("su2", smith, discordOps, msg, custom, map[string]string{"e0": "2.5mg", "e1": "apixaban"})))
	}
	if text := fmt.Sprint(answer); discordFlags(answer)&64 == 0 || !strings.Contains(text, "https://countersign.hospital.example/ui/stepup?t=") {
		t.Fatalf("Edit & approve on a step-up request answered %v, want the private step-up link", answer)
	}
	if st := d.MustOK(d.agent, "action_status", map[string]any{"request_id": reqID}); st.Data["status"] != "pending" || st.Data["edited"] != false {
		t.Fatalf("after the edit without step-up: status = %v, edited = %v, want pending, false: %s", st.Data["status"], st.Data["edited"], st)
	}
}

// TestAttackEditedValuesInSlackCard: an approver's edit is shown to the
// channel, so it must not ping or reorder: "<!channel>", "@everyone" and a
// right-to-left override in an edited dose reach the updated card inert.
func TestAttackEditedValuesInSlackCard(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, strings.Replace(slackConfig(f, "http"), "tools:\n", `tools:
  - name: set_dose
    category: mutating
    quorum: 2
    schema: {type: object, required: [drug, dose], properties: {drug: {type: string}, dose: {type: string}}}
    channels: [ops]
`, 1))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	bob := e.CreateKey("bob", "member")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}).Data["request_id"].(string)
	waitFor(t, "the card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	e.MustOK(bob, "approve_action", map[string]any{"request_id": rid, "arguments": map[string]any{"drug": "apixaban", "dose": "<!channel> @everyone 50mg \u202egm5"}})
	waitFor(t, "the card's update", func() bool { return len(f.Calls("chat.update")) >= 1 })
	up := f.Calls("chat.update")[len(f.Calls("chat.update"))-1]
	blocks := up.Form.Get("blocks") + up.Form.Get("text")
	if !strings.Contains(blocks, "50mg") {
		t.Fatalf("the update does not show the edit (want %q in it):\n%s", "50mg", blocks)
	}
	for _, bad := range []string{"<!channel>", "@everyone", "\u202e"} {
		if strings.Contains(blocks, bad) {
			t.Errorf("the updated card carries %q, want it absent:\n%s", bad, blocks)
		}
	}
	// The override is shown, as its escape, rather than silently dropped:
	// the reviewer sees that the value holds more than it seems to
	// (bot.EscapeInvisible). In the blocks' JSON the shown backslash is
	// itself escaped.
	if !strings.Contains(blocks, `\\u202e`) {
		t.Errorf("the updated card does not show the override as \\u202e (want %s in it):\n%s", `\\u202e`, blocks)
	}
}
