//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/kv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// auditOf returns the details of the chain's entries of action that
// begin with request id (the gateway's entries name their request first).
func (e *testEnv) auditOf(action, id string) []string {
	e.t.Helper()
	db := e.openTestStore()
	defer db.Close()
	var got []string
	err := db.View(context.Background(), func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 100000})
		got = got[:0]
		for _, en := range es {
			if en.Action == action && strings.HasPrefix(en.Detail, id+" ") {
				got = append(got, en.Detail)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// TestReplicasForwardingMarkersHaveOwners plays crash safety (issue 22
// item 4) with three replicas on one throwaway PostgreSQL, each with its
// own real node upstream:
//   - an approved call forwarding on replica a (a slow upstream tool the
//     test ends) is not reported outcome unknown when another replica
//     starts, nor by the leader's sweeps; a host's retry of it on that new
//     replica is told it is running, and runs nothing;
//   - replica d is killed (SIGKILL) while forwarding another call: the
//     leader's sweep reports that one outcome unknown, once, while a's
//     call is still in flight and left alone;
//   - a's call then completes normally, its answer reaching the host, and
//     is recorded once; the killed call's retry is a new request for a new
//     decision, and each upstream ran its call once; a later start reports
//     nothing more.
func TestReplicasForwardingMarkersHaveOwners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers")
	}
	node := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + `
sweep:
  schedule: "@every 1s"
mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: lying
      command: ` + nodetest.Node(t) + `
      args: [lying_server.mjs]
      dir: ` + node + `
      tools:
        - {match: hold, category: mutating}
        - {match: hang, category: mutating}
`
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}

	leader := startReplica(t, cfg, env)
	waitFor(t, "the first replica to lead", func() bool { return strings.Contains(leader.logs.String(), "this replica leads") })
	a := startReplica(t, cfg, env)
	d := startReplica(t, cfg, env)

	// forwarding makes an approved call of tool on r and leaves it at the
	// upstream (its effect seen); the host's answer arrives on the channel.
	session := func(r *replica) *sdk.ClientSession { e.URL = r.URL; return e.mcpSessionVersion(agent, "2025-06-18") }
	forwarding := func(r *replica, tool, path string) (string, chan *sdk.CallToolResult) {
		t.Helper()
		cs := session(r)
		args := map[string]any{"path": path}
		_, res := mcpCall(t, cs, tool, args)
		sc, _ := res.StructuredContent.(map[string]any)
		id, _ := sc["request_id"].(string)
		if sc["status"] != "pending" || id == "" {
			t.Fatalf("%s: %+v, want pending", tool, sc)
		}
		e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
		answer := make(chan *sdk.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), callParams(tool, args))
			if err != nil {
				res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
			}
			answer <- res
		}()
		waitFor(t, "the upstream to run "+id, func() bool { b, _ := os.ReadFile(path); return len(b) > 0 })
		return id, answer
	}
	held := filepath.Join(t.TempDir(), "held.txt")
	// Should the test fail early, release the upstream's hold before the
	// replicas are killed, so that no node process is left waiting.
	t.Cleanup(func() { _ = os.WriteFile(held+".go", nil, 0o600) })
	heldID, heldAnswer := forwarding(a, "lying__hold", held)

	// A replica starting while a's call is at the upstream.
	c := startReplica(t, cfg, env)
	if got := e.auditOf("gateway_outcome_unknown", heldID); len(got) != 0 {
		t.Fatalf("a replica starting beside a live one reported its call in flight: gateway_outcome_unknown %q, want none", got)
	}
	text, r := mcpCall(t, session(c), "lying__hold", map[string]any{"path": held})
	if sc, _ := r.StructuredContent.(map[string]any); !r.IsError || sc["status"] != "running" || sc["request_id"] != heldID {
		t.Fatalf("the host's retry on another replica while %s forwards answered %v %q %v, want it told the call is running", heldID, r.IsError, text, r.StructuredContent)
	}

	// d dies mid-call: the leader's sweep reports it.
	hung := filepath.Join(t.TempDir(), "hung.txt")
	hungID, _ := forwarding(d, "lying__hang", hung)
	d.kill()
	waitFor(t, "the leader's sweep to report the killed replica's call", func() bool {
		return len(e.auditOf("gateway_outcome_unknown", hungID)) > 0
	})
	if got := e.auditOf("gateway_outcome_unknown", hungID); len(got) != 1 || !strings.Contains(got[0], "outcome unknown") {
		t.Fatalf("the killed replica's call %s: gateway_outcome_unknown %q, want one entry", hungID, got)
	}
	if got := e.auditOf("gateway_outcome_unknown", heldID); len(got) != 0 {
		t.Fatalf("the sweep that found the killed replica's call also reported the live one %s: gateway_outcome_unknown %q, want none", heldID, got)
	}

	// a's call completes normally, once.
	if err := os.WriteFile(held+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res := <-heldAnswer
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("the forwarded call %s answered error %v %+v, want the upstream's answer", heldID, res.IsError, res.Content)
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); !ok || tc.Text != "held "+held {
		t.Fatalf("the forwarded call %s answered %+v, want the upstream's %q", heldID, res.Content[0], "held "+held)
	}
	if got := e.auditOf("gateway_forwarded", heldID); len(got) != 1 {
		t.Fatalf("%s: gateway_forwarded %q, want it recorded once", heldID, got)
	}

	// The killed call is not run again: its retry asks anew.
	text, r = mcpCall(t, session(a), "lying__hang", map[string]any{"path": hung})
	if sc, _ := r.StructuredContent.(map[string]any); !r.IsError || sc["status"] != "pending" || sc["request_id"] == hungID {
		t.Fatalf("the host's retry of %s after its replica died answered %v %q, want a new request for a new decision", hungID, r.IsError, text)
	}
	for _, f := range []string{held, hung} {
		if b, _ := os.ReadFile(f); string(b) != "ran\n" {
			t.Fatalf("%s: the upstream ran the call %d times, want once", filepath.Base(f), strings.Count(string(b), "ran"))
		}
	}

	// A later start finds nothing more to report.
	startReplica(t, cfg, env)
	if got := e.auditOf("gateway_outcome_unknown", hungID); len(got) != 1 {
		t.Fatalf("after another start: gateway_outcome_unknown of %s %q, want still one", hungID, got)
	}
	if got := e.auditOf("gateway_outcome_unknown", heldID); len(got) != 0 {
		t.Fatalf("after another start: %s reported outcome unknown: %q, want none", heldID, got)
	}
}
