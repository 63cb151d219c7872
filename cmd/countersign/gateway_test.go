package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/internal/nodetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayConfig: the real filesystem server over dir as upstream fs, the
// hostile lying_server.mjs as upstream lying (no rule: unclassified), Slack
// (the fake) carrying the cards, dr_smith deciding from Slack.
func gatewayConfig(t *testing.T, f *slackFake, dir string) string {
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	nodeDir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	return `slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: ` + f.srv.GetAPIURL() + `
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
mcp:
  max_call_wait: 40s
gateway:
  upstreams:
    - name: fs
      command: ` + fsBin + `
      args: [` + dir + `]
      default: {category: destructive}
      tools:
        - {match: "read_*", category: read-only}
        - {match: list_allowed_directories, category: read-only}
        - match: write_file
          category: mutating
          schema: {type: object, required: [path, content]}
          approvers: {roles: [member]}
    - name: lying
      command: ` + nodetest.Node(t) + `
      args: [lying_server.mjs]
      dir: ` + nodeDir + `
`
}

// gwEvent is one line of testdata/node/gateway_host.mjs.
type gwEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message string `json:"message"`
	Tools   []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Annotations map[string]any `json:"annotations"`
		Execution   map[string]any `json:"execution"`
	} `json:"tools"`
	TaskID string `json:"taskId"`
	Status string `json:"status"`
	Result struct {
		IsError           bool             `json:"isError"`
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		Meta              map[string]any   `json:"_meta"`
	} `json:"result"`
}

func (ev gwEvent) text() string {
	var b strings.Builder
	for _, c := range ev.Result.Content {
		if s, ok := c["text"].(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

// gatewayHost runs the TypeScript SDK host making calls in turn.
func gatewayHost(t *testing.T, url, key string, calls ...map[string]any) <-chan gwEvent {
	t.Helper()
	events, _ := gatewayHostIO(t, url, key, calls...)
	return events
}

// gatewayHostIO is gatewayHost with release, which lets the host make a
// call marked "wait": true (after its "waiting" event).
func gatewayHostIO(t *testing.T, url, key string, calls ...map[string]any) (events <-chan gwEvent, release func()) {
	t.Helper()
	dir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	b, _ := json.Marshal(map[string]any{"url": url, "key": key, "calls": calls})
	cmd := nodetest.Cmd(t, dir, "gateway_host.mjs", string(b))
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan gwEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var ev gwEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				ch <- ev
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return ch, func() {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			t.Errorf("releasing the host: %v", err)
		}
	}
}

func nextGW(t *testing.T, events <-chan gwEvent, want string) gwEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the host ended before a %s event", want)
			}
			if ev.Type == "error" {
				t.Fatalf("the host failed waiting for %s: %s", want, ev.Message)
			}
			if ev.Type == want {
				return ev
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("no %s event from the host", want)
		}
	}
}

// heldRequest waits for the n-th card to be posted and returns the id of
// the request the audit says was made for tool and is not in seen.
func heldRequest(t *testing.T, e *testEnv, f *slackFake, key string, n int, tool string, seen map[string]bool) string {
	t.Helper()
	waitFor(t, fmt.Sprintf("card %d to be posted", n+1), func() bool { return len(f.Calls("chat.postMessage")) > n })
	re := regexp.MustCompile(`(req_[A-Za-z0-9_-]+) ` + regexp.QuoteMeta(tool) + ` category=`)
	for _, m := range re.FindAllStringSubmatch(e.MustOK(key, "audit_log", map[string]any{"limit": 200}).Raw, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			return m[1]
		}
	}
	t.Fatalf("the audit names no new request of %s", tool)
	return ""
}

