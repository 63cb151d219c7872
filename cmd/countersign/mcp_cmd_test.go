package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/policy"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// wardConfig declares the medication slot of the seeds.
const wardConfig = `memory:
  slots:
    - name: active_medication
      category: active_medication
      verbatim: true
      multi: true
      confirm: true
      aliases: [meds]
  critical_categories: [active_medication]
  trusted_sources: [fhir]
`

// bearerTransport adds a bearer key to every request of the MCP client.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's own client to the server's /mcp with key.
func (e *testEnv) mcpSession(key string) *sdk.ClientSession { return e.mcpSessionVersion(key, "") }

// mcpSessionVersion is mcpSession on protocol revision version ("": the
// SDK's latest).
func (e *testEnv) mcpSessionVersion(key, version string) *sdk.ClientSession {
	e.t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(context.Background(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		e.t.Fatalf("mcp connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpCall(t *testing.T, cs *sdk.ClientSession, tool string, args any) (string, *sdk.CallToolResult) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("mcp %s: %v", tool, err)
	}
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), r
}

func mcpOK(t *testing.T, cs *sdk.ClientSession, tool string, args any) string {
	t.Helper()
	text, r := mcpCall(t, cs, tool, args)
	if r.IsError {
		t.Fatalf("mcp %s: error result %q, want success", tool, text)
	}
	return text
}

func TestMCPOverHTTPServesTheRegistry(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, wardConfig)
	adminKey := e.CreateKey("ops", "admin")
	agentKey := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42")
	memberKey := e.CreateKey("dr_smith", "member")
	e.Start()

	// The tools of GET /v1/tools, each once, with the same schema and
	// the registry's annotations.
	resp, err := http.Get(e.URL + "/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	var api struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"input_schema"`
			Annotations struct {
				ReadOnly    bool `json:"read_only"`
				Destructive bool `json:"destructive"`
				Idempotent  bool `json:"idempotent"`
			} `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&api); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := e.mcpSession(agentKey)
	listed := map[string]*sdk.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if listed[tool.Name] != nil {
			t.Fatalf("%s listed twice, want once", tool.Name)
		}
		listed[tool.Name] = tool
	}
	if len(listed) != len(api.Tools) || len(listed) < 6 {
		t.Fatalf("MCP lists %d tools, want the API's %d (and at least 6)", len(listed), len(api.Tools))
	}
	for _, at := range api.Tools {
		tool := listed[at.Name]
		if tool == nil {
			t.Fatalf("%s missing from MCP", at.Name)
		}
		got, _ := json.Marshal(tool.InputSchema)
		var x, y any
		_ = json.Unmarshal(at.Schema, &x)
		_ = json.Unmarshal(got, &y)
		if a, b := mustMarshal(x), mustMarshal(y); a != b {
			t.Fatalf("%s schema differs:\n mcp %s\n want the API's %s", at.Name, b, a)
		}
		ann := tool.Annotations
		if tool.Description != at.Description || ann.ReadOnlyHint != at.Annotations.ReadOnly || *ann.DestructiveHint != at.Annotations.Destructive || ann.IdempotentHint != at.Annotations.Idempotent {
			t.Fatalf("%s: MCP description %q, annotations %+v; want the API's %q, %+v", at.Name, tool.Description, ann, at.Description, at.Annotations)
		}
	}
	for _, name := range []string{"create_principal", "list_principals", "revoke_principal", "audit_log", "verify_audit", "export_public_key"} {
		if listed[name] == nil {
			t.Fatalf("%s not served", name)
		}
	}
	if !listed["audit_log"].Annotations.ReadOnlyHint || !*listed["revoke_principal"].Annotations.DestructiveHint {
		t.Fatal("annotations lost: want audit_log read-only and revoke_principal destructive")
	}

	// Calls: the HTTP API's text, data as structured content, denials intact.
	text, r := mcpCall(t, cs, "create_principal", map[string]any{"name": "x"})
	if !r.IsError || text != "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("agent create_principal: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it.")
	}
	text, r = mcpCall(t, cs, "audit_log", map[string]any{"user_id": "patient_7"})
	if !r.IsError || text != "Access denied: 'audit_log' targets a memory space outside your assigned scope." {
		t.Fatalf("agent out of scope: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'audit_log' targets a memory space outside your assigned scope.")
	}
	admin := e.mcpSession(adminKey)
	text = mcpOK(t, admin, "create_principal", map[string]any{"name": "fhir", "role": "agent"})
	if !regexp.MustCompile(`^Created principal prin_[0-9a-f]{12} 'fhir' \(role: agent, kind: agent\)\.\n  API key \(shown once — save it now\):\n  cs_sk_\S+\n  Callback signing secret \(shown once; verifies the callbacks of its requests\):\n  whsec_\S+$`).MatchString(text) {
		t.Fatalf("create over MCP = %q, want it to match %s", text, `^Created principal prin_[0-9a-f]{12} 'fhir' \(role: agent, kind: agent\)\.\n  API key \(shown once — save it now\):\n  cs_sk_\S+\n  Callback signing secret \(shown once; verifies the callbacks of its requests\):\n  whsec_\S+$`)
	}
	if got := mcpOK(t, e.mcpSession(memberKey), "verify_audit", nil); !strings.HasPrefix(got, "✓ Audit chain INTACT — ") {
		t.Fatalf("member verify = %q, want prefix %q", got, "✓ Audit chain INTACT — ")
	}
	// The audit trail names the MCP caller.
	log := mcpOK(t, admin, "audit_log", map[string]any{"limit": 3})
	if !strings.Contains(log, "create_principal") || !strings.Contains(log, "by ops [prin_") || !strings.Contains(log, "access_denied") {
		t.Fatalf("audit_log = %s\nwant it to contain %q, %q and %q", log, "create_principal", "by ops [prin_", "access_denied")
	}
	// The HTTP API gives the same text for the same call.
	if h := e.MustOK(adminKey, "export_public_key", nil); h.Text != mcpOK(t, admin, "export_public_key", nil) {
		t.Fatalf("texts differ: HTTP export_public_key = %q, want the same text as over MCP", h.Text)
	}
}

// The warfarin scenario of the seeds, entirely over MCP. It needs the memory
// tools (bot/memorytools).
func TestMCPWarfarinScenario(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, wardConfig)
	fhirKey := e.CreateKey("fhir", "agent")
	agentKey := e.CreateKey("ward_bot", "agent", "--scopes", "patient_42")
	memberKey := e.CreateKey("dr_smith", "member")
	e.Start()
	fhir, agent, member := e.mcpSession(fhirKey), e.mcpSession(agentKey), e.mcpSession(memberKey)
	p42 := func(kv ...any) map[string]any {
		m := map[string]any{"user_id": "patient_42"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	if got := mcpOK(t, fhir, "remember", p42("subject", "active_medication", "value", "warfarin 5mg daily", "source", "fhir")); got != "Stored: [ADD] active_medication = warfarin 5mg daily" {
		t.Fatalf("fhir remember = %q, want %q", got, "Stored: [ADD] active_medication = warfarin 5mg daily")
	}
	if got := mcpOK(t, agent, "remember", p42("subject", "meds", "value", "apixaban 5mg twice daily", "replaces", "warfarin", "text", "Switch her to apixaban 5mg twice daily.")); got != "Stored: [FLAG] active_medication = apixaban 5mg twice daily" {
		t.Fatalf("agent remember = %q, want %q", got, "Stored: [FLAG] active_medication = apixaban 5mg twice daily")
	}
	pending := mcpOK(t, agent, "pending_changes", p42())
	m := regexp.MustCompile(`#(\d+) REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'`).FindStringSubmatch(pending)
	if m == nil {
		t.Fatalf("pending_changes = %q, want it to match %s", pending, `#(\d+) REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'`)
	}
	id := m[1]
	if got := mcpOK(t, agent, "check_before_act", p42("subject", "active_medication")); !strings.HasPrefix(got, "⛔ BLOCKED") {
		t.Fatalf("check while pending = %q, want prefix %q", got, "⛔ BLOCKED")
	}
	if m := e.scrape(); !strings.Contains(m, `countersign_pending_items{kind="memory_change"} 1`) {
		t.Fatalf("metrics while pending lack %s:\n%s", `countersign_pending_items{kind="memory_change"} 1`, m)
	}
	text, r := mcpCall(t, agent, "confirm_change", p42("memory_id", json.Number(id)))
	if !r.IsError || text != "Access denied: 'confirm_change' requires the 'approve' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("agent confirm: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'confirm_change' requires the 'approve' capability; your role(s) ['agent'] do not grant it.")
	}
	if got := mcpOK(t, member, "confirm_change", p42("memory_id", json.Number(id), "decided_by", "the agent says it was approved")); got != "Approved #"+id+": SUPERSEDE active_medication = apixaban 5mg twice daily" {
		t.Fatalf("member confirm = %q, want %q", got, "Approved #"+id+": SUPERSEDE active_medication = apixaban 5mg twice daily")
	}
	if got := mcpOK(t, agent, "check_before_act", p42("subject", "active_medication")); got != "✅ SAFE to act on 'active_medication'.\n  current: active_medication = apixaban 5mg twice daily" {
		t.Fatalf("check after = %q, want %q", got, "✅ SAFE to act on 'active_medication'.\n  current: active_medication = apixaban 5mg twice daily")
	}
	m2 := e.scrape()
	for _, want := range []string{
		`countersign_pending_items{kind="memory_change"} 0`,
		`countersign_decisions_total{outcome="approved",surface="mcp"} 1`,
		`countersign_tool_calls_total{outcome="denied",tool="confirm_change"} 1`,
	} {
		if !strings.Contains(m2, want) {
			t.Fatalf("metrics lack %s:\n%s", want, m2)
		}
	}
	// The approver recorded is the authenticated member.
	trail := mcpOK(t, member, "audit_log", p42())
	if !regexp.MustCompile(`confirm_change +user=patient_42  by dr_smith \[prin_[0-9a-f]+\]`).MatchString(trail) {
		t.Fatalf("trail:\n%s\nwant it to match %s", trail, `confirm_change +user=patient_42  by dr_smith \[prin_[0-9a-f]+\]`)
	}
	if got := mcpOK(t, member, "verify_audit", nil); !strings.HasPrefix(got, "✓ Audit chain INTACT") {
		t.Fatalf("verify = %q, want prefix %q", got, "✓ Audit chain INTACT")
	}
}

