package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/config"
)

// An MCP host gives up on a call after about 60 seconds. With
// mcp.max_call_wait set (1s here, so the test does not sleep 45), no call
// over /mcp is held past it: a 2026-07-28 client's pending confirm_action
// answers MRTR input_required with a requestState; an older client's
// answers pending at once, and its long poll of action_status is cut to
// max_call_wait. The request stays pending and decidable either way.
func TestMCPLongPollAnswersPendingBeforeTheHostGivesUp(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, actionsConfig+"mcp:\n  max_call_wait: 1s\n")
	agent := e.CreateKey("deploy-bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	host, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()

	// 2026-07-28: MRTR.
	modern := e.mcpSession(agent)
	args := map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "summary": "restart web"}
	mr, err := modern.CallTool(host, &sdk.CallToolParams{Name: "confirm_action", Arguments: args})
	if err != nil || !mr.NeedsInput() || mr.RequestState == "" {
		t.Fatalf("confirm_action over MRTR did not answer input_required inside the host's limit: %v %+v, want input_required with a requestState", err, mr)
	}

	// 2025-11-25: pending at once, with the poll instruction.
	cs := e.mcpSessionVersion(agent, "2025-11-25")
	text, r := mcpCall(t, cs, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "api"}, "summary": "restart api"})
	data, _ := r.StructuredContent.(map[string]any)
	id, _ := data["request_id"].(string)
	if r.IsError || data["status"] != "pending" || !strings.HasPrefix(id, "req_") || !strings.Contains(text, "Poll action_status") {
		t.Fatalf("confirm_action over MCP 2025-11-25: %q %v; want pending with a req_ id and %q", text, r.StructuredContent, "Poll action_status")
	}
	// The host: a call it abandons after 55 seconds. wait_seconds 60 would
	// outlast it; the server cuts the wait to max_call_wait and answers.
	st, err := cs.CallTool(host, &sdk.CallToolParams{Name: "action_status", Arguments: map[string]any{"request_id": id, "wait_seconds": 60}})
	if err != nil {
		t.Fatalf("action_status with wait_seconds 60 did not answer inside the host's limit: %v", err)
	}
	sd, _ := st.StructuredContent.(map[string]any)
	stText := st.Content[0].(*sdk.TextContent).Text
	if st.IsError || sd["status"] != "pending" || sd["request_id"] != id || !strings.Contains(stText, "Poll action_status with request_id "+id) {
		t.Fatalf("action_status: %q %v; want pending %s with %q", stText, st.StructuredContent, id, "Poll action_status with request_id "+id)
	}

	// Nothing was lost: a person approves it, and the next poll says so.
	if a := e.MustOK(alice, "approve_action", map[string]any{"request_id": id}); a.Data["status"] != "approved" {
		t.Fatalf("approve: %s, want status approved", a)
	}
	_, after := mcpCall(t, cs, "action_status", map[string]any{"request_id": id, "wait_seconds": 60})
	if ad, _ := after.StructuredContent.(map[string]any); after.IsError || ad["status"] != "approved" || !strings.Contains(ad["confirmed_by"].(string), "alice") {
		t.Fatalf("after approval: %v, want status approved, confirmed by alice", after.StructuredContent)
	}
	// A bad wait is still refused by name, not cut.
	bad, badR := mcpCall(t, cs, "action_status", map[string]any{"request_id": id, "wait_seconds": 61})
	if !badR.IsError || !strings.Contains(bad, "wait_seconds") {
		t.Fatalf("wait_seconds 61: %q, want an error naming wait_seconds", bad)
	}
}

func TestMCPMaxCallWaitMustStayBelowTheHostLimit(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"60s", "2m", "500ms"} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte("mcp:\n  max_call_wait: "+v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "mcp.max_call_wait") {
			t.Errorf("max_call_wait %s: %v, want an error naming mcp.max_call_wait", v, err)
		}
	}
	cfg, err := config.Load("")
	if err != nil || cfg.MCP.MaxCallWait != 45*time.Second {
		t.Fatalf("default: %v %v, want max_call_wait %v", cfg, err, 45*time.Second)
	}
}
