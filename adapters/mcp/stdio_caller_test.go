package mcp

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioCallers: a stdio session with a key acts as the key's principal
// on the surface mcp, looked up on every call, so a revoked key is refused
// on the next call; without a key the local agent is an agent the one
// decision rule refuses, and each of its calls is logged with its tool.
func TestStdioCallers(t *testing.T) {
	b := newBot(t)
	ctx := context.Background()
	now := b.Now()
	var made bot.CreatedKey
	if err := b.Update(ctx, b.SystemCall(now), func(tx *bot.Tx) error {
		var err error
		made, err = bot.CreateKey(tx, now, bot.NewKey{Name: "intake", Role: policy.RoleAgent, Via: "test"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	callerOf := KeyCaller(b, bot.Secret(made.Key))
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "confirm_action"}}
	c, err := callerOf(ctx, req)
	if err != nil || c.ID != made.Principal.ID || c.Surface != "mcp" {
		t.Fatalf("KeyCaller = %+v, %v; want %s on mcp", c, err, made.Principal.ID)
	}
	p := made.Principal
	p.Revoked = true
	if err := b.Update(ctx, b.SystemCall(now), func(tx *bot.Tx) error { return bot.SavePrincipal(tx, p) }); err != nil {
		t.Fatal(err)
	}
	if c, err := callerOf(ctx, req); c != nil || bot.KindOf(err) != bot.KindUnauthenticated {
		t.Fatalf("KeyCaller after the key was revoked = %+v, %v; want the call refused as unauthenticated", c, err)
	}

	var logs bytes.Buffer
	local, err := LocalAgentCaller(slog.New(slog.NewTextHandler(&logs, nil)))(ctx, req)
	if err != nil || local.Name != "local" || local.Kind != "agent" || local.Role != policy.RoleAgent || local.Surface != "mcp" {
		t.Fatalf("LocalAgentCaller = %+v, %v; want the agent local on mcp", local, err)
	}
	if r := local.MayDecide(policy.Decidable{Ref: "req_1"}); r == nil || r.Check != policy.CheckPerson {
		t.Errorf("the decision rule on the local agent: %+v, want a %v refusal", r, policy.CheckPerson)
	}
	if !strings.Contains(logs.String(), "a call as the keyless local agent") || !strings.Contains(logs.String(), "tool=confirm_action") {
		t.Errorf("the local agent's call is not logged with its tool:\n%s", logs.String())
	}
}
