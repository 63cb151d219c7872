package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/nodetest"
)

// gatewayWriteEnv starts the server with the real filesystem server over
// a temporary directory as upstream fs: write_file needs a member's
// approval (extra: more of its rule's keys), read_* passes through. It
// returns the env, the directory, and the keys of an agent, a member and
// an admin.
func gatewayWriteEnv(t *testing.T, maxWait string, extra ...string) (e *testEnv, dir, agent, lead, admin string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e = newTestEnv(t, `mcp:
  max_call_wait: `+maxWait+`
gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: "read_*", category: read-only}
        - {match: write_file, category: mutating, approvers: {roles: [member]}`+strings.Join(extra, "")+`}
`)
	e.env["PATH"] = os.Getenv("PATH")
	agent = e.CreateKey("ward_bot", "agent")
	lead = e.CreateKey("lead", "member")
	admin = e.CreateKey("ops_admin", "admin")
	e.Start()
	return e, dir, agent, lead, admin
}

// newRequestOf waits for the audit to name a request of tool that is not
// in seen, and adds it.
func newRequestOf(t *testing.T, e *testEnv, admin, tool string, seen map[string]bool) string {
	t.Helper()
	re := regexp.MustCompile(`(req_[A-Za-z0-9_-]+) ` + regexp.QuoteMeta(tool) + ` category=`)
	var id string
	waitFor(t, "a new request of "+tool, func() bool {
		for _, m := range re.FindAllStringSubmatch(e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw, -1) {
			if !seen[m[1]] {
				id = m[1]
				return true
			}
		}
		return false
	})
	seen[id] = true
	return id
}

// forwardedRuns counts the gateway_forwarded entries of request id: how
// many times the gateway ran it at the upstream.
func forwardedRuns(t *testing.T, e *testEnv, admin, id, tool string) int {
	t.Helper()
	entries, _ := e.MustOK(admin, "audit_log", map[string]any{"limit": 500}).Data["entries"].([]any)
	n := 0
	for _, v := range entries {
		en, _ := v.(map[string]any)
		if d, _ := en["detail"].(string); en["action"] == "gateway_forwarded" && strings.HasPrefix(d, id+" "+tool+" ") {
			n++
		}
	}
	return n
}

