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

// TestListingsAreBoundedAndPaged: 200 list_memories calls in one request
// built a 228 MB answer. Batches are refused (above); every listing has a
// limit with a default and a maximum, and next_cursor walks the rest.
func TestListingsAreBoundedAndPaged(t *testing.T) {
	e := newTestEnv(t, "http:\n  rate_per_minute: 60000\n  rate_burst: 10000\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	const n = 230
	for i := 0; i < n; i++ {
		e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": fmt.Sprintf("note_%03d", i), "value": strings.Repeat("x", 40)})
	}
	// A batch of list calls is refused whole.
	calls := make([]string, 200)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_memories","arguments":{"user_id":"p1"}}}`, i)
	}
	if resp, body := e.mcpPost(key, "["+strings.Join(calls, ",")+"]"); resp.StatusCode != http.StatusBadRequest || len(body) > 1024 {
		t.Fatalf("batch of lists: %d, %d bytes", resp.StatusCode, len(body))
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		args := map[string]any{"user_id": "p1"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		r := e.MustOK(key, "list_memories", args)
		pages++
		active := r.Data["active"].([]any)
		if len(active) > 100 {
			t.Fatalf("page %d has %d facts; the default limit is 100", pages, len(active))
		}
		for _, f := range active {
			s := f.(map[string]any)["subject"].(string)
			if seen[s] {
				t.Fatalf("%s listed twice", s)
			}
			seen[s] = true
		}
		cursor = r.Data["next_cursor"].(string)
		if cursor == "" {
			break
		}
		if !strings.Contains(r.Text, `… more: call list_memories again with cursor "`+cursor+`"`) {
			t.Fatalf("page %d text does not say how to go on: %q", pages, r.Text[len(r.Text)-80:])
		}
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("walked %d facts in %d pages, want %d in 3", len(seen), pages, n)
	}
	for _, bad := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"list_memories", map[string]any{"user_id": "p1", "limit": 501}, "limit"},
		{"list_memories", map[string]any{"user_id": "p1", "limit": 0}, "limit"},
		{"list_memories", map[string]any{"user_id": "p1", "cursor": "abc"}, "cursor"},
		{"history", map[string]any{"user_id": "p1", "subject": "note_001", "limit": 100000}, "limit"},
		{"pending_changes", map[string]any{"user_id": "p1", "limit": 501}, "limit"},
		{"audit_log", map[string]any{"limit": 1001}, "limit"},
		{"audit_log", map[string]any{"cursor": "-3"}, "cursor"},
		{"recall", map[string]any{"user_id": "p1", "question": "note", "limit": 0}, "limit"},
	} {
		if r := e.Call(key, bad.tool, bad.args); r.Status != 400 || r.Field != bad.field {
			t.Fatalf("%s %v: %d %s", bad.tool, bad.args, r.Status, r.Raw)
		}
	}
	// audit_log pages the same way, newest first, without overlap.
	r := e.MustOK(key, "audit_log", map[string]any{"limit": 100})
	first := r.Data["entries"].([]any)
	next := r.Data["next_cursor"].(string)
	if len(first) != 100 || next == "" {
		t.Fatalf("audit_log page 1: %d entries, cursor %q", len(first), next)
	}
	r = e.MustOK(key, "audit_log", map[string]any{"limit": 100, "cursor": next})
	second := r.Data["entries"].([]any)
	lastSeq := first[len(first)-1].(map[string]any)["seq"].(float64)
	if len(second) == 0 || second[0].(map[string]any)["seq"].(float64) >= lastSeq {
		t.Fatalf("audit_log page 2 starts at %v after %v", second[0], lastSeq)
	}
	// recall's limit narrows the ranked context, never widens it.
	r = e.MustOK(key, "recall", map[string]any{"user_id": "p1", "question": "note x", "limit": 5})
	if facts := r.Data["facts"].([]any); len(facts) > 5 {
		t.Fatalf("recall limit 5 returned %d facts", len(facts))
	}
}
