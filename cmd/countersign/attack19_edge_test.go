package main

import (
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