// TestGatewayTSHostRetryAfterTheRunGetsTheRecordedAnswer: the official
// TypeScript SDK (2025-11-25, no MRTR) as the host. Its call waits and
// runs once approved; the host then sends the identical call again, as a
// host that lost the answer does: it gets the recorded answer, marked
// replayed, and the file (changed meanwhile) is not written again. The
// identical call after that is a new call: a new request, which a denial
// ends with nothing written.
func TestGatewayTSHostRetryAfterTheRunGetsTheRecordedAnswer(t *testing.T) {
	t.Parallel()
	e, dir, agent, lead, admin := gatewayWriteEnv(t, "40s")
	path := filepath.Join(dir, "rota.txt")
	write := map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": path, "content": "Lee on nights"}}
	retry := map[string]any{"name": "fs__write_file", "arguments": map[string]any{"content": "Lee on nights", "path": path}, "wait": true}
	events, release := gatewayHostIO(t, e.URL+"/mcp", agent, write, retry, write)

	tools := nextGW(t, events, "tools")
	for _, tl := range tools.Tools {
		if tl.Name == "fs__write_file" && tl.Execution["taskSupport"] != "optional" {
			t.Errorf("fs__write_file is listed with execution %v, want taskSupport optional (a gated call may answer a task)", tl.Execution)
		}
		if tl.Name == "fs__read_text_file" && tl.Execution != nil {
			t.Errorf("fs__read_text_file is listed with execution %v, want none (it passes straight through)", tl.Execution)
		}
	}
	seen := map[string]bool{}
	id := newRequestOf(t, e, admin, "fs__write_file", seen)
	e.MustOK(lead, "approve_action", map[string]any{"request_id": id})
	first := nextGW(t, events, "result")
	if first.Result.IsError || !strings.Contains(first.text(), "Successfully wrote") {
		t.Fatalf("the approved call answered %v %q, want the upstream's success", first.Result.IsError, first.text())
	}
	if b, _ := os.ReadFile(path); string(b) != "Lee on nights" {
		t.Fatalf("after the approval the file holds %q, want %q", b, "Lee on nights")
	}

	// Someone changes the file; a second run would undo that.
	if err := os.WriteFile(path, []byte("changed by the ward"), 0o600); err != nil {
		t.Fatal(err)
	}
	nextGW(t, events, "waiting")
	release()
	again := nextGW(t, events, "result")
	m, _ := again.Result.Meta["io.countersign/request"].(map[string]any)
	if again.Result.IsError || m["request_id"] != id || m["replayed"] != true || !strings.Contains(again.text(), "Successfully wrote") || !strings.Contains(again.text(), "nothing ran again") {
		t.Fatalf("the retry answered %v %q (meta %v), want the recorded answer of %s, replayed", again.Result.IsError, again.text(), again.Result.Meta, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed by the ward" {
		t.Fatalf("the retry wrote the file again: it holds %q, want %q", b, "changed by the ward")
	}
	if n := forwardedRuns(t, e, admin, id, "fs__write_file"); n != 1 {
		t.Fatalf("request %s was forwarded %d times, want once", id, n)
	}

	// The next identical call is a new one: it asks again.
	next := newRequestOf(t, e, admin, "fs__write_file", seen)
	e.MustOK(lead, "deny_action", map[string]any{"request_id": next, "reason": "the rota is final"})
	third := nextGW(t, events, "result")
	if !third.Result.IsError || !strings.Contains(third.text(), "denied") || !strings.Contains(third.text(), "the rota is final") {
		t.Fatalf("the new identical call answered %v %q, want its denial", third.Result.IsError, third.text())
	}
	if b, _ := os.ReadFile(path); string(b) != "changed by the ward" {
		t.Fatalf("a denied call wrote the file: it holds %q, want %q", b, "changed by the ward")
	}
}

// TestGatewayTSHostTaskRunsOnceAfterApproval: the TypeScript SDK's
// task-augmented call (2025-11-25 tasks) of a gated upstream tool gets a
// task handle at once; after the approval, its tasks/get and tasks/result
// give the upstream's answer, and the write ran exactly once.
func TestGatewayTSHostTaskRunsOnceAfterApproval(t *testing.T) {
	t.Parallel()
	e, dir, agent, lead, admin := gatewayWriteEnv(t, "40s")
	path := filepath.Join(dir, "task.txt")
	events := gatewayHost(t, e.URL+"/mcp", agent,
		map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": path, "content": "by task"}, "task": true})

	created := nextGW(t, events, "taskCreated")
	if created.TaskID == "" || created.Status != "working" {
		t.Fatalf("taskCreated %+v, want a task id, working", created)
	}
	id := newRequestOf(t, e, admin, "fs__write_file", map[string]bool{})
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the write ran before anyone approved it")
	}
	e.MustOK(lead, "approve_action", map[string]any{"request_id": id})
	res := nextGW(t, events, "result")
	m, _ := res.Result.Meta["io.countersign/request"].(map[string]any)
	if res.Result.IsError || !strings.Contains(res.text(), "Successfully wrote") || m["request_id"] != id {
		t.Fatalf("the task's result: %v %q (meta %v), want the upstream's answer under %s", res.Result.IsError, res.text(), res.Result.Meta, id)
	}
	if strings.Contains(res.text(), "nothing ran again") {
		t.Errorf("the task's result is marked as a replay: %q, want no %q in it", res.text(), "nothing ran again")
	}
	if b, _ := os.ReadFile(path); string(b) != "by task" {
		t.Fatalf("the file holds %q, want %q", b, "by task")
	}
	if n := forwardedRuns(t, e, admin, id, "fs__write_file"); n != 1 {
		t.Fatalf("request %s was forwarded %d times (tasks/get, then tasks/result), want once", id, n)
	}
}

// TestGatewayTasksExtensionGivesTheUpstreamAnswer: a 2026-07-28 client
// declaring the Tasks extension, in raw JSON-RPC over the real /mcp (no
// SDK client here speaks it): a gated upstream call answers a task;
// tasks/get says working until the approval, then completed with the
// upstream's answer inline; polled again, the same answer, not run again.
// A denied one completes with the denial, nothing written.
func TestGatewayTasksExtensionGivesTheUpstreamAnswer(t *testing.T) {
	t.Parallel()
	e, dir, agent, lead, admin := gatewayWriteEnv(t, "40s")
	c := &taskClient{t: t, url: e.URL + "/mcp", key: agent}
	path := filepath.Join(dir, "ext.txt")
	r := c.call("tools/call", map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": path, "content": "via the extension"}})
	taskID, _ := r["taskId"].(string)
	if r["resultType"] != "task" || taskID == "" || r["status"] != "working" {
		t.Fatalf("tools/call answered %v, want a task, working", r)
	}
	seen := map[string]bool{}
	id := newRequestOf(t, e, admin, "fs__write_file", seen)
	if g := c.call("tasks/get", map[string]any{"taskId": taskID}); g["status"] != "working" || g["result"] != nil {
		t.Fatalf("tasks/get before the decision: %v, want working, no result", g)
	}
	e.MustOK(lead, "approve_action", map[string]any{"request_id": id})
	g := c.call("tasks/get", map[string]any{"taskId": taskID})
	text := func(g map[string]any) string {
		b, _ := json.Marshal(g["result"])
		return string(b)
	}
	res, _ := g["result"].(map[string]any)
	if g["status"] != "completed" || res == nil || res["isError"] == true || !strings.Contains(text(g), "Successfully wrote") || !strings.Contains(text(g), id) {
		t.Fatalf("tasks/get after the approval: %v, want completed with the upstream's answer under %s", g, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "via the extension" {
		t.Fatalf("the file holds %q, want %q", b, "via the extension")
	}
	if err := os.WriteFile(path, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	if g := c.call("tasks/get", map[string]any{"taskId": taskID}); g["status"] != "completed" || !strings.Contains(text(g), "Successfully wrote") {
		t.Fatalf("tasks/get polled again: %v, want the same completed answer", g)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed since" {
		t.Fatalf("polling the task again ran the write again: the file holds %q, want %q", b, "changed since")
	}
	if n := forwardedRuns(t, e, admin, id, "fs__write_file"); n != 1 {
		t.Fatalf("request %s was forwarded %d times, want once", id, n)
	}

	denied := filepath.Join(dir, "denied.txt")
	r = c.call("tools/call", map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": denied, "content": "never"}})
	taskID, _ = r["taskId"].(string)
	id = newRequestOf(t, e, admin, "fs__write_file", seen)
	e.MustOK(lead, "deny_action", map[string]any{"request_id": id, "reason": "not this ward"})
	g = c.call("tasks/get", map[string]any{"taskId": taskID})
	res, _ = g["result"].(map[string]any)
	if g["status"] != "completed" || res["isError"] != true || !strings.Contains(text(g), "denied") || !strings.Contains(text(g), "not this ward") {
		t.Fatalf("tasks/get of a denied call: %v, want completed with the denial", g)
	}
	if _, err := os.Stat(denied); err == nil {
		t.Fatal("a denied call wrote its file")
	}
}

// TestGatewayStdioTaskRunsAfterASlackClick: over stdio (`countersign mcp`,
// which starts the upstream itself), the TypeScript SDK host's
// task-augmented call of a gated upstream tool gets a task; dr_smith's
// click in Slack (socket mode: the stdio process has no HTTP listener)
// approves it, and the task's result is the upstream's answer, the file
// written as proposed.
func TestGatewayStdioTaskRunsAfterASlackClick(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, longWaitConfig(f, "socket")+`gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: write_file, category: mutating, approvers: {roles: [member]}}
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_APP_TOKEN"] = "xoxb-e2e", "xapp-e2e"
	e.env["PATH"] = os.Getenv("PATH")
	agent := e.CreateKey("ward_bot", "agent")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"COUNTERSIGN_TEST_AS_MAIN": "1", "COUNTERSIGN_API_KEY": agent}
	for k, v := range e.env {
		env[k] = v
	}
	path := filepath.Join(dir, "stdio.txt")
	events, wait := tsHost(t, map[string]any{"transport": "stdio", "command": self, "args": []string{"mcp", "--config", e.cfg}, "env": env,
		"mode": "task", "tool": "fs__write_file", "arguments": map[string]any{"path": path, "content": "over stdio"}})
	if tools := next(t, events, "tools"); !strings.Contains(string(tools.Execution), `"taskSupport":"optional"`) {
		t.Fatalf("fs__write_file over stdio is listed with execution %s, want taskSupport optional", tools.Execution)
	}
	if created := next(t, events, "taskCreated"); created.Status != "working" {
		t.Fatalf("task: %+v, want status working", created)
	}
	waitFor(t, "the socket to open", func() bool { return len(f.Calls("apps.connections.open")) >= 1 })
	waitFor(t, "the card to be posted", func() bool { return len(f.Calls("chat.postMessage")) >= 1 })
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the write ran before the click")
	}
	frame, _ := json.Marshal(map[string]any{"type": "interactive", "envelope_id": "env-click", "accepts_response_payload": false, "payload": json.RawMessage(cardApproveClick(t, f, 0))})
	f.frames <- string(frame)
	res := next(t, events, "result")
	if res.Result.IsError || !strings.Contains(fmt.Sprint(res.Result.StructuredContent), "Successfully wrote") {
		t.Fatalf("the task's result over stdio: %+v, want the upstream's answer", res.Result)
	}
	if b, _ := os.ReadFile(path); string(b) != "over stdio" {
		t.Fatalf("the file holds %q, want %q", b, "over stdio")
	}
	wait()
}

// TestGatewayReplayThenAGrantRunsTheNextCall: approved with "next
// identical call" (a once grant), the call runs; the identical call right
// after is taken as a retry and gets the recorded answer; the one after
// that is a new call, which the grant approves at once: it runs, with no
// new request for a person.
func TestGatewayReplayThenAGrantRunsTheNextCall(t *testing.T) {
	t.Parallel()
	e, dir, agent, lead, admin := gatewayWriteEnv(t, "1s", ", grants: {max: 1h, allow: [once]}")
	cs := e.mcpSessionVersion(agent, "2025-06-18")
	path := filepath.Join(dir, "grant.txt")
	args := map[string]any{"path": path, "content": "obs every hour"}
	_, r := mcpCall(t, cs, "fs__write_file", args)
	sc, _ := r.StructuredContent.(map[string]any)
	id, _ := sc["request_id"].(string)
	if !r.IsError || sc["status"] != "pending" || id == "" {
		t.Fatalf("first call: %v %v, want pending", r.IsError, sc)
	}
	e.MustOK(lead, "approve_action", map[string]any{"request_id": id, "grant": map[string]any{"kind": "once"}})
	if text, r := mcpCall(t, cs, "fs__write_file", args); r.IsError || !strings.Contains(text, "Successfully wrote") {
		t.Fatalf("the approved call answered %v %q, want success with %q", r.IsError, text, "Successfully wrote")
	}
	if err := os.WriteFile(path, []byte("changed by the ward"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, r := mcpCall(t, cs, "fs__write_file", args)
	if m, _ := r.Meta["io.countersign/request"].(map[string]any); r.IsError || m["replayed"] != true || m["request_id"] != id {
		t.Fatalf("the identical call right after the run answered %v %q (meta %v), want the replay of %s", r.IsError, text, r.Meta, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed by the ward" {
		t.Fatalf("the replay wrote the file: it holds %q, want %q", b, "changed by the ward")
	}
	text, r = mcpCall(t, cs, "fs__write_file", args)
	m, _ := r.Meta["io.countersign/request"].(map[string]any)
	if r.IsError || m["replayed"] == true || m["request_id"] == id || m["request_id"] == nil {
		t.Fatalf("the next identical call answered %v %q (meta %v), want a new request run at once under the grant", r.IsError, text, r.Meta)
	}
	if b, _ := os.ReadFile(path); string(b) != "obs every hour" {
		t.Fatalf("the call under the grant did not write: the file holds %q, want %q", b, "obs every hour")
	}
	if n := forwardedRuns(t, e, admin, id, "fs__write_file"); n != 1 {
		t.Fatalf("request %s was forwarded %d times, want once", id, n)
	}
}
