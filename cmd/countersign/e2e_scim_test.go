package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

const e2eSCIMToken = "scim-e2e-token-0123456789abcdef0123456789abcdef"

// scimDo sends one SCIM request with the bearer token (tok "" sends
// none) and returns the status and the decoded body (nil when empty).
func scimDo(t *testing.T, base, tok, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/scim+json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: not JSON (%d): %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out
}

// jsonDoc parses a request body written as JSON, as an identity provider
// sends it.
func jsonDoc(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON: %v\n%s", err, s)
	}
	return m
}

func scimConfig(extra string) string {
	return `tools:
  - name: order_medication
    category: mutating
    approvers: {roles: [member]}
principals:
  - name: dr_smith
    role: member
    slack: T1/U0123ABC
    email: dr.smith@hospital.example
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
` + extra
}

// auditActions are the audit log's entries as "action: detail".
func scimAudit(t *testing.T, e *testEnv, admin string) []string {
	t.Helper()
	r := e.MustOK(admin, "audit_log", map[string]any{"limit": 200})
	var out []string
	entries, _ := r.Data["entries"].([]any)
	for _, en := range entries {
		m, _ := en.(map[string]any)
		out = append(out, fmt.Sprintf("%v: %v", m["action"], m["detail"]))
	}
	return out
}

func hasEntry(entries []string, prefix, contains string) bool {
	for _, e := range entries {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, contains) {
			return true
		}
	}
	return false
}