func TestMCPRevokedKeyStopsMidSession(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	adminKey := e.CreateKey("ops", "admin")
	e.Start()
	created := e.MustOK(adminKey, "create_principal", map[string]any{"name": "temp", "role": "agent"})
	key, id := created.Data["key"].(string), created.Data["id"].(string)
	cs := e.mcpSession(key)
	if got := mcpOK(t, cs, "export_public_key", nil); !strings.HasPrefix(got, "Ed25519 public key (hex):\n") {
		t.Fatalf("before = %q, want prefix %q", got, "Ed25519 public key (hex):\n")
	}
	if r := e.MustOK(adminKey, "revoke_principal", map[string]any{"principal_id": id}); r.Text != "Revoked "+id+" — its API key no longer works." {
		t.Fatalf("revoke = %q, want %q", r.Text, "Revoked "+id+" — its API key no longer works.")
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "export_public_key"}); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("after revocation: err = %v, want a 401 Unauthorized error", err)
	}
	if r := e.Call(key, "export_public_key", nil); r.Status != http.StatusUnauthorized || !strings.Contains(r.Error, "unknown or revoked API key") {
		t.Fatalf("HTTP after revocation: %s, want status %d and an error containing %q", r, http.StatusUnauthorized, "unknown or revoked API key")
	}
	if r := e.MustOK(adminKey, "revoke_principal", map[string]any{"principal_id": id}); r.Text != "No active principal "+id+" (unknown or already revoked)." {
		t.Fatalf("revoke again = %q, want %q", r.Text, "No active principal "+id+" (unknown or already revoked).")
	}
	list := e.MustOK(adminKey, "list_principals", nil).Text
	if !strings.Contains(list, "✗ "+id+"  temp  [agent]  agent  (disabled)") || !strings.Contains(list, "•") {
		t.Fatalf("list = %q, want it to contain %q and a •", list, "✗ "+id+"  temp  [agent]  agent  (disabled)")
	}
}

