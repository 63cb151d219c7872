package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Attacks of the security round (issue 19) on Countersign's edges, played
// against the real server: duplicate JSON keys, Host and Origin, the exec
// allowlist's read-only flags and Slack workspaces. SECURITY.md ("What each
// HTTP surface checks") and docs/actions.md say what they hold.

// nested wraps inner in n objects {"x": …}.
func nested(n int, inner string) string {
	return strings.Repeat(`{"x":`, n) + inner + strings.Repeat(`}`, n)
}

// clip shortens an answer for a failure message.
func clip(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// postMCPRaw posts one raw JSON-RPC message to /mcp and returns the status
// and body.
func postMCPRaw(t *testing.T, e *testEnv, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttackDeepDuplicateKeys: a duplicate key nested more than about a
// thousand objects deep was accepted (resolved last-wins) on the HTTP API
// and over MCP, against the documented "duplicate JSON keys are refused,
// never resolved by order". Now a duplicate at any depth is a 400 naming
// its path, nesting beyond 64 levels is a 400 naming where, and nothing is
// recorded.
func TestAttackDeepDuplicateKeys(t *testing.T) {
	e := newTestEnv(t, "")
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	ask := func(args string) string {
		return `{"tool":"set_dose","summary":"set a dose","arguments":` + args + `}`
	}
	deepDup := nested(1001, `{"dose":"5mg","dose":"50mg"}`)
	shallowDup := nested(10, `{"dose":"5mg","dose":"50mg"}`)
	tooDeep := nested(70, `1`)

	r := e.Call(agent, "confirm_action", ask(deepDup))
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Error, "more than once") && !strings.Contains(r.Error, "levels") {
		t.Fatalf("a duplicate key 1001 objects deep: %s, want a 400 refusing it", clip(r))
	}
	r = e.Call(agent, "confirm_action", ask(shallowDup))
	if want := "arguments" + strings.Repeat(".x", 10) + ".dose"; r.Status != http.StatusBadRequest || r.Field != want || !strings.Contains(r.Error, "more than once") {
		t.Fatalf("a duplicate key 10 objects deep: %s, want a 400 on field %s", clip(r), want)
	}
	r = e.Call(agent, "confirm_action", ask(tooDeep))
	if r.Status != http.StatusBadRequest || !strings.Contains(r.Error, "64 levels") || !strings.HasPrefix(r.Field, "arguments.x.x") {
		t.Fatalf("arguments nested 70 deep: %s, want a 400 naming where the 64-level limit is passed", clip(r))
	}

	// The same over MCP: the arguments of tools/call.
	for name, args := range map[string]string{"deep duplicate": deepDup, "too deep": tooDeep} {
		msg := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"confirm_action","arguments":` + ask(args) + `}}`
		code, body := postMCPRaw(t, e, agent, msg)
		var ans struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &ans)
		refused := ans.Error != nil || ans.Result.IsError
		if !refused || strings.Contains(body, "request_id") {
			t.Fatalf("MCP %s: %d %s, want the call refused", name, code, clip(body))
		}
	}
	// The envelope itself: a tools/call naming its arguments twice.
	code, body := postMCPRaw(t, e, agent, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"confirm_action","arguments":`+ask(`{"dose":"5mg"}`)+`,"arguments":`+ask(`{"dose":"50mg"}`)+`}}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "params.arguments") {
		t.Fatalf("MCP envelope with arguments twice: %d %s, want a 400 naming params.arguments", code, body)
	}

	// Nothing was recorded: the first request that is accepted is item #1.
	if r := e.MustOK(agent, "confirm_action", ask(`{"dose":"5mg"}`)); r.Data["item_id"] != float64(1) {
		t.Fatalf("a refused call left an item: the next request is %v, want item 1: %s", r.Data["item_id"], clip(r))
	}
}

// hostGet sends method path to the server with the given Host and Origin
// ("" for the server's own and none) and returns the status and body.
func hostDo(t *testing.T, e *testEnv, method, path, host, origin, key string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{}`)
	}
	req, _ := http.NewRequest(method, e.URL+path, body)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAttackForeignHostOnEveryRoute: SECURITY.md said the API routes check
