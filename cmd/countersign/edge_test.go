package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPost posts one raw JSON-RPC body to /mcp with key.
func (e *testEnv) mcpPost(key, body string) (*http.Response, string) {
	e.t.Helper()
	return e.postRaw("/mcp", key, []byte(body), "Accept", "application/json, text/event-stream")
}

func rememberMsg(id int, subject string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"remember","arguments":{"user_id":"p1","subject":%q,"value":"v"}}}`, id, subject)
}

// TestMCPBatchIsRefusedAndRunsNoWrites plays issue 9's attack: one POST
// carrying 500 tools/call remember messages ran 500 writes under a burst of
// 60. A batch is now refused whole (HTTP 400, JSON-RPC -32600) and writes
// nothing, whatever protocol version the client declares.
func TestMCPBatchIsRefusedAndRunsNoWrites(t *testing.T) {
	e := newTestEnv(t, "http:\n  rate_per_minute: 6000\n  rate_burst: 1000\n")
	key := e.CreateKey("agent", "member", "--kind", "agent")
	e.Start()
	msgs := make([]string, 500)
	for i := range msgs {
		msgs[i] = rememberMsg(i+1, fmt.Sprintf("batch_subject_%d", i))
	}
	batch := "[" + strings.Join(msgs, ",") + "]"
	for _, version := range []string{"", "2025-03-26", "2025-06-18"} {
		req := []string{"Accept", "application/json, text/event-stream"}
		if version != "" {
			req = append(req, "Mcp-Protocol-Version", version)
		}
		resp, body := e.postRaw("/mcp", key, []byte("  \n"+batch), req...)
		var rpc struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &rpc) != nil || rpc.Error.Code != -32600 || !strings.Contains(rpc.Error.Message, "batches are not supported") {
			t.Fatalf("version %q: %d %s", version, resp.StatusCode, body)
		}
	}
	// A batch of one is a batch too.
	if resp, body := e.mcpPost(key, "["+rememberMsg(1, "single_in_batch")+"]"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("batch of one: %d %s", resp.StatusCode, body)
	}
	r := e.MustOK(key, "list_memories", map[string]any{"user_id": "p1"})
	if strings.Contains(r.Raw, "batch_subject_") || strings.Contains(r.Raw, "single_in_batch") {
		t.Fatalf("a refused batch wrote: %s", r.Raw)
	}
	// One message per POST still works.
	if resp, body := e.mcpPost(key, rememberMsg(7, "one_by_one")); resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
		t.Fatalf("single message: %d %s", resp.StatusCode, body)
	}
	if r := e.MustOK(key, "list_memories", map[string]any{"user_id": "p1"}); !strings.Contains(r.Raw, "one_by_one") {
		t.Fatalf("single message did not write: %s", r.Raw)
	}
}

// TestRateLimitCountsToolCallsOnEverySurface: one token per tool call,
// whether it comes over HTTP or MCP, from one bucket per principal; beyond
// the burst every surface answers 429 with Retry-After. Before, MCP took
// one token per HTTP request, whatever it carried.
func TestRateLimitCountsToolCallsOnEverySurface(t *testing.T) {
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 4\n")
	a := e.CreateKey("a", "viewer")
	b := e.CreateKey("b", "viewer")
	e.Start()
	e.MustOK(a, "export_public_key", nil)
	e.MustOK(a, "export_public_key", nil)
	for i := 0; i < 2; i++ {
		resp, body := e.mcpPost(a, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"export_public_key","arguments":{}}}`)
		if resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
			t.Fatalf("mcp call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	// The bucket of a is empty: HTTP and MCP both refuse with 429.
	resp, body := e.postRaw("/v1/tools/export_public_key", a, []byte(`{}`))
	if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || secs < 1 || !strings.Contains(body, "rate limit exceeded") {
		t.Fatalf("http beyond the burst: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, body = e.mcpPost(a, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remember","arguments":{"subject":"x","value":"y"}}}`)
	var rpc struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || secs < 1 ||
		json.Unmarshal([]byte(body), &rpc) != nil || rpc.ID != 9 || !strings.Contains(rpc.Error.Message, "rate limit exceeded") {
		t.Fatalf("mcp beyond the burst: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Another principal has its own bucket.
	e.MustOK(b, "export_public_key", nil)
}

// TestMCPHandshakeTakesNoRateToken is issue 14's item 5: initialize,
// notifications/initialized, tools/list and ping took tokens from the
// burst, so an agent could be refused while connecting. With a burst of 2,
// a client connects, lists the tools and pings many times, then makes its
// two tool calls; the third is refused.
func TestMCPHandshakeTakesNoRateToken(t *testing.T) {
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 2\n")
	key := e.CreateKey("agent", "viewer")
	e.Start()
	for i := 0; i < 5; i++ {
		cs := e.mcpSession(key) // initialize + notifications/initialized
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		if resp, body := e.mcpPost(key, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 200 {
			t.Fatalf("ping %d: %d %s", i, resp.StatusCode, body)
		}
		cs.Close()
	}
	cs := e.mcpSession(key)
	mcpOK(t, cs, "export_public_key", map[string]any{})
	mcpOK(t, cs, "export_public_key", map[string]any{})
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "export_public_key", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("third tool call: %v", err)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list with an empty bucket: %v", err)
	}
}

// TestRateLimitOverStdioMCP: the stdio surface (no HTTP in front) pays in
// bot.Call, one token per tool call; beyond the burst the call is a tool
// error saying when to retry.
func TestRateLimitOverStdioMCP(t *testing.T) {
	e := newTestEnv(t, "http:\n  rate_per_minute: 1\n  rate_burst: 2\n")
	cs, stop := e.runMCP(nil, nil)
	defer stop()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mcpOK(t, cs, "export_public_key", map[string]any{})
	mcpOK(t, cs, "export_public_key", map[string]any{})
	text, r := mcpCall(t, cs, "export_public_key", map[string]any{})
	if !r.IsError || !strings.HasPrefix(text, "rate limit exceeded: retry after ") {
		t.Fatalf("third call over stdio: %v %q", r.IsError, text)
	}
}