func TestMCPRefusesForeignHostsAndLargeBodies(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "http:\n  max_body_bytes: 1024\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	post := func(host, origin string, body []byte) (int, string) {
		req, _ := http.NewRequest("POST", e.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if code, body := post("", "", ping); code != 200 || !strings.Contains(body, `"result"`) {
		t.Fatalf("ping: %d %s, want 200 and a %q", code, body, `"result"`)
	}
	if code, body := post("rebound.example:80", "", ping); code != http.StatusForbidden || !strings.Contains(body, "http.allowed_hosts") {
		t.Fatalf("foreign host: %d %s, want %d and a body containing %q", code, body, http.StatusForbidden, "http.allowed_hosts")
	}
	if code, _ := post("", "http://rebound.example", ping); code != http.StatusForbidden {
		t.Fatalf("foreign origin: status %d, want %d", code, http.StatusForbidden)
	}
	big := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("a", 2048) + `"}}}`)
	if code, body := post("", "", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "request body too large") {
		t.Fatalf("large body: %d %s, want %d and a body containing %q", code, body, http.StatusRequestEntityTooLarge, "request body too large")
	}
	if code, _ := post("", "", []byte(`{not json`)); code != http.StatusBadRequest {
		t.Fatalf("malformed: status %d, want %d", code, http.StatusBadRequest)
	}
	req, _ := http.NewRequest("POST", e.URL+"/mcp", bytes.NewReader(ping))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Request-ID") == "" {
		t.Fatalf("no key: status %d, X-Request-ID %q; want %d and an X-Request-ID", resp.StatusCode, resp.Header.Get("X-Request-ID"), http.StatusUnauthorized)
	}
}