// Host and Origin against DNS rebinding, but only /mcp did: GET /v1/tools,
// the tool calls, the console and /metrics answered a page that rebinds
// evil.example to the server. Now every route a browser can be made to
// call refuses a foreign Host or Origin with a 403 saying what to
// configure; the names the server answers to follow from its config
// (listen, web.public_url, http.allowed_hosts). The signed Slack and
// Discord webhooks, called by the platforms under their own Host, and the
// health probes are not Host-checked.
func TestAttackForeignHostOnEveryRoute(t *testing.T) {
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http")+`web:
  public_url: https://countersign.example.org
http:
  allowed_hosts: [proxy.internal:8443]
  allowed_origins: [https://console.example]
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()

	guarded := []struct{ method, path, key string }{
		{"GET", "/v1/tools", ""},
		{"POST", "/v1/tools/export_public_key", agent},
		{"POST", "/mcp", agent},
		{"GET", "/ui/", ""},
		{"GET", "/metrics", ""},
		{"GET", "/no/such/route", ""},
	}
	for _, g := range guarded {
		for _, host := range []string{"evil.example", "evil.example:80", "countersign.example.org.evil.example", "proxy.internal:9999"} {
			code, body := hostDo(t, e, g.method, g.path, host, "", g.key)
			if code != http.StatusForbidden || !strings.Contains(body, "http.allowed_hosts") || !strings.Contains(body, "web.public_url") {
				t.Errorf("%s %s with Host %s: %d %s, want a 403 saying what to configure", g.method, g.path, host, code, clip(body))
			}
			if strings.Contains(body, "evil") {
				t.Errorf("%s %s: the refusal echoes the Host header: %s", g.method, g.path, clip(body))
			}
		}
	}
	// The server's own names: loopback, any IP address, public_url's host
	// on any port, the listed host:port.
	for _, host := range []string{"", "localhost:1", "127.0.0.1", "[::1]:8080", "10.1.2.3:8080", "countersign.example.org", "COUNTERSIGN.example.org.:443", "proxy.internal:8443"} {
		if code, body := hostDo(t, e, "GET", "/v1/tools", host, "", ""); code != http.StatusOK {
			t.Errorf("GET /v1/tools with Host %q: %d %s, want 200", host, code, clip(body))
		}
	}
	// A foreign Origin is refused on the API even with a good Host; the
	// server's own origins and the listed ones pass.
	for _, origin := range []string{"https://evil.example", "null", "http://countersign.example.org.evil.example", "http://127.0.0.1:3000"} {
		code, body := hostDo(t, e, "POST", "/v1/tools/export_public_key", "", origin, agent)
		if code != http.StatusForbidden || !strings.Contains(body, "http.allowed_origins") {
			t.Errorf("POST with Origin %s: %d %s, want a 403 naming http.allowed_origins", origin, code, clip(body))
		}
	}
	for _, origin := range []string{"https://countersign.example.org", "https://console.example", strings.Replace(e.URL, "127.0.0.1", "localhost", 1)} {
		if code, body := hostDo(t, e, "POST", "/v1/tools/export_public_key", "", origin, agent); code != http.StatusOK {
			t.Errorf("POST with Origin %s: %d %s, want 200", origin, code, clip(body))
		}
	}
	// Not Host-checked: the probes, and the signed webhooks (which refuse
	// an unsigned call themselves).
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := hostDo(t, e, "GET", p, "evil.example", "", ""); code != http.StatusOK {
			t.Errorf("GET %s with a foreign Host: %d %s, want 200", p, code, clip(body))
		}
	}
	if code, body := hostDo(t, e, "POST", "/slack/interactions", "hooks.slack-tunnel.example", "", ""); code != http.StatusUnauthorized {
		t.Errorf("an unsigned Slack call under another Host: %d %s, want the signature's 401", code, clip(body))
	}
}

