package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/internal/nodetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// longWaitConfig: Slack (mode given) carries the requests of
// restart_service; dr_smith decides from Slack; MRTR rounds last 2s.
func longWaitConfig(f *slackFake, mode string) string {
	return `slack:
  mode: ` + mode + `
  bot_token_env: SLACK_BOT_TOKEN
  signing_secret_env: SLACK_SIGNING_SECRET
  app_token_env: SLACK_APP_TOKEN
  api_url: ` + f.srv.GetAPIURL() + `
  team_id: T1
  channels: {default: C0DEFAULT}
tools:
  - name: restart_service
    category: mutating
    schema: {type: object, required: [service]}
principals:
  - name: dr_smith
    role: member
    slack: U0123ABC
mcp:
  max_call_wait: 2s
`
}

// restartArgs is confirm_action's arguments for restarting service.
func restartArgs(service string) map[string]any {
	return map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": service}, "summary": "restart " + service}
}

// cardApproveClick is dr_smith's click on Approve of the n-th posted card, as a
// block_actions payload.
func cardApproveClick(t *testing.T, f *slackFake, n int) string {
	t.Helper()
	waitFor(t, fmt.Sprintf("card %d to be posted", n+1), func() bool { return len(f.Calls("chat.postMessage")) > n })
	post := f.Calls("chat.postMessage")[n]
	var blocks []map[string]any
	_ = json.Unmarshal([]byte(post.Form.Get("blocks")), &blocks)
	item := ""
	for _, b := range blocks {
		if id, ok := strings.CutPrefix(fmt.Sprint(b["block_id"]), "countersign:"); ok {
			item = id
		}
	}
	if item == "" {
		t.Fatalf("card %d carries no item: %s", n+1, post.Form.Get("blocks"))
	}
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": fmt.Sprintf("t-%d", n), "user": map[string]any{"id": "U0123ABC", "team_id": "T1"},
		"container": map[string]any{"type": "message", "channel_id": "C0DEFAULT", "message_ts": post.TS},
		"actions":   []any{map[string]any{"type": "button", "action_id": "countersign.approve", "block_id": "countersign:" + item, "value": item, "action_ts": "1.1"}},
	})
	return string(p)
}

// clickHTTP delivers dr_smith's click on the n-th card to /slack/interactions.
func clickHTTP(t *testing.T, e *testEnv, f *slackFake, n int) {
	t.Helper()
	if code, body := postSlack(t, e.URL, "/slack/interactions", url.Values{"payload": {cardApproveClick(t, f, n)}}, e2eSlackSecret); code != http.StatusOK {
		t.Fatalf("click answered %d %s, want %d", code, body, http.StatusOK)
	}
}

// hostEvent is one line of testdata/node/mcp_host.mjs.
type hostEvent struct {
	Type          string          `json:"type"`
	Status        string          `json:"status"`
	TaskID        string          `json:"taskId"`
	RequestID     string          `json:"request_id"`
	Text          string          `json:"text"`
	Message       string          `json:"message"`
	ServerTasks   json.RawMessage `json:"serverTasks"`
	Execution     json.RawMessage `json:"execution"`
	PollInterval  float64         `json:"pollInterval"`
	StatusMessage string          `json:"statusMessage"`
	Result        struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	} `json:"result"`
}

// tsHost runs the TypeScript SDK host with cfg and returns its events as
// they come, and a wait for it to end.
func tsHost(t *testing.T, cfg map[string]any) (<-chan hostEvent, func()) {
	t.Helper()
	dir := nodetest.Dir(t, "@modelcontextprotocol/sdk")
	b, _ := json.Marshal(cfg)
	cmd := nodetest.Cmd(t, dir, "mcp_host.mjs", string(b))
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan hostEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev hostEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return events, func() {
		if err := cmd.Wait(); err != nil {
			t.Errorf("the host exited with %v\n%s", err, stderr.String())
		}
	}
}

// next returns the host's next event, failing on an error event or an
// early end.
func next(t *testing.T, events <-chan hostEvent, want string) hostEvent {
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
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s event from the host", want)
		}
	}
}