// scrape reads /metrics (no token configured).
func (e *testEnv) scrape() string {
	e.t.Helper()
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// runMCP runs `countersign mcp` with the given arguments and environment on
// pipes, and returns an SDK client session connected to it.
func (e *testEnv) runMCP(args []string, env map[string]string) (*sdk.ClientSession, func() error) {
	e.t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &logtest.Buffer{}
	e.mcpLogs = stderr
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "COUNTERSIGN_DATABASE_URL" {
			return e.env[k] // the store's, when the tests run on PostgreSQL
		}
		return env[k]
	}
	go func() {
		err := run(context.Background(), append([]string{"mcp", "--config", e.cfg}, args...), getenv, inR, outW, stderr)
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "local-agent", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		e.t.Fatalf("connect over stdio: %v\n%s", err, stderr.String())
	}
	stop := func() error {
		cs.Close()
		select {
		case err := <-done:
			if strings.Contains(stderr.String(), "cs_sk_") {
				e.t.Errorf("a key reached the log, want no %q in it: %s", "cs_sk_", stderr.String())
			}
			return err
		case <-time.After(30 * time.Second):
			e.t.Fatalf("countersign mcp did not stop\n%s", stderr.String())
			return nil
		}
	}
	return cs, stop
}

func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	admin := e.CreateKey("ops", "admin")
	agentKey := e.CreateKey("bot", "agent")
	// With an admin key, the caller is that key's principal.
	cs, stop := e.runMCP([]string{"--key", admin}, nil)
	mcpOK(t, cs, "create_principal", map[string]any{"name": "helper", "role": "agent"})
	if log := mcpOK(t, cs, "audit_log", nil); !strings.Contains(log, "create_principal   user=-  by ops [prin_") {
		t.Fatalf("audit = %s\nwant it to contain %q", log, "create_principal   user=-  by ops [prin_")
	}
	if err := stop(); err != nil {
		t.Fatalf("mcp exited with %v", err)
	}

	// auth_required: with a key the caller is that key's principal, looked
	// up on every call.
	if err := appendConfig(e.cfg, "auth_required: true\n"); err != nil {
		t.Fatal(err)
	}
	cs, stop = e.runMCP(nil, map[string]string{"COUNTERSIGN_API_KEY": agentKey})
	if text := mcpOK(t, cs, "verify_audit", nil); !strings.HasPrefix(text, "✓ Audit chain INTACT") {
		t.Fatalf("with env key: verify_audit = %q, want prefix %q", text, "✓ Audit chain INTACT")
	}
	text, r := mcpCall(t, cs, "list_principals", nil)
	if !r.IsError || text != "Access denied: 'list_principals' requires the 'admin' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("agent over stdio: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'list_principals' requires the 'admin' capability; your role(s) ['agent'] do not grant it.")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cs, stop = e.runMCP([]string{"--key", "cs_sk_wrong"}, nil)
	if text, r := mcpCall(t, cs, "verify_audit", nil); !r.IsError || !strings.Contains(text, "unknown or revoked API key") {
		t.Fatalf("bad key: IsError = %v, text = %q; want an error containing %q", r.IsError, text, "unknown or revoked API key")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// auth_required forbids the keyless local agent.
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp", "--config", e.cfg, "--local-agent"}, e.getenv, strings.NewReader(""), io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--local-agent is refused because the config sets auth_required: true") {
		t.Fatalf("--local-agent with auth_required: err = %v, want an error containing %q", err, "--local-agent is refused because the config sets auth_required: true")
	}
}

