package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
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
	t.Parallel()
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
	t.Parallel()
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
				t.Errorf("%s %s: the refusal echoes the Host header (want no %q in it): %s", g.method, g.path, "evil", clip(body))
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
	t.Parallel()
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
			t.Errorf("%v: the refusal does not say why the flag is never accepted (want %q in the error): %s", cmd, "exec credential plugin", clip(r))
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

// slackButton posts a signed click on item's Approve button, from user as
// Slack reports them (the user's team_id, the team and the enterprise the
// interaction came from; "" leaves one out).
func slackButton(t *testing.T, e *testEnv, post slackCall, item, user, userTeam, team, enterprise, trigger string) {
	t.Helper()
	u := map[string]any{"id": user}
	if userTeam != "" {
		u["team_id"] = userTeam
	}
	p := map[string]any{
		"type": "block_actions", "trigger_id": trigger, "user": u,
		"container": map[string]any{"type": "message", "channel_id": post.Form.Get("channel"), "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + item, "value": item, "action_ts": "1.1"}},
	}
	if team != "" {
		p["team"] = map[string]any{"id": team, "enterprise_id": enterprise}
	}
	if enterprise != "" {
		p["enterprise"] = map[string]any{"id": enterprise}
	}
	b, _ := json.Marshal(p)
	if code, body := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {string(b)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d %s, want %d", code, body, http.StatusOK)
	}
}

// TestAttackSlackClickFromAnotherWorkspace: a Slack click was matched on
// the user id alone, so a click by U0123ABC of another workspace (an app
// installed in several, a Slack Connect channel) approved as dr_smith. Now
// a Slack principal is a workspace and a user (slack.team_id, or T…/U… on
// the principal; E…/W… for an Enterprise Grid org), and a click or command
// from anyone else is refused privately and audited under the workspace
// and user id it came from.
func TestAttackSlackClickFromAnotherWorkspace(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, slackConfig(f, "http")+`  - name: dr_grid
    role: member
    slack: E0GRID/W0GRID
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("intake", "agent")
	admin := e.CreateKey("ops", "admin")
	e.Start()

	propose := func(value string) (slackCall, string) {
		t.Helper()
		n := len(f.Calls("chat.postMessage"))
		e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": value})
		waitFor(t, "the proposal to be posted", func() bool { return len(f.Calls("chat.postMessage")) == n+1 })
		post := f.Calls("chat.postMessage")[n]
		m := regexp.MustCompile(`"value":"(\d+)"`).FindStringSubmatch(post.Form.Get("blocks"))
		if m == nil {
			t.Fatalf("no Approve button (want a numeric \"value\" in the blocks):\n%s", post.Form.Get("blocks"))
		}
		return post, m[1]
	}
	refusals := func() int { return len(f.Calls("chat.postEphemeral")) }
	// One proposal is open at a time: the item is pending while one is.
	status := func(string) string {
		if r := e.MustOK(admin, "pending_changes", map[string]any{}); strings.Contains(r.Text, "No changes awaiting approval") {
			return "decided"
		}
		return "pending"
	}

	e.MustOK(agent, "remember", map[string]any{"subject": "code_status", "value": "full code"})
	post, item := propose("DNR")
	// dr_smith's user id, from another workspace: refused, audited.
	for i, c := range []struct{ userTeam, team, enterprise string }{
		{"T2", "T2", ""}, // another workspace
		{"", "T2", ""},   // no user team: the team the click came from
		{"T2", "T1", ""}, // a Slack Connect user of T2 clicking in T1's channel
		{"E0GRID", "T5", "E0GRID"},
	} {
		before := refusals()
		slackButton(t, e, post, item, "U0123ABC", c.userTeam, c.team, c.enterprise, fmt.Sprintf("t-other-%d", i))
		waitFor(t, "the private refusal", func() bool { return refusals() == before+1 })
		eph := f.Calls("chat.postEphemeral")[before]
		if eph.Form.Get("user") != "U0123ABC" || !strings.Contains(eph.Form.Get("text"), "not mapped") {
			t.Errorf("click from %+v: refusal %v, want a private 'not mapped' to U0123ABC", c, eph.Form)
		}
		if s := status(item); s != "pending" {
			t.Fatalf("a click by U0123ABC of %+v decided the proposal: it is %s, want pending", c, s)
		}
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text
	if !strings.Contains(log, "unmapped [T2/U0123ABC]") || !strings.Contains(log, "slack user T2/U0123ABC is not mapped") {
		t.Errorf("the refusals are not audited under the workspace they came from (want %q and %q in the log):\n%s", "unmapped [T2/U0123ABC]", "slack user T2/U0123ABC is not mapped", log)
	}
	// The same user in the configured workspace (slack.team_id T1) decides.
	slackButton(t, e, post, item, "U0123ABC", "T1", "T1", "", "t-home")
	waitFor(t, "the approval", func() bool { return status(item) == "decided" })

	// An Enterprise Grid principal (E0GRID/W0GRID): from any workspace of
	// the org; never from another org.
	post, item = propose("full code")
	before := refusals()
	slackButton(t, e, post, item, "W0GRID", "E0OTHER", "T9", "E0OTHER", "t-grid-other")
	waitFor(t, "the other org's refusal", func() bool { return refusals() == before+1 })
	if status(item) != "pending" {
		t.Fatal("a click by W0GRID of another Enterprise Grid org decided the proposal, want it pending")
	}
	slackButton(t, e, post, item, "W0GRID", "T5", "T5", "E0GRID", "t-grid")
	waitFor(t, "dr_grid's approval", func() bool { return status(item) == "decided" })
	if log := e.MustOK(admin, "audit_log", map[string]any{"limit": 50}).Text; !strings.Contains(log, "dr_grid [W0GRID]") {
		t.Errorf("dr_grid's approval is not audited as dr_grid [W0GRID] (want %q in the log):\n%s", "dr_grid [W0GRID]", log)
	}

	// A slash command from the other workspace is refused as well.
	_, item = propose("DNR")
	code, body := postSlack(t, e.URL, "/slack/commands", url.Values{"team_id": {"T2"}, "user_id": {"U0123ABC"}, "channel_id": {"C0DEFAULT"}, "command": {"/countersign"}, "text": {"approve " + item}, "trigger_id": {"t-cmd"}}, e2eSlackSecret)
	if code != http.StatusOK || !strings.Contains(body, "not mapped") || status(item) != "pending" {
		t.Fatalf("approve from another workspace's command: %d %s (item %s), want 200 saying %q, the item pending", code, clip(body), status(item), "not mapped")
	}
}

// TestSlackPrincipalsNameTheirWorkspace: a bare Slack user id needs
// slack.team_id; a malformed workspace is refused at start, saying what to
// write.
func TestSlackPrincipalsNameTheirWorkspace(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	for _, c := range []struct{ from, to, want string }{
		{"  team_id: T1\n", "", `principals[0].slack: "U0123ABC" does not say which Slack workspace it belongs to`},
		{"  team_id: T1\n", "  team_id: t1\n", `slack.team_id: "t1" is not a Slack workspace id`},
		{"    slack: U0123ABC\n", "    slack: X1/U0123ABC\n", `"X1" is not a Slack workspace id`},
		{"    slack: U0123ABC\n", "    slack: T1/<!channel>\n", `is not a Slack user id`},
	} {
		e := newTestEnv(t, strings.Replace(slackConfig(f, "http"), c.from, c.to, 1))
		e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
		err := run(context.Background(), []string{"serve", "--config", e.cfg}, e.getenv, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q → %q: serve said %v, want %q", c.from, c.to, err, c.want)
		}
	}
	// T…/U… on the principal works without slack.team_id.
	e := newTestEnv(t, strings.NewReplacer("  team_id: T1\n", "", "    slack: U0123ABC\n", "    slack: T1/U0123ABC\n").Replace(slackConfig(f, "http")))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	e.Start()
}