// approvedByDrSmith checks a final tool result's data.
func approvedByDrSmith(t *testing.T, how string, sc map[string]any) {
	t.Helper()
	if sc["status"] != "approved" || sc["confirmed_by"] != "dr_smith [U0123ABC]" {
		t.Fatalf("%s: final answer %v, want approved by dr_smith [U0123ABC]", how, sc)
	}
}

// A pending confirm_action, answered over MCP as each client supports it,
// and completed after a person's click in Slack: the official TypeScript
// SDK (1.32.2, protocol 2025-11-25) with a task (the SDK's own
// task-augmented call) and with the bounded poll; the go-sdk client
// (2026-07-28) with MRTR and with the Tasks extension. The TypeScript SDK
// speaks neither MRTR nor the Tasks extension (it has no 2026-07-28), so
// those two paths are played with the go-sdk client.
func TestMCPLongWaitsCompleteAfterASlackClick(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, longWaitConfig(f, "http"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_SIGNING_SECRET"] = "xoxb-e2e", e2eSlackSecret
	agent := e.CreateKey("deploy_bot", "agent")
	e.Start()
	card := 0

	t.Run("typescript sdk task", func(t *testing.T) {
		events, wait := tsHost(t, map[string]any{"transport": "http", "url": e.URL + "/mcp", "key": agent, "mode": "task", "tool": "confirm_action", "arguments": restartArgs("web")})
		tools := next(t, events, "tools")
		if string(tools.Execution) != `{"taskSupport":"optional"}` || !strings.Contains(string(tools.ServerTasks), `"call"`) {
			t.Fatalf("the SDK was not told of tasks: execution %s, server tasks %s; want execution %s and server tasks with %s", tools.Execution, tools.ServerTasks, `{"taskSupport":"optional"}`, `"call"`)
		}
		created := next(t, events, "taskCreated")
		if created.Status != "working" || created.PollInterval != 5000 {
			t.Fatalf("task: %+v, want status working and pollInterval 5000", created)
		}
		clickHTTP(t, e, f, card)
		card++
		res := next(t, events, "result")
		approvedByDrSmith(t, "TypeScript SDK task", res.Result.StructuredContent)
		wait()
	})

	t.Run("typescript sdk bounded poll", func(t *testing.T) {
		events, wait := tsHost(t, map[string]any{"transport": "http", "url": e.URL + "/mcp", "key": agent, "mode": "poll", "tool": "confirm_action", "arguments": restartArgs("api")})
		if p := next(t, events, "pending"); p.Status != "pending" || !strings.Contains(p.Text, "Poll action_status") {
			t.Fatalf("pending: %+v, want status pending and a text containing %q", p, "Poll action_status")
		}
		clickHTTP(t, e, f, card)
		card++
		res := next(t, events, "result")
		approvedByDrSmith(t, "TypeScript SDK poll", res.Result.StructuredContent)
		wait()
	})

	t.Run("go sdk MRTR", func(t *testing.T) {
		cs := e.mcpSession(agent)
		done := make(chan *sdk.CallToolResult, 1)
		errs := make(chan error, 1)
		go func() {
			args := restartArgs("db")
			r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "confirm_action", Arguments: args})
			for rounds := 0; err == nil && r.NeedsInput() && rounds < 30; rounds++ {
				r, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "confirm_action", Arguments: args, RequestState: r.RequestState})
			}
			if err != nil {
				errs <- err
				return
			}
			done <- r
		}()
		clickHTTP(t, e, f, card)
		card++
		select {
		case r := <-done:
			sc, _ := r.StructuredContent.(map[string]any)
			approvedByDrSmith(t, "go-sdk MRTR", sc)
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(60 * time.Second):
			t.Fatal("the MRTR call did not complete")
		}
	})

	t.Run("go sdk tasks extension", func(t *testing.T) {
		c := &taskClient{t: t, url: e.URL + "/mcp", key: agent}
		res := c.call("tools/call", map[string]any{"name": "confirm_action", "arguments": restartArgs("cache")})
		if res["resultType"] != "task" || res["status"] != "working" {
			t.Fatalf("task creation: %v, want resultType task, status working", res)
		}
		id := res["taskId"].(string)
		clickHTTP(t, e, f, card)
		card++
		for polls := 0; ; polls++ {
			got := c.call("tasks/get", map[string]any{"taskId": id})
			if got["status"] == "completed" {
				r, _ := got["result"].(map[string]any)
				sc, _ := r["structuredContent"].(map[string]any)
				approvedByDrSmith(t, "Tasks extension", sc)
				break
			}
			if got["status"] != "working" || polls > 100 {
				t.Fatalf("tasks/get after %d polls: %v, want working, then completed within 100 polls", polls, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// taskClient speaks the Tasks extension over the go-sdk's streamable HTTP
// client transport (the go-sdk client has no Tasks): each message a
// 2026-07-28 request declaring the extension.
type taskClient struct {
	t    *testing.T
	url  string
	key  string
	conn sdk.Connection
	id   int64
}

// try is taskClient.call that returns a JSON-RPC error instead of failing.
func (c *taskClient) try(method string, params map[string]any) (map[string]any, map[string]any) {
	c.t.Helper()
	if c.conn == nil {
		tr := &sdk.StreamableClientTransport{Endpoint: c.url, HTTPClient: &http.Client{Transport: bearerTransport{c.key}}, MaxRetries: -1}
		conn, err := tr.Connect(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		c.conn = conn
		c.t.Cleanup(func() { conn.Close() })
	}
	params["_meta"] = map[string]any{
		sdk.MetaKeyProtocolVersion:    "2026-07-28",
		sdk.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		sdk.MetaKeyClientInfo:         map[string]any{"name": "go-sdk-tasks", "version": "1"},
	}
	c.id++
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, msg); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	for {
		m, err := c.conn.Read(ctx)
		if err != nil {
			c.t.Fatalf("%s: %v", method, err)
		}
		b, _ := jsonrpc.EncodeMessage(m)
		var resp struct {
			ID     int64          `json:"id"`
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if json.Unmarshal(b, &resp) != nil || resp.ID != c.id {
			continue
		}
		return resp.Result, resp.Error
	}
}

func (c *taskClient) call(method string, params map[string]any) map[string]any {
	c.t.Helper()
	res, rpcErr := c.try(method, params)
	if rpcErr != nil {
		c.t.Fatalf("%s: JSON-RPC error %v, want a result", method, rpcErr)
	}
	return res
}

// Over stdio (`countersign mcp`, this test binary standing in for the
// countersign binary) the same: the TypeScript SDK host starts it, gets a
// task, and the click in Slack (socket mode: the stdio process has no
// HTTP listener) completes it.
func TestStdioMCPTaskCompletesAfterASlackClick(t *testing.T) {
	t.Parallel()
	f := newSlackFake(t)
	e := newTestEnv(t, longWaitConfig(f, "socket"))
	e.env["SLACK_BOT_TOKEN"], e.env["SLACK_APP_TOKEN"] = "xoxb-e2e", "xapp-e2e"
	agent := e.CreateKey("deploy_bot", "agent")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"COUNTERSIGN_TEST_AS_MAIN": "1", "COUNTERSIGN_API_KEY": agent}
	for k, v := range e.env {
		env[k] = v
	}
	events, wait := tsHost(t, map[string]any{"transport": "stdio", "command": self, "args": []string{"mcp", "--config", e.cfg}, "env": env,
		"mode": "task", "tool": "confirm_action", "arguments": restartArgs("web")})
	next(t, events, "tools")
	if created := next(t, events, "taskCreated"); created.Status != "working" {
		t.Fatalf("task: %+v, want status working", created)
	}
	waitFor(t, "the socket to open", func() bool { return len(f.Calls("apps.connections.open")) >= 1 })
	frame, _ := json.Marshal(map[string]any{"type": "interactive", "envelope_id": "env-click", "accepts_response_payload": false, "payload": json.RawMessage(cardApproveClick(t, f, 0))})
	f.frames <- string(frame)
	res := next(t, events, "result")
	approvedByDrSmith(t, "TypeScript SDK task over stdio", res.Result.StructuredContent)
	wait()
}