// TestAttackReadOnlyFlagsLoadCode: an allowlisted read-only `kubectl get`
// was approved at once, with nobody looking, whatever flags it carried:
// --kubeconfig=FILE runs the exec credential plugin that file names, and
// --context, --token, --server or --as send the call with credentials or
// to a server nobody vetted. Now a read-only entry takes only the flags it
// names (flags:), a flag that loads code or configuration can never be
// named, and anything else is refused (403), not asked about.
func TestAttackReadOnlyFlagsLoadCode(t *testing.T) {
	e := newTestEnv(t, `tools:
  - name: exec
    category: mutating
    commands:
      - {command: kubectl get, category: read-only}
      - {command: kubectl delete, category: destructive}
`)
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	for _, cmd := range [][]string{
		{"kubectl", "get", "pods", "--kubeconfig=/tmp/evil.kubeconfig"},
		{"kubectl", "get", "pods", "--kubeconfig", "/tmp/evil.kubeconfig"},
		{"kubectl", "get", "secrets", "--context", "prod-admin"},
		{"kubectl", "get", "secrets", "--token=stolen"},
		{"kubectl", "get", "secrets", "-s", "https://evil.example"},
		{"kubectl", "get", "secrets", "--as=system:admin"},
		{"kubectl", "get", "pods", "-n", "prod"}, // no flags named: none accepted
	} {
		r := e.Call(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": cmd}})
		if r.Status != http.StatusForbidden || !strings.Contains(r.Error, "takes only the flags its allowlist entry names") || r.Data["request_id"] != nil {
			t.Errorf("read-only %v: %s, want a 403 refusing the flag, no request", cmd, clip(r))
		}
		if strings.Contains(cmd[3], "kubeconfig") && !strings.Contains(r.Error, "exec credential plugin") {
			t.Errorf("%v: the refusal does not say why the flag is never accepted: %s", cmd, clip(r))
		}
	}
	// The same flags on the destructive entry are shown to the person who
	// approves: asked about, not refused.
	r := e.MustOK(agent, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "delete", "pod", "web-1", "--context", "prod"}}, "dry_run": "delete pod web-1 in prod"})
	if r.Data["status"] != "pending" {
		t.Errorf("a destructive call with flags: %s, want it pending for a person", clip(r))
	}
	e.Stop()

	// Named flags pass; a loader flag cannot be named.
	e2 := newTestEnv(t, `tools:
  - name: exec
    category: mutating
    commands:
      - {command: kubectl get, category: read-only, flags: [-n, --namespace, -o, --output]}
`)
	agent2 := e2.CreateKey("deploy_bot", "agent")
	e2.Start()
	r = e2.MustOK(agent2, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "get", "pods", "-n", "prod", "--output=json"}}})
	if r.Data["status"] != "approved" {
		t.Errorf("read-only with named flags: %s, want approved", clip(r))
	}
	if r := e2.Call(agent2, "confirm_action", map[string]any{"tool": "exec", "arguments": map[string]any{"command": []string{"kubectl", "get", "pods", "-n", "prod", "--kubeconfig=/tmp/x"}}}); r.Status != http.StatusForbidden {
		t.Errorf("a named flag next to a loader flag: %s, want 403", clip(r))
	}
	e2.Stop()
	bad := newTestEnv(t, `tools:
  - name: exec
    commands:
      - {command: kubectl get, category: read-only, flags: [-n, --kubeconfig]}
`)
	var errb bytes.Buffer
	err := run(context.Background(), []string{"serve", "--config", bad.cfg}, bad.getenv, strings.NewReader(""), io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "tools[0].commands[0]") || !strings.Contains(err.Error(), "--kubeconfig loads a kubeconfig") {
		t.Fatalf("a read-only entry naming --kubeconfig: %v, want start-up refused naming the entry and why", err)
	}
}