// Security 19.4: `countersign mcp` with no key acted as "local", an admin
// person. On a shared store it approved another agent's request and minted
// an admin key, and an empty key variable in an MCP host's config granted
// that silently. Now it refuses to start without a key; the keyless local
// agent needs --local-agent, is an agent the decision rule refuses, holds
// no admin capability, and is logged at every call. Played against run()
// on a real store (PostgreSQL under the postgres test engine).
func TestStdioMCPWithoutAKeyNeitherDecidesNorAdministers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, actionsConfig+"mcp:\n  max_call_wait: 1s\n")
	deployBot := e.CreateKey("deploy-bot", "agent")
	alice := e.CreateKey("alice", "member")
	ops := e.CreateKey("ops", "admin")
	cs, stop := e.runMCP(nil, map[string]string{"COUNTERSIGN_API_KEY": deployBot})
	// Pending after max_call_wait: MRTR input_required naming the request.
	_, r := mcpCall(t, cs, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "summary": "restart web"})
	id, _ := r.Meta["io.countersign/pending"].(map[string]any)["request_id"].(string)
	if !r.NeedsInput() || !strings.HasPrefix(id, "req_") {
		t.Fatalf("confirm_action: NeedsInput = %v, pending request_id %q; want input_required naming a req_ id (meta %v, content %v)", r.NeedsInput(), id, r.Meta, r.StructuredContent)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// No key, or an empty variable: the server does not start, and says
	// why. (Before the fix it started as an admin person: the attack is
	// played on whatever answers, and reported.)
	for _, env := range []map[string]string{nil, {"COUNTERSIGN_API_KEY": ""}, {"COUNTERSIGN_API_KEY": "  "}} {
		err := e.attackKeyless(env, id)
		if err == nil || !strings.Contains(err.Error(), "mcp: no API key: pass --key or set COUNTERSIGN_API_KEY") || !strings.Contains(err.Error(), "--local-agent") {
			t.Fatalf("env %v: run returned %v, want the refusal to start without a key", env, err)
		}
	}

	// --local-agent: the attack of 19.4 is refused at every step.
	cs, stop = e.runMCP([]string{"--local-agent"}, nil)
	text, r := mcpCall(t, cs, "approve_action", map[string]any{"request_id": id})
	if !r.IsError || text != "Access denied: 'approve_action' requires the 'approve' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("approve as the local agent: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'approve_action' requires the 'approve' capability; your role(s) ['agent'] do not grant it.")
	}
	// Were its role ever to hold approve, the one decision rule would still
	// refuse it: it is an agent, not a person.
	if got := bot.LocalAgent().MayDecide(policy.Decidable{Ref: id}); got == nil || got.Check != policy.CheckPerson || !strings.HasPrefix(got.Message, "Access denied: local [local] is an agent principal.") {
		t.Fatalf("the decision rule on the local agent: %+v, want a %v refusal", got, policy.CheckPerson)
	}
	text, r = mcpCall(t, cs, "create_principal", map[string]any{"name": "backdoor", "role": "admin"})
	if !r.IsError || text != "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it." {
		t.Fatalf("create_principal as the local agent: IsError = %v, text = %q; want the error %q", r.IsError, text, "Access denied: 'create_principal' requires the 'admin' capability; your role(s) ['agent'] do not grant it.")
	}
	// It still does an agent's work: propose, and read what it proposed.
	_, st := mcpCall(t, cs, "action_status", map[string]any{"request_id": id})
	if st.IsError || st.StructuredContent.(map[string]any)["status"] != "pending" {
		t.Fatalf("action_status as the local agent: IsError = %v, %v; want success with status %q", st.IsError, st.StructuredContent, "pending")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	logs := e.mcpLogs.String()
	if n := strings.Count(logs, `msg="mcp: a call as the keyless local agent" principal="local [local]"`); n != 3 {
		t.Fatalf("the local agent's calls are logged %d times, want 3:\n%s", n, logs)
	}
	if !strings.Contains(logs, "serving without a key as the local agent local [local] (--local-agent)") {
		t.Fatalf("no warning at start, want %q in:\n%s", "serving without a key as the local agent local [local] (--local-agent)", logs)
	}

	// Nothing was decided, and no key was minted: a person still decides.
	e.Start()
	if got := e.MustOK(alice, "action_status", map[string]any{"request_id": id}); got.Data["status"] != "pending" {
		t.Fatalf("after the attack: %s, want status %q", got, "pending")
	}
	list := e.MustOK(ops, "list_principals", map[string]any{})
	if strings.Contains(list.Text, "backdoor") {
		t.Fatalf("a principal was minted, want no %q in: %s", "backdoor", list.Text)
	}
}

// attackKeyless runs `countersign mcp` with env and no --key, and returns
// how run ended. If it serves instead, it plays the attack of security
// 19.4 (approve another agent's request id, mint an admin key) and fails
// the test with what the server did.
func (e *testEnv) attackKeyless(env map[string]string, id string) error {
	e.t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &logtest.Buffer{}
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "COUNTERSIGN_DATABASE_URL" {
			return e.env[k]
		}
		return env[k]
	}
	go func() {
		err := run(context.Background(), []string{"mcp", "--config", e.cfg}, getenv, inR, outW, stderr)
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		return <-done
	}
	approve, _ := mcpCall(e.t, cs, "approve_action", map[string]any{"request_id": id})
	mint, _ := mcpCall(e.t, cs, "create_principal", map[string]any{"name": "backdoor", "role": "admin"})
	cs.Close()
	<-done
	e.t.Fatalf("with env %v and no key, countersign mcp served: approve_action answered %q; create_principal answered %q", env, approve, mint)
	return nil
}
