package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/nodetest"
)

// TestAttackGatewayReplayAndTasksArePerPrincipal: agent A's gated write
// runs once approved. Agent B then sends the identical call (and one
// with its arguments reordered and a space added): B gets no recorded
// answer of A's, but a request of its own that waits, and nothing is
// written. B polling A's task id, a task id with a byte changed, and a
// made-up one, learns nothing: each is "not found", as for a task that
// never was. A's own task still answers A.
func TestAttackGatewayReplayAndTasksArePerPrincipal(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, `http:
  rate_burst: 1000
mcp:
  max_call_wait: 40s
gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: "read_*", category: read-only}
        - {match: write_file, category: mutating, approvers: {roles: [member]}}
`)
	e.env["PATH"] = os.Getenv("PATH")
	agentA := e.CreateKey("ward_bot", "agent")
	lead := e.CreateKey("lead", "member")
	admin := e.CreateKey("ops_admin", "admin")
	e.Start()
	agentB := e.MustOK(admin, "create_principal", map[string]any{"name": "other_bot", "role": "agent"}).Data["key"].(string)
	a := &taskClient{t: t, url: e.URL + "/mcp", key: agentA}
	b := &taskClient{t: t, url: e.URL + "/mcp", key: agentB}
	path := filepath.Join(dir, "rota.txt")
	args := map[string]any{"path": path, "content": "Lee on nights"}

	r := a.call("tools/call", map[string]any{"name": "fs__write_file", "arguments": args})
	taskA, _ := r["taskId"].(string)
	if r["resultType"] != "task" || taskA == "" {
		t.Fatalf("A's call answered %v, want a task", r)
	}
	seen := map[string]bool{}
	idA := newRequestOf(t, e, admin, "fs__write_file", seen)
	e.MustOK(lead, "approve_action", map[string]any{"request_id": idA})
	if g := a.call("tasks/get", map[string]any{"taskId": taskA}); g["status"] != "completed" {
		t.Fatalf("A's task after the approval: %v, want completed", g)
	}
	if err := os.WriteFile(path, []byte("changed by the ward"), 0o600); err != nil {
		t.Fatal(err)
	}

	// B's identical call, and a near-identical one: never A's answer.
	for i, bargs := range []map[string]any{args, {"content": "Lee on nights ", "path": path}} {
		res, rerr := b.try("tools/call", map[string]any{"name": "fs__write_file", "arguments": bargs})
		text, _ := json.Marshal(res)
		if rerr != nil || strings.Contains(string(text), idA) || strings.Contains(string(text), "Successfully wrote") || res["resultType"] != "task" {
			t.Fatalf("B's call %d answered %s (error %v), want a task of its own, nothing of %s", i, text, rerr, idA)
		}
		idB := newRequestOf(t, e, admin, "fs__write_file", seen)
		if idB == idA {
			t.Fatalf("B's call %d was given A's request %s, want a request of its own", i, idA)
		}
		st := e.MustOK(admin, "action_status", map[string]any{"request_id": idB})
		if st.Data["status"] != "pending" {
			t.Fatalf("B's request %s is %v, want pending", idB, st.Data["status"])
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "changed by the ward" {
		t.Fatalf("B's call wrote the file: it holds %q, want %q", got, "changed by the ward")
	}

	// B polls A's task, a tampered one and a made-up one.
	tampered := []byte(taskA)
	tampered[len(tampered)/2] ^= 1
	var answers []string
	for _, id := range []string{taskA, string(tampered), "tsk_0000000000000000"} {
		res, rerr := b.try("tasks/get", map[string]any{"taskId": id})
		if rerr == nil || res != nil {
			t.Fatalf("B's tasks/get of %q answered %v, want an error", id, res)
		}
		answers = append(answers, strings.ReplaceAll(rerr["message"].(string), id, "ID"))
	}
	if answers[0] != answers[1] || answers[1] != answers[2] {
		t.Errorf("B tells A's task from a made-up one: %q, want the same answer for each", answers)
	}
	if g := a.call("tasks/get", map[string]any{"taskId": taskA}); g["status"] != "completed" {
		t.Errorf("A's own task after B's polls: %v, want completed", g)
	}
	if n := forwardedRuns(t, e, admin, idA, "fs__write_file"); n != 1 {
		t.Fatalf("request %s was forwarded %d times, want once", idA, n)
	}
}