// TestSCIMOktaSequence plays what Okta sends when an app is assigned to a
// person, the person is deactivated, and a group is pushed: the user
// looked up by filter, created (linked to the principal config.yaml
// declares for their email), PATCH replace {active: false} (suspended:
// audited), PUT back to active (reinstated), a group created and its
// membership PATCHed (remove members[value eq …], add members).
func TestSCIMOktaSequence(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, scimConfig(""))
	e.env["COUNTERSIGN_SCIM_TOKEN"] = e2eSCIMToken
	admin := e.CreateKey("root", "admin")
	e.Start()
	base := e.URL + "/scim/v2"

	// No token, a wrong one: 401, nothing written.
	if st, _ := scimDo(t, base, "", "GET", "/Users", nil); st != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", st)
	}
	if st, _ := scimDo(t, base, "wrong-token", "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"mallory@hospital.example"}`)); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401", st)
	}

	// Okta first asks whether the user exists.
	st, list := scimDo(t, base, e2eSCIMToken, "GET", "/Users?filter="+url.QueryEscape(`userName eq "dr.smith@hospital.example"`)+"&startIndex=1&count=100", nil)
	if st != 200 || list["totalResults"] != float64(0) {
		t.Fatalf("lookup before create: %d %v, want 200 with totalResults 0", st, list)
	}
	st, user := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
  "userName": "dr.smith@hospital.example",
  "name": {"givenName": "Jane", "familyName": "Smith"},
  "emails": [{"primary": true, "value": "dr.smith@hospital.example", "type": "work"}],
  "displayName": "Jane Smith",
  "locale": "en-US",
  "externalId": "00ujl29u0le5T6Aj10h7",
  "groups": [],
  "password": "1mz050nq",
  "active": true
}`))
	if st != http.StatusCreated || user["id"] == nil || user["userName"] != "dr.smith@hospital.example" || user["active"] != true {
		t.Fatalf("create: %d %v, want 201 of an active user with an id and userName %q", st, user, "dr.smith@hospital.example")
	}
	if _, kept := user["password"]; kept {
		t.Fatalf("the created user holds the password Okta sent: %v", user)
	}
	id := user["id"].(string)
	st, list = scimDo(t, base, e2eSCIMToken, "GET", "/Users?filter="+url.QueryEscape(`userName eq "dr.smith@hospital.example"`), nil)
	if res, _ := list["Resources"].([]any); st != 200 || list["totalResults"] != float64(1) || len(res) != 1 || res[0].(map[string]any)["id"] != id {
		t.Fatalf("lookup after create: %d %v, want 200 with the one user %s", st, list, id)
	}
	// The same userName again: 409.
	if st, body := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"DR.SMITH@hospital.example"}`)); st != http.StatusConflict {
		t.Fatalf("a second user with the same userName: %d %v, want 409", st, body)
	}

	// Deactivation, as Okta sends it.
	st, user = scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+id, jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
  "Operations": [{"op": "replace", "value": {"active": false}}]
}`))
	if st != 200 || user["active"] != false {
		t.Fatalf("PATCH active false: %d %v, want 200 with active false", st, user)
	}
	entries := scimAudit(t, e, admin)
	if !hasEntry(entries, "principal_suspended", `"dr_smith" suspended from approving (scim: deactivated in the organisation's directory`) {
		t.Fatalf("no suspension of dr_smith (the config principal the email names) in the audit log:\n%s", strings.Join(entries, "\n"))
	}
	// Reactivation by PUT, as Okta does when the app is reassigned.
	st, user = scimDo(t, base, e2eSCIMToken, "PUT", "/Users/"+id, jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
  "id": "`+id+`",
  "userName": "dr.smith@hospital.example",
  "name": {"givenName": "Jane", "familyName": "Smith"},
  "emails": [{"primary": true, "value": "dr.smith@hospital.example", "type": "work"}],
  "active": true
}`))
	if st != 200 || user["active"] != true {
		t.Fatalf("PUT active true: %d %v, want 200 with active true", st, user)
	}
	if entries := scimAudit(t, e, admin); !hasEntry(entries, "suspension_lifted", `"dr_smith" may approve again (was suspended: scim: deactivated in the organisation's directory`) {
		t.Fatalf("no reinstatement in the audit log:\n%s", strings.Join(entries, "\n"))
	}

	// A second person, whom config.yaml does not declare: a principal the
	// directory owns, of the role scim.role gives (member).
	st, other := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ph.lee@hospital.example","emails":[{"value":"ph.lee@hospital.example","type":"work"}],"active":true}`))
	if st != http.StatusCreated {
		t.Fatalf("create ph.lee: %d %v, want 201", st, other)
	}
	ps := e.MustOK(admin, "list_principals", map[string]any{})
	if !strings.Contains(ps.String(), `"name":"ph.lee@hospital.example"`) || !strings.Contains(ps.String(), `"kind":"person"`) {
		t.Fatalf("the directory's principal is not listed: %s, want %q of kind person", ps, "ph.lee@hospital.example")
	}

	// Group push: create, then membership changes.
	st, group := scimDo(t, base, e2eSCIMToken, "POST", "/Groups", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"pharmacists","members":[{"value":"`+id+`","display":"dr.smith@hospital.example"}]}`))
	if st != http.StatusCreated {
		t.Fatalf("create group: %d %v, want 201", st, group)
	}
	gid := group["id"].(string)
	st, group = scimDo(t, base, e2eSCIMToken, "PATCH", "/Groups/"+gid, jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
  "Operations": [
    {"op": "remove", "path": "members[value eq \"`+id+`\"]"},
    {"op": "add", "path": "members", "value": [{"value": "`+other["id"].(string)+`", "display": "ph.lee@hospital.example"}]}
  ]
}`))
	members, _ := group["members"].([]any)
	if st != 200 || len(members) != 1 || members[0].(map[string]any)["value"] != other["id"] {
		t.Fatalf("PATCH membership: %d %v, want 200 with the one member %v", st, group, other["id"])
	}
	if entries := scimAudit(t, e, admin); !hasEntry(entries, "scim_group_updated", "(pharmacists) updated: 1 members") {
		t.Fatalf("no group update in the audit log:\n%s", strings.Join(entries, "\n"))
	}
	// A member that was never provisioned: 400, naming it.
	if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Groups/"+gid, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"add","path":"members","value":[{"value":"nobody-1"}]}]}`)); st != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["detail"]), "nobody-1") {
		t.Fatalf("an unknown member: %d %v, want 400 naming nobody-1 in detail", st, body)
	}
}