// TestGatewayFilesystemEndToEnd plays the official TypeScript SDK as the
// host of Countersign in front of the real filesystem server: a read
// passes through; a write waits for a person, and what lands on disk is
// exactly what was approved (an approver's edit); a Slack click approves
// another; a denial leaves the disk untouched; and a hostile upstream's
// read-only claims on a tool that writes do not get it past the gate.
func TestGatewayFilesystemEndToEnd(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ward 7 rota"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, gatewayConfig(t, f, dir))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	e.env["PATH"] = os.Getenv("PATH")
	agent := e.CreateKey("ward_bot", "agent")
	lead := e.CreateKey("lead", "member")
	admin := e.CreateKey("ops_admin", "admin")
	e.Start()

	edited := filepath.Join(dir, "edited.txt")
	clicked := filepath.Join(dir, "clicked.txt")
	denied := filepath.Join(dir, "denied.txt")
	wiped := filepath.Join(dir, "wiped.txt")
	events := gatewayHost(t, e.URL+"/mcp", agent,
		map[string]any{"name": "fs__read_text_file", "arguments": map[string]any{"path": filepath.Join(dir, "notes.txt")}},
		map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": edited, "content": "the agent's text"}},
		map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": clicked, "content": "clicked through"}},
		map[string]any{"name": "fs__write_file", "arguments": map[string]any{"path": denied, "content": "never"}},
		map[string]any{"name": "lying__wipe", "arguments": map[string]any{"path": wiped}},
	)

	tools := nextGW(t, events, "tools")
	served := map[string]int{}
	for i, tl := range tools.Tools {
		served[tl.Name] = i
	}
	for _, name := range []string{"confirm_action", "fs__read_text_file", "fs__write_file", "lying__wipe"} {
		if _, ok := served[name]; !ok {
			t.Fatalf("tools/list lacks %s: %v", name, served)
		}
	}
	wipe := tools.Tools[served["lying__wipe"]]
	if wipe.Annotations["readOnlyHint"] != false || wipe.Annotations["destructiveHint"] != true {
		t.Errorf("lying__wipe is served with annotations %v, want readOnlyHint false and destructiveHint true: the upstream's readOnlyHint must not pass through", wipe.Annotations)
	}
	if !strings.Contains(wipe.Description, "unclassified") || !strings.Contains(wipe.Description, "its claim, not verified") {
		t.Errorf("lying__wipe's description does not mark the upstream's words as its claim: %q, want %q and %q in it", wipe.Description, "unclassified", "its claim, not verified")
	}
	if rd := tools.Tools[served["fs__read_text_file"]]; rd.Annotations["readOnlyHint"] != true {
		t.Errorf("fs__read_text_file annotations %v, want readOnlyHint (by config)", rd.Annotations)
	}

	// 1. A read-only tool passes straight through.
	read := nextGW(t, events, "result")
	if read.Result.IsError || !strings.Contains(read.text(), "ward 7 rota") {
		t.Fatalf("read_text_file through the gateway: %+v, want success with %q", read.Result, "ward 7 rota")
	}
	if n := len(f.Calls("chat.postMessage")); n != 0 {
		t.Errorf("a read-only call posted %d cards, want 0", n)
	}

	// 2. A write waits; the approver edits the content; the edit lands.
	seen := map[string]bool{}
	id := heldRequest(t, e, f, admin, 0, "fs__write_file", seen)
	if _, err := os.Stat(edited); err == nil {
		t.Fatal("the write ran before anyone approved it")
	}
	e.MustOK(lead, "approve_action", map[string]any{"request_id": id, "arguments": map[string]any{"path": edited, "content": "the approver's text"}})
	w1 := nextGW(t, events, "result")
	if w1.Result.IsError {
		t.Fatalf("approved write answered an error: %s, want success", w1.text())
	}
	if b, _ := os.ReadFile(edited); string(b) != "the approver's text" {
		t.Fatalf("%s holds %q, want exactly the approved (edited) content", edited, b)
	}
	if m, _ := w1.Result.Meta["io.countersign/request"].(map[string]any); m["request_id"] != id || m["edited"] != true {
		t.Errorf("the result's _meta names %v, want request %s, edited", w1.Result.Meta, id)
	}

	// 3. A Slack click approves the next one, unedited.
	heldRequest(t, e, f, admin, 1, "fs__write_file", seen)
	clickHTTP(t, e, f, 1)
	w2 := nextGW(t, events, "result")
	if b, _ := os.ReadFile(clicked); w2.Result.IsError || string(b) != "clicked through" {
		t.Fatalf("after the Slack click: result %s, file %q; want success and %q", w2.text(), b, "clicked through")
	}

	// 4. A denial leaves the disk untouched and says so.
	id = heldRequest(t, e, f, admin, 2, "fs__write_file", seen)
	e.MustOK(lead, "deny_action", map[string]any{"request_id": id, "reason": "not on this ward"})
	w3 := nextGW(t, events, "result")
	if !w3.Result.IsError || !strings.Contains(w3.text(), "denied") || !strings.Contains(w3.text(), "not on this ward") {
		t.Fatalf("denied write answered %v %q, want a tool error naming the denial and its reason", w3.Result.IsError, w3.text())
	}
	if _, err := os.Stat(denied); err == nil {
		t.Fatal("a denied write landed on disk")
	}

	// 5. The attack: a tool that claims to be read-only, but writes, is
	// held like any unclassified tool; denied, its effect never happens.
	id = heldRequest(t, e, f, admin, 3, "lying__wipe", seen)
	if _, err := os.Stat(wiped); err == nil {
		t.Fatal("the lying upstream's tool ran without a decision")
	}
	e.MustOK(lead, "deny_action", map[string]any{"request_id": id, "reason": "no"})
	w4 := nextGW(t, events, "result")
	if !w4.Result.IsError {
		t.Fatalf("denied lying__wipe answered %q, want a tool error", w4.text())
	}
	if _, err := os.Stat(wiped); err == nil {
		t.Fatal("the lying upstream's tool ran after a denial")
	}

	// The audit records the pass-through and each forwarded answer.
	audit := e.MustOK(admin, "audit_log", map[string]any{"limit": 100})
	raw := audit.Raw
	for _, want := range []string{"gateway_passed", "fs__read_text_file read-only", "gateway_forwarded", "result_sha256="} {
		if !strings.Contains(raw, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}

	resp, err := http.Get(e.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if ready["status"] != "ready" {
		t.Errorf("/readyz = %v with both upstreams up, want status %q", ready, "ready")
	}
}

// TestGatewayMRTRQuorumAndRetryRunOnce: a 2026-07-28 client (the go-sdk)
// calls a quorum-2 upstream tool through the gateway and follows MRTR
// rounds; one approval is not enough; the second runs the write once; a
// host that retries with the same requestState afterwards gets the
// recorded answer of that run, and nothing runs again.
func TestGatewayMRTRQuorumAndRetryRunOnce(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, `mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: write_file, category: mutating, quorum: 2, approvers: {roles: [member]}}
`)
	e.env["PATH"] = os.Getenv("PATH")
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	bob := e.CreateKey("bob", "member")
	admin := e.CreateKey("ops_admin", "admin")
	e.Start()

	cs := e.mcpSession(agent)
	path := filepath.Join(dir, "q.txt")
	args := map[string]any{"path": path, "content": "two people agreed"}
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "fs__write_file", Arguments: args})
	if err != nil || !r.NeedsInput() {
		t.Fatalf("first round: %v %+v, want input_required", err, r)
	}
	id := heldRequestAudit(t, e, admin, "fs__write_file")
	e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
	r, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "fs__write_file", Arguments: args, RequestState: r.RequestState})
	if err != nil || !r.NeedsInput() {
		t.Fatalf("after one approval of two: %v %+v, want still input_required", err, r)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the write ran on one approval of a quorum of two")
	}
	state := r.RequestState
	e.MustOK(bob, "approve_action", map[string]any{"request_id": id})
	r, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "fs__write_file", Arguments: args, RequestState: state})
	if err != nil || r.NeedsInput() || r.IsError {
		t.Fatalf("after both approvals: %v %+v, want a result that neither needs input nor is an error", err, r)
	}
	if b, _ := os.ReadFile(path); string(b) != "two people agreed" {
		t.Fatalf("file holds %q, want %q", b, "two people agreed")
	}
	// Someone changes the file; a retry that ran again would undo it.
	if err := os.WriteFile(path, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "fs__write_file", Arguments: args, RequestState: state})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	m, _ := r.Meta["io.countersign/request"].(map[string]any)
	if r.IsError || !strings.Contains(text.String(), "Successfully wrote") || m["request_id"] != id || m["replayed"] != true {
		t.Fatalf("a retry after the run answered %v %q (meta %v), want the recorded answer of %s, replayed", r.IsError, text.String(), r.Meta, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed since" {
		t.Fatalf("the retry ran the write again: file holds %q, want %q", b, "changed since")
	}
}

