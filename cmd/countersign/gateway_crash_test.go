//go:build unix

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// startServeProcess runs `countersign serve` as its own process (this test
// binary as main) in its own process group, and returns its base URL and
// the process.
func startServeProcess(t *testing.T, e *testEnv) (string, *exec.Cmd) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve", "--config", e.cfg)
	cmd.Env = []string{"COUNTERSIGN_TEST_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + e.dir}
	for k, v := range e.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the server process did not start")
		}
		return "http://" + a, cmd
	case <-time.After(60 * time.Second):
		t.Fatal("the server process did not start within 60s")
	}
	return "", nil
}

// TestGatewayKilledWhileForwardingIsOutcomeUnknown: kill -9 of the
// gateway (and its upstream) while an approved call is at the upstream;
// the next start audits the request as gateway_outcome_unknown and says
// so in the thread of its Slack card; the call ran once, and the host's
// retry does not run it again.
func TestGatewayKilledWhileForwardingIsOutcomeUnknown(t *testing.T) {
	dir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	f := newSlackFake(t)
	e := newTestEnv(t, `slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: `+f.srv.GetAPIURL()+`
  team_id: T1
  channels: {default: C0DEFAULT}
mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: lying
      command: `+nodetest.Node(t)+`
      args: [lying_server.mjs]
      dir: `+dir+`
      tools:
        - {match: hang, category: mutating}
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	admin := e.CreateKey("ops_admin", "admin")
	var proc *exec.Cmd
	e.URL, proc = startServeProcess(t, e)

	ran := filepath.Join(t.TempDir(), "ran.txt")
	args := map[string]any{"path": ran}
	cs := e.mcpSessionVersion(agent, "2025-06-18")
	_, r := mcpCall(t, cs, "lying__hang", args)
	sc, _ := r.StructuredContent.(map[string]any)
	id, _ := sc["request_id"].(string)
	if sc["status"] != "pending" || id == "" {
		t.Fatalf("first call: %+v, want pending", sc)
	}
	e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
	go func() { _, _ = cs.CallTool(context.Background(), callParams("lying__hang", args)) }() // forwarded; never answers
	waitFor(t, "the upstream to run the call", func() bool { b, _ := os.ReadFile(ran); return len(b) > 0 })

	if err := syscall.Kill(-proc.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	e.URL, _ = startServeProcess(t, e)

	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw
	if !strings.Contains(audit, "gateway_outcome_unknown") || !strings.Contains(audit, id+" lying__hang: outcome unknown") {
		t.Fatalf("the restart did not record the outcome of %s as unknown, want %q and %q in:\n%s", id, "gateway_outcome_unknown", id+" lying__hang: outcome unknown", audit)
	}
	waitFor(t, "the outcome-unknown note in the card's thread", func() bool {
		for _, c := range f.Calls("chat.postMessage") {
			if c.Form.Get("thread_ts") != "" && strings.Contains(c.Form.Get("text")+c.Form.Get("blocks"), "Outcome unknown") {
				return true
			}
		}
		return false
	})
	cs2 := e.mcpSessionVersion(agent, "2025-06-18")
	text, r := mcpCall(t, cs2, "lying__hang", args)
	sc, _ = r.StructuredContent.(map[string]any)
	if !r.IsError || sc["status"] != "pending" || sc["request_id"] == id {
		t.Fatalf("the host's retry after the restart answered %v %q, want a new request for a new decision", r.IsError, text)
	}
	if b, _ := os.ReadFile(ran); string(b) != "ran\n" {
		t.Fatalf("the upstream ran the call %d times, want once", strings.Count(string(b), "ran"))
	}
}

func callParams(name string, args any) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: name, Arguments: args}
}

// TestGatewayKilledWhileHoldingLosesNothing: kill -9 of the gateway while
// a call waits for a person; after the restart the request is still there
// to approve, and the host's retry of the same call runs it, once.
func TestGatewayKilledWhileHoldingLosesNothing(t *testing.T) {
	dir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	e := newTestEnv(t, `mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: lying
      command: `+nodetest.Node(t)+`
      args: [lying_server.mjs]
      dir: `+dir+`
      tools:
        - {match: wipe, category: mutating}
`)
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	var proc *exec.Cmd
	e.URL, proc = startServeProcess(t, e)
	target := filepath.Join(t.TempDir(), "wiped.txt")
	args := map[string]any{"path": target}
	_, r := mcpCall(t, e.mcpSessionVersion(agent, "2025-06-18"), "lying__wipe", args)
	sc, _ := r.StructuredContent.(map[string]any)
	id, _ := sc["request_id"].(string)
	if sc["status"] != "pending" || id == "" {
		t.Fatalf("first call: %+v, want pending", sc)
	}
	if err := syscall.Kill(-proc.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	e.URL, _ = startServeProcess(t, e)
	e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
	text, r := mcpCall(t, e.mcpSessionVersion(agent, "2025-06-18"), "lying__wipe", args)
	if m, _ := r.Meta["io.countersign/request"].(map[string]any); r.IsError || m["request_id"] != id {
		t.Fatalf("the retry after the restart answered %v %q (meta %v), want the approved %s run", r.IsError, text, r.Meta, id)
	}
	if b, _ := os.ReadFile(target); string(b) != "wiped\n" {
		t.Fatalf("the call's effect: %q, want %q", b, "wiped\n")
	}
}