// TestSCIMEntraSequence plays what Microsoft Entra ID's provisioning
// service sends: a filter on userName, the create with the enterprise
// extension, PATCH Replace of several attributes ending with active false
// (capitalised ops, a filtered email path), a group created and its
// members added and removed by value (Entra's remove form), and a
// DELETE.
func TestSCIMEntraSequence(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, scimConfig(""))
	e.env["COUNTERSIGN_SCIM_TOKEN"] = e2eSCIMToken
	admin := e.CreateKey("root", "admin")
	e.Start()
	base := e.URL + "/scim/v2"

	st, list := scimDo(t, base, e2eSCIMToken, "GET", "/Users?filter="+url.QueryEscape(`userName eq "nurse.kim@hospital.example"`), nil)
	if st != 200 || list["totalResults"] != float64(0) {
		t.Fatalf("lookup: %d %v, want 200 with totalResults 0", st, list)
	}
	st, user := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User", "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
  "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
  "userName": "nurse.kim@hospital.example",
  "active": true,
  "emails": [{"primary": true, "type": "work", "value": "nurse.kim@hospital.example"}],
  "meta": {"resourceType": "User"},
  "name": {"formatted": "Min Kim", "familyName": "Kim", "givenName": "Min"},
  "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "Ward 7"},
  "roles": []
}`))
	if st != http.StatusCreated || user["externalId"] != "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef" {
		t.Fatalf("create: %d %v, want 201 with externalId %q", st, user, "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef")
	}
	id := user["id"].(string)
	st, user = scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+id, jsonDoc(t, `{
  "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
  "Operations": [
    {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "min.kim@hospital.example"},
    {"op": "Replace", "path": "name.familyName", "value": "Kim-Lee"},
    {"op": "Replace", "path": "active", "value": false}
  ]
}`))
	emails, _ := user["emails"].([]any)
	name, _ := user["name"].(map[string]any)
	if st != 200 || user["active"] != false || len(emails) != 1 || emails[0].(map[string]any)["value"] != "min.kim@hospital.example" || name["familyName"] != "Kim-Lee" || name["givenName"] != "Min" {
		t.Fatalf("PATCH: %d %v, want 200, active false, the one email min.kim@hospital.example, name Min Kim-Lee", st, user)
	}
	// An older Entra application sends active as the string "False":
	// refused, so nothing is read as a boolean it is not.
	if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+id, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"Replace","path":"active","value":"True"}]}`)); st != http.StatusBadRequest {
		t.Fatalf("active as a string: %d %v, want 400", st, body)
	}
	entries := scimAudit(t, e, admin)
	if !hasEntry(entries, "principal_suspended", `"nurse.kim@hospital.example" suspended from approving (scim:`) {
		t.Fatalf("no suspension of the directory's principal:\n%s", strings.Join(entries, "\n"))
	}

	st, group := scimDo(t, base, e2eSCIMToken, "POST", "/Groups", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"externalId":"60f1bb27-2e1e-402d-bcc4-ec999564a194","displayName":"Ward 7 nurses","members":[]}`))
	if st != http.StatusCreated {
		t.Fatalf("create group: %d %v, want 201", st, group)
	}
	gid := group["id"].(string)
	patch := func(op string) map[string]any {
		t.Helper()
		st, g := scimDo(t, base, e2eSCIMToken, "PATCH", "/Groups/"+gid, jsonDoc(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"`+op+`","path":"members","value":[{"$ref":null,"value":"`+id+`"}]}]}`))
		if st != 200 && st != 204 {
			t.Fatalf("PATCH %s members: %d %v, want 200 or 204", op, st, g)
		}
		return g
	}
	if g := patch("Add"); len(g["members"].([]any)) != 1 {
		t.Fatalf("after Add: %v, want 1 member", g)
	}
	if g := patch("Remove"); len(g["members"].([]any)) != 0 {
		t.Fatalf("after Remove by value: %v, want no members", g)
	}
	// Entra deletes a user it no longer provisions: the directory's
	// principal is revoked, and the person stays suspended.
	if st, body := scimDo(t, base, e2eSCIMToken, "DELETE", "/Users/"+id, nil); st != http.StatusNoContent {
		t.Fatalf("DELETE: %d %v, want 204", st, body)
	}
	if st, _ := scimDo(t, base, e2eSCIMToken, "GET", "/Users/"+id, nil); st != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %d, want 404", st)
	}
	ps := e.MustOK(admin, "list_principals", map[string]any{})
	if !strings.Contains(ps.String(), `"name":"nurse.kim@hospital.example"`) || !strings.Contains(ps.String(), `"revoked":true`) {
		t.Fatalf("the deleted user's principal: %s, want %q listed, revoked", ps, "nurse.kim@hospital.example")
	}
}