// heldRequestAudit waits for the audit to name a request of tool.
func heldRequestAudit(t *testing.T, e *testEnv, admin, tool string) string {
	t.Helper()
	re := regexp.MustCompile(`(req_[A-Za-z0-9_-]+) ` + regexp.QuoteMeta(tool) + ` category=`)
	var id string
	waitFor(t, "a request of "+tool, func() bool {
		m := re.FindStringSubmatch(e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Raw)
		if m != nil {
			id = m[1]
		}
		return m != nil
	})
	return id
}

// TestGatewayOlderHostRetriesTheSameRequest: a 2025-06-18 client gets a
// bounded wait, then a tool error naming the pending request; its retry of
// the same call, once approved, runs the write (once, with no second card);
// the next identical call (a host that lost the answer) gets the recorded
// answer and nothing runs; a later identical call is a new request for a
// new decision.
func TestGatewayOlderHostRetriesTheSameRequest(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, `mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: write_file, category: mutating}
`)
	e.env["PATH"] = os.Getenv("PATH")
	agent := e.CreateKey("ward_bot", "agent")
	alice := e.CreateKey("alice", "member")
	e.Start()
	cs := e.mcpSessionVersion(agent, "2025-06-18")
	path := filepath.Join(dir, "r.txt")
	args := map[string]any{"path": path, "content": "once"}

	text, r := mcpCall(t, cs, "fs__write_file", args)
	sc, _ := r.StructuredContent.(map[string]any)
	id, _ := sc["request_id"].(string)
	if !r.IsError || sc["status"] != "pending" || id == "" || !strings.Contains(text, id) {
		t.Fatalf("first call answered %v %q %v, want a pending error naming the request", r.IsError, text, sc)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the write ran before the approval")
	}
	e.MustOK(alice, "approve_action", map[string]any{"request_id": id})
	text, r = mcpCall(t, cs, "fs__write_file", args)
	if r.IsError {
		t.Fatalf("the retry after the approval answered the error %q, want success", text)
	}
	if m, _ := r.Meta["io.countersign/request"].(map[string]any); m["request_id"] != id {
		t.Errorf("the retry ran under %v, want the approved request %s", r.Meta, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "once" {
		t.Fatalf("file holds %q, want %q", b, "once")
	}
	if err := os.WriteFile(path, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, r = mcpCall(t, cs, "fs__write_file", args)
	if m, _ := r.Meta["io.countersign/request"].(map[string]any); r.IsError || m["request_id"] != id || m["replayed"] != true || !strings.Contains(text, "Successfully wrote") || !strings.Contains(text, "nothing ran again") {
		t.Fatalf("the retry of a call that ran answered %v %q (meta %v), want the recorded answer of %s, replayed", r.IsError, text, r.Meta, id)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed since" {
		t.Fatalf("the retry ran the write again: file holds %q, want %q", b, "changed since")
	}
	text, r = mcpCall(t, cs, "fs__write_file", args)
	sc, _ = r.StructuredContent.(map[string]any)
	if !r.IsError || sc["status"] != "pending" || sc["request_id"] == id {
		t.Fatalf("an identical call after the run answered %v %q, want a new pending request", r.IsError, text)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed since" {
		t.Fatalf("the identical call ran without a decision: file holds %q, want %q", b, "changed since")
	}
	// Denied, the retry of that call is told so; nothing runs.
	e.MustOK(alice, "deny_action", map[string]any{"request_id": sc["request_id"], "reason": "the rota is final"})
	text, r = mcpCall(t, cs, "fs__write_file", args)
	if !r.IsError || !strings.Contains(text, "denied") || !strings.Contains(text, "the rota is final") {
		t.Fatalf("the retry after a denial answered %v %q, want the denial", r.IsError, text)
	}
	if b, _ := os.ReadFile(path); string(b) != "changed since" {
		t.Fatalf("a denied call ran: file holds %q, want %q", b, "changed since")
	}
}

// TestGatewayDocsPaste: docs/gateway.md's walk-through runs as pasted, with
// the filesystem server from testdata/node on the PATH, and its YAML
// blocks load as a configuration.
func TestGatewayDocsPaste(t *testing.T) {
	bin := filepath.Dir(nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem"))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	b, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := docBlocks(t, string(b))
	if len(blocks) < 4 {
		t.Fatalf("docs/gateway.md has %d shell blocks, want at least 4; the page changed shape", len(blocks))
	}
	pasteBlocks(t, "docs/gateway.md", blocks)

	n := 0
	for _, part := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		n++
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte("store:\n  path: "+filepath.Join(filepath.Dir(path), "cs.db")+"\n"+block), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err != nil {
			t.Errorf("docs/gateway.md yaml block %d does not load: %v\n%s", n, err, block)
		}
	}
	if n == 0 {
		t.Fatal("docs/gateway.md has no yaml block")
	}
}

// TestGatewayDryRunCompanion: a write classified destructive with a
// read-only companion (read_text_file, given the call's own arguments):
// the card shows the companion's answer, the file's current content, as
// the dry-run plan, before anyone approves; nothing is written meanwhile.
func TestGatewayDryRunCompanion(t *testing.T) {
	f := newSlackFake(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "orders.txt")
	if err := os.WriteFile(path, []byte("warfarin 5mg nightly"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, `slack:
  mode: http
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  api_url: `+f.srv.GetAPIURL()+`
  team_id: T1
  channels: {default: C0DEFAULT}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
mcp:
  max_call_wait: 1s
gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      tools:
        - {match: "read_*", category: read-only}
        - {match: write_file, category: destructive, dry_run: {tool: read_text_file}}
`)
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	e.env["PATH"] = os.Getenv("PATH")
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	cs := e.mcpSessionVersion(agent, "2025-06-18")
	text, r := mcpCall(t, cs, "fs__write_file", map[string]any{"path": path, "content": "warfarin 2mg nightly"})
	if sc, _ := r.StructuredContent.(map[string]any); !r.IsError || sc["status"] != "pending" {
		t.Fatalf("the write answered %v %q, want pending", r.IsError, text)
	}
	waitFor(t, "the card", func() bool { return len(f.Calls("chat.postMessage")) == 1 })
	blocks := f.Calls("chat.postMessage")[0].Form.Get("blocks")
	for _, want := range []string{"Dry run by upstream fs's read_text_file", "warfarin 5mg nightly"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the card lacks %q:\n%s", want, blocks)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "warfarin 5mg nightly" {
		t.Fatalf("the file changed before a decision: %q, want %q", b, "warfarin 5mg nightly")
	}
}

// TestGatewayDryRunMustBeReadOnly: a dry_run companion the upstream's
// rules do not classify read-only stops the config.
func TestGatewayDryRunMustBeReadOnly(t *testing.T) {
	_, err := config.Parse([]byte(`gateway:
  upstreams:
    - name: fs
      command: srv
      default: {category: mutating, dry_run: {tool: x}}
      tools:
        - {match: write_file, category: destructive, dry_run: {tool: edit_file}}
        - {match: move_file, category: destructive, dry_run: {}}
`), t.TempDir())
	for _, want := range []string{
		"gateway.upstreams[0].tools[0].dry_run.tool: edit_file is not classified read-only",
		"gateway.upstreams[0].tools[1].dry_run.tool: required",
		"gateway.upstreams[0].default.dry_run: ",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// TestGatewayUpstreamPrincipals: an upstream limited to ward_bot refuses
// another agent's call, even of a read-only tool, and serves ward_bot's.
func TestGatewayUpstreamPrincipals(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(path, []byte("ward 7"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsBin := nodetest.Bin(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem")
	e := newTestEnv(t, `gateway:
  upstreams:
    - name: fs
      command: `+fsBin+`
      args: [`+dir+`]
      principals: [ward_bot]
      tools:
        - {match: "read_*", category: read-only}
`)
	e.env["PATH"] = os.Getenv("PATH")
	ward := e.CreateKey("ward_bot", "agent")
	other := e.CreateKey("night_bot", "agent")
	e.Start()
	text, r := mcpCall(t, e.mcpSession(other), "fs__read_text_file", map[string]any{"path": path})
	if !r.IsError || !strings.Contains(text, "Access denied") || strings.Contains(text, "ward 7") {
		t.Fatalf("night_bot's read answered %v %q, want Access denied", r.IsError, text)
	}
	text, r = mcpCall(t, e.mcpSession(ward), "fs__read_text_file", map[string]any{"path": path})
	if r.IsError || !strings.Contains(text, "ward 7") {
		t.Fatalf("ward_bot's read answered %v %q, want success with %q", r.IsError, text, "ward 7")
	}
}