// TestSCIMDeactivationEndsGrantsAndSessions: dr_smith holds an API key
// (a stored person principal under the name config.yaml declares), made a
// standing grant with it, and is signed in to the console. The directory
// deactivates them (Okta's PATCH): at once the grant approves nothing (the
// next call waits for a person), their console session is ended on its
// next request, and their key's approval is refused by the one rule,
// saying why; all audited. Reactivated, the key approves again, and the
// grant, revoked by the deactivation, stays revoked.
func TestSCIMDeactivationEndsGrantsAndSessions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, `tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [duration]}
principals:
  - name: dr_smith
    role: member
    web: dr.smith@hospital.example
    email: dr.smith@hospital.example
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`)
	e.env["COUNTERSIGN_SCIM_TOKEN"] = e2eSCIMToken
	agent := e.CreateKey("deploy-bot", "agent")
	smith := e.CreateKey("dr_smith", "member", "--kind", "person")
	admin := e.CreateKey("root", "admin")
	e.Start()
	call := map[string]any{"user_id": "ward7", "tool": "restart_service", "arguments": map[string]any{"service": "payments"}}
	first := e.MustOK(agent, "confirm_action", call)
	e.MustOK(smith, "approve_action", map[string]any{"request_id": first.Data["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h"}})
	if r := e.MustOK(agent, "confirm_action", call); r.Data["status"] != "approved" {
		t.Fatalf("under the grant: %s, want approved", r)
	}
	web := signInHTTP(t, e, "dr_smith")
	if resp, body := webDo(t, web, "GET", e.URL+"/ui/", nil); resp.StatusCode != 200 || !strings.Contains(body, "dr_smith") {
		t.Fatalf("the console before the deactivation: %d, want 200 naming dr_smith", resp.StatusCode)
	}

	base := e.URL + "/scim/v2"
	st, user := scimDo(t, base, e2eSCIMToken, "POST", "/Users", jsonDoc(t, `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"dr.smith@hospital.example","active":true}`))
	if st != http.StatusCreated {
		t.Fatalf("SCIM create: %d %v, want 201", st, user)
	}
	uid := user["id"].(string)
	setActive := func(active bool) {
		t.Helper()
		if st, body := scimDo(t, base, e2eSCIMToken, "PATCH", "/Users/"+uid, jsonDoc(t, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","value":{"active":%v}}]}`, active))); st != 200 || body["active"] != active {
			t.Fatalf("SCIM active %v: %d %v, want 200 with active %v", active, st, body, active)
		}
	}
	setActive(false)

	pending := e.MustOK(agent, "confirm_action", call)
	if pending.Data["status"] != "pending" {
		t.Fatalf("the grant of a deactivated person still approved: %s, want pending", pending)
	}
	resp, _ := webDo(t, web, "GET", e.URL+"/ui/", nil)
	if resp.StatusCode == 200 {
		t.Fatal("the console session of a deactivated person still serves pages")
	}
	r := e.Call(smith, "approve_action", map[string]any{"request_id": pending.Data["request_id"]})
	if r.Status != http.StatusForbidden || !strings.Contains(r.String(), "dr_smith [prin_") || !strings.Contains(r.String(), "is suspended from approving (scim: deactivated in the organisation's directory, ") {
		t.Fatalf("a deactivated person's approval: %s, want 403 naming %q and saying %q", r, "dr_smith [prin_", "is suspended from approving (scim: deactivated in the organisation's directory, ")
	}
	entries := scimAudit(t, e, admin)
	if !hasEntry(entries, "access_denied", "is suspended") {
		t.Fatalf("the refusal is not audited:\n%s", strings.Join(entries, "\n"))
	}
	if !hasEntry(entries, "grant_revoked", "grant #1") || !hasEntry(entries, "grant_revoked", "dr_smith suspended from approving: scim: deactivated") {
		t.Fatalf("the grant's revocation is not audited:\n%s", strings.Join(entries, "\n"))
	}

	// Reactivated, dr_smith approves again; the grant stays revoked.
	setActive(true)
	if r := e.MustOK(smith, "approve_action", map[string]any{"request_id": pending.Data["request_id"]}); r.Data["status"] != "approved" {
		t.Fatalf("after the reactivation: %s, want approved", r)
	}
	if r := e.MustOK(agent, "confirm_action", call); r.Data["status"] != "pending" {
		t.Fatalf("the grant revoked by the deactivation approved again after the reactivation: %s, want pending", r)
	}
}

// TestIdentityDocs: docs/identity.md works when pasted: each YAML example
// is a config that loads (strict decoding and validation), and its shell
// blocks run clean on a fresh store, printing what their comments promise.
func TestIdentityDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/identity.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
		if _, err := config.Parse([]byte(m[1]), t.TempDir()); err != nil {
			t.Errorf("docs/identity.md, YAML block %d does not load: %v\n%s", i+1, err, strings.TrimSpace(m[1]))
		}
	}
	blocks := docBlocks(t, string(b))
	if len(blocks) < 2 {
		t.Fatalf("docs/identity.md has %d shell blocks, want at least 2; the page changed shape", len(blocks))
	}
	pasteBlocks(t, "docs/identity.md", blocks)
}
