package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	deployBot = &bot.Caller{Principal: bot.Principal{ID: "prin_deploy", Name: "deploy-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "mcp"}
	otherBot  = &bot.Caller{Principal: bot.Principal{ID: "prin_other", Name: "other-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "mcp"}
	alice     = &bot.Caller{Principal: bot.Principal{ID: "prin_alice", Name: "alice", Role: policy.RoleMember, Kind: "person"}, Surface: "http"}
)

// actionBot is a bot with the action tools: restart_service (mutating)
// and wipe_disk (destructive, approved only after a step-up).
func actionBot(t *testing.T) *recorder {
	t.Helper()
	b := testbot.New(t, bot.Options{})
	_, err := actiontools.Register(b, actiontools.Options{
		Tools: []actiontools.ToolSpec{
			{Name: "restart_service", Category: "mutating", Timeout: time.Hour},
			{Name: "wipe_disk", Category: "destructive", Timeout: time.Hour},
		},
		StepUp: actiontools.StepUpSpec{Tools: []string{"wipe_disk"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{Bot: b}
}

var restart = map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "summary": "restart web"}

func wipe() map[string]any {
	return map[string]any{"tool": "wipe_disk", "arguments": map[string]any{"disk": "sdb"}, "summary": "wipe sdb", "dry_run": "wipefs -a /dev/sdb"}
}

// decide has alice approve request id.
func decide(t *testing.T, b *recorder, id string) {
	t.Helper()
	if _, err := b.Call(context.Background(), alice, "approve_action", []byte(`{"request_id":"`+id+`"}`)); err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
}

func longOptions(b *recorder, c CallerFunc) Options {
	return Options{App: b, Caller: c, Version: "test", MaxCallWait: time.Second, StateKey: []byte("test state key"),
		ItemURL: func(id uint64) string { return fmt.Sprintf("https://cs.example/ui/items/%d", id) }}
}

// connectWith serves o in memory and connects a go-sdk client with copts.
func connectWith(t *testing.T, o Options, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ss, err := NewServer(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func dataOf(r *sdk.CallToolResult) map[string]any {
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// A 2026-07-28 client without the Tasks extension: a pending confirm_action
// waits up to max_call_wait, then answers MRTR input_required with a
// sealed requestState and no input requests; the retry with that state
// waits on the same request (no second one is made) and answers the
// decision.
func TestMRTRPendingConfirmRetriesOnTheSameRequest(t *testing.T) {
	b := actionBot(t)
	cs := connectWith(t, longOptions(b, callerOf(deployBot)), nil)
	ctx := context.Background()
	params := &sdk.CallToolParams{Name: "confirm_action", Arguments: restart}
	r, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !r.NeedsInput() || r.RequestState == "" || r.InputRequests != nil || len(r.Content) != 0 {
		t.Fatalf("pending confirm_action over MRTR: needs input %v, state %q, input requests %v, content %v; want input_required with a requestState only", r.NeedsInput(), r.RequestState, r.InputRequests, r.Content)
	}
	pending := b.ids()
	if len(pending) != 1 {
		t.Fatalf("pending requests: %v, want one", pending)
	}
	// Still pending: the retry answers input_required again, on the same
	// request.
	r2, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: restart, RequestState: r.RequestState})
	if err != nil || !r2.NeedsInput() || r2.RequestState == "" {
		t.Fatalf("retry while pending = %+v (err %v), want input_required with a requestState", r2, err)
	}
	if got := b.ids(); len(got) != 1 || got[0] != pending[0] {
		t.Fatalf("after a retry, pending %v, want only %v", got, pending)
	}
	decide(t, b, pending[0])
	r3, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: restart, RequestState: r2.RequestState})
	if err != nil {
		t.Fatal(err)
	}
	d := dataOf(r3)
	if r3.NeedsInput() || r3.IsError || d["status"] != "approved" || d["request_id"] != pending[0] || !strings.Contains(d["confirmed_by"].(string), "alice") {
		t.Fatalf("after the decision = %v %q (needs input %v, error %v), want status approved on %s, confirmed by alice", d, resultText(r3), r3.NeedsInput(), r3.IsError, pending[0])
	}
}

// A decision made while the MRTR call waits completes that call: the
// client gets the decision, not input_required.
func TestMRTRCallCompletesWhenDecidedDuringTheWait(t *testing.T) {
	b := actionBot(t)
	o := longOptions(b, callerOf(deployBot))
	o.MaxCallWait = 50 * time.Second // the decision comes long before
	cs := connectWith(t, o, nil)
	go func() {
		for len(b.ids()) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := b.Call(context.Background(), alice, "approve_action", []byte(`{"request_id":"`+b.ids()[0]+`"}`)); err != nil {
			t.Errorf("approve: %v", err)
		}
	}()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "confirm_action", Arguments: restart})
	if err != nil {
		t.Fatal(err)
	}
	if d := dataOf(r); r.NeedsInput() || d["status"] != "approved" {
		t.Fatalf("decided during the wait: needs input %v, %v; want no input_required and status approved", r.NeedsInput(), d)
	}
}

// recorder is the bot, recording the requests confirm_action makes.
type recorder struct {
	*bot.Bot
	mu   sync.Mutex
	made []string
}

// Call runs the bot's Call and records a request confirm_action made.
func (r *recorder) Call(ctx context.Context, c *bot.Caller, tool string, args []byte) (bot.Result, error) {
	res, err := r.Bot.Call(ctx, c, tool, args)
	if d, ok := res.Data.(map[string]any); ok && err == nil && tool == "confirm_action" {
		r.mu.Lock()
		r.made = append(r.made, d["request_id"].(string))
		r.mu.Unlock()
	}
	return res, err
}

// ids are the requests made so far.
func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.made...)
}

// The requestState is attacker-controlled input: altered, another
// principal's, another call's or expired, it is refused with a JSON-RPC
// error, and no request is made or decided.
func TestMRTRRefusesARequestStateItDidNotIssueForThisCall(t *testing.T) {
	b := actionBot(t)
	clock := time.Now()
	var mu sync.Mutex
	o := longOptions(b, callerOf(deployBot))
	o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cs := connectWith(t, o, nil)
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: restart})
	if err != nil || r.RequestState == "" {
		t.Fatalf("first round = %+v (err %v), want a requestState", r, err)
	}
	state := r.RequestState
	altered := []byte(state)
	altered[len(state)/2] ^= 1
	o2 := o
	o2.Caller = callerOf(otherBot)
	other := connectWith(t, o2, nil)
	for _, c := range []struct {
		name  string
		cs    *sdk.ClientSession
		args  any
		state string
		want  string
	}{
		{"altered", cs, restart, string(altered), "requestState refused: not issued by this server"},
		{"a task id", cs, restart, strings.Replace(state, kindState, kindTask, 1), "requestState refused: not issued by this server"},
		{"another principal", other, restart, state, "requestState refused: it was issued to another principal"},
		{"other arguments", cs, map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "db"}, "summary": "restart web"}, state, "requestState refused: it was issued for another call"},
	} {
		_, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: c.args, RequestState: c.state})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, c.want) {
			t.Errorf("%s: %v, want JSON-RPC -32602 %q", c.name, err, c.want)
		}
	}
	// The same arguments in another key order are the same call.
	reordered := map[string]any{"summary": "restart web", "arguments": map[string]any{"service": "web"}, "tool": "restart_service"}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: reordered, RequestState: state}); err != nil {
		t.Fatalf("reordered arguments: %v", err)
	}
	mu.Lock()
	clock = clock.Add(stateTTL + time.Second)
	mu.Unlock()
	ids := b.ids()
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: restart, RequestState: state})
	if err == nil || !strings.Contains(err.Error(), "requestState refused: it expired at") || !strings.Contains(err.Error(), "call action_status with request_id "+ids[0]) {
		t.Fatalf("expired state: %v, want the refusal naming %s", err, ids[0])
	}
	if got := b.ids(); len(got) != 1 {
		t.Fatalf("requests made: %v, want the first only", got)
	}
}

// An item that requires step-up is approved only in the console after a
// fresh sign-in: a client that supports URL-mode elicitation is sent
// there, once, with the item's console page; the call goes on waiting.
func TestMRTRSendsAStepUpItemToTheConsoleByURLElicitation(t *testing.T) {
	b := actionBot(t)
	var mu sync.Mutex
	var asked []*sdk.ElicitParams
	copts := &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Params)
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	}
	cs := connectWith(t, longOptions(b, callerOf(deployBot)), copts)
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "confirm_action", Arguments: wipe()})
	if err != nil {
		t.Fatal(err)
	}
	ids := b.ids()
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Mode != "url" || !strings.HasPrefix(asked[0].URL, "https://cs.example/ui/items/") || asked[0].ElicitationID != ids[0] || !strings.Contains(asked[0].Message, "fresh sign-in") {
		t.Fatalf("URL elicitations: %+v, want one of the item's console page", asked)
	}
	// The SDK answered it and retried; still pending, the second round asks
	// nothing more and hands the state back to the host.
	if !r.NeedsInput() || r.RequestState == "" || r.InputRequests != nil {
		t.Fatalf("after the elicitation = %+v, want input_required with a requestState and no input requests", r)
	}
	// A client that does not support URL mode is not sent one.
	plain := connectWith(t, longOptions(b, callerOf(deployBot)), nil)
	r, err = plain.CallTool(context.Background(), &sdk.CallToolParams{Name: "confirm_action", Arguments: wipe()})
	if err != nil || !r.NeedsInput() || r.InputRequests != nil {
		t.Fatalf("without URL elicitation = %+v (err %v), want input_required with no input requests", r, err)
	}
}

// A client on an older revision (2025-11-25, no MRTR, no task asked for)
// gets today's answer at once: pending, with the text to poll.
func TestOlderClientGetsPendingAtOnce(t *testing.T) {
	b := actionBot(t)
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := NewServer(longOptions(b, callerOf(deployBot))).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "old", Version: "1"}, nil).Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Skipf("the SDK client cannot speak 2025-11-25 here: %v", err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "confirm_action", Arguments: restart})
	if err != nil {
		t.Fatal(err)
	}
	if d := dataOf(r); r.NeedsInput() || d["status"] != "pending" || !strings.Contains(resultText(r), "Poll action_status") {
		t.Fatalf("older client = %v %q (needs input %v), want status pending at once and a text containing %q", d, resultText(r), r.NeedsInput(), "Poll action_status")
	}
}

// rpc is a raw JSON-RPC client of the streamable HTTP endpoint, for what
// the go-sdk client does not speak: the Tasks extension's methods and
// 2025-11-25's task-augmented calls.
type rpc struct {
	t   *testing.T
	url string
	key string
	id  int
}

// modernMeta is the per-request _meta of a 2026-07-28 client declaring
// the Tasks extension.
var modernMeta = map[string]any{
	sdk.MetaKeyProtocolVersion:    "2026-07-28",
	sdk.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}},
	sdk.MetaKeyClientInfo:         map[string]any{"name": "raw", "version": "1"},
}

// call posts one request and returns its result or error object.
func (c *rpc) call(method string, params map[string]any) (result map[string]any, rpcErr map[string]any) {
	c.t.Helper()
	c.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.key)
	meta, _ := params["_meta"].(map[string]any)
	if v, _ := meta[sdk.MetaKeyProtocolVersion].(string); v != "" {
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Mcp-Method", method)
		if id, ok := params["taskId"].(string); ok {
			req.Header.Set("Mcp-Name", id)
		} else if name, ok := params["name"].(string); ok {
			req.Header.Set("Mcp-Name", name)
		}
	} else {
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		c.t.Fatalf("%s: HTTP %d %q, want a JSON-RPC answer (%v)", method, resp.StatusCode, raw, err)
	}
	return m.Result, m.Error
}

func withMeta(p map[string]any, meta map[string]any) map[string]any {
	p["_meta"] = meta
	return p
}

// httpServer serves NewHTTPHandler with callers by key ("deploy", "other").
func httpServer(t *testing.T, b *recorder) string {
	t.Helper()
	h := NewHTTPHandler(HTTPOptions{App: b, Version: "test", MaxBody: 1 << 20, MaxCallWait: time.Second, StateKey: []byte("k"),
		ItemURL: func(id uint64) string { return fmt.Sprintf("https://cs.example/ui/items/%d", id) },
		CallerFrom: func(ctx context.Context) *bot.Caller {
			c, _ := ctx.Value(callerKey{}).(*bot.Caller)
			return c
		}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := deployBot
		if strings.HasSuffix(r.Header.Get("Authorization"), "other") {
			c = otherBot
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The Tasks extension over HTTP: a pending confirm_action answers a task
// handle at once; tasks/get says working, then completed with the
// decision inline; the task is the caller's only; tasks/update and
// tasks/cancel are acknowledged and cancel nothing; a client that did
// not declare the extension is refused with -32021.
func TestTasksExtensionFollowsTheRequestUntilDecided(t *testing.T) {
	b := actionBot(t)
	url := httpServer(t, b)
	c := &rpc{t: t, url: url, key: "deploy"}
	disc, e := c.call("server/discover", withMeta(map[string]any{}, modernMeta))
	if e != nil || !strings.Contains(fmt.Sprint(disc["capabilities"]), "extensions:map["+tasksExtension+":map[]]") {
		t.Fatalf("server/discover does not declare the extension: %v %v", disc, e)
	}
	// A step-up item's task names its console page.
	su, e := c.call("tools/call", withMeta(map[string]any{"name": "confirm_action", "arguments": wipe()}, modernMeta))
	if e != nil || su["resultType"] != "task" || !strings.Contains(fmt.Sprint(su["statusMessage"]), "after a fresh sign-in, in the console: https://cs.example/ui/items/") {
		t.Fatalf("a step-up item's task = %v (error %v), want resultType task and a statusMessage containing %q", su, e, "after a fresh sign-in, in the console: https://cs.example/ui/items/")
	}
	res, e := c.call("tools/call", withMeta(map[string]any{"name": "confirm_action", "arguments": restart}, modernMeta))
	if e != nil || res["resultType"] != "task" || res["status"] != "working" || res["pollIntervalMs"] != float64(5000) {
		t.Fatalf("task creation = %v (error %v), want resultType task, status working, pollIntervalMs 5000", res, e)
	}
	taskID, _ := res["taskId"].(string)
	if !strings.HasPrefix(taskID, kindTask+".") || res["createdAt"] == "" || res["ttlMs"] != nil {
		t.Fatalf("task = %v, want a taskId starting %q, a createdAt and ttlMs null", res, kindTask+".")
	}
	if _, ok := res["ttlMs"]; !ok {
		t.Fatalf("ttlMs missing (it is null: the task lives as long as its request): %v", res)
	}
	get := func(key string, meta map[string]any) (map[string]any, map[string]any) {
		cc := &rpc{t: t, url: url, key: key}
		return cc.call("tasks/get", withMeta(map[string]any{"taskId": taskID}, meta))
	}
	got, e := get("deploy", modernMeta)
	if e != nil || got["resultType"] != "complete" || got["status"] != "working" || !strings.Contains(got["statusMessage"].(string), "Waiting for a person to decide req_") || got["result"] != nil {
		t.Fatalf("tasks/get while pending = %v (error %v), want resultType complete, status working, a statusMessage containing %q and no result", got, e, "Waiting for a person to decide req_")
	}
	// Another principal holding the id learns nothing.
	if _, e := get("other", modernMeta); e == nil || e["code"] != float64(jsonrpc.CodeInvalidParams) || e["message"] != "Failed to retrieve task: Task not found" {
		t.Fatalf("another principal's tasks/get error = %v, want code %d, message %q", e, jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
	}
	// Not declaring the extension: -32021 naming it.
	bare := map[string]any{sdk.MetaKeyProtocolVersion: "2026-07-28", sdk.MetaKeyClientCapabilities: map[string]any{}}
	if _, e := get("deploy", bare); e == nil || e["code"] != float64(sdk.CodeMissingRequiredClientCapabilities) || !strings.Contains(fmt.Sprint(e["data"]), tasksExtension) {
		t.Fatalf("tasks/get without the extension: error %v, want code %d naming %q", e, sdk.CodeMissingRequiredClientCapabilities, tasksExtension)
	}
	for _, m := range []string{"tasks/update", "tasks/cancel"} {
		if r, e := c.call(m, withMeta(map[string]any{"taskId": taskID, "inputResponses": map[string]any{}}, modernMeta)); e != nil || r["resultType"] != "complete" {
			t.Fatalf("%s = %v (error %v), want resultType complete", m, r, e)
		}
	}
	// A made-up task id.
	if r, e := c.call("tasks/get", withMeta(map[string]any{"taskId": kindTask + ".e30.AAAA"}, modernMeta)); e == nil || e["message"] != "Failed to retrieve task: Task not found" {
		t.Fatalf("forged task id = %v (error %v), want the error %q", r, e, "Failed to retrieve task: Task not found")
	}
	ids := b.ids()
	if len(ids) != 2 {
		t.Fatalf("pending = %v, want 2 requests", ids)
	}
	ids = ids[1:]
	decide(t, b, ids[0]) // tasks/cancel withdrew nothing: it is still decidable
	got, e = get("deploy", modernMeta)
	if e != nil || got["status"] != "completed" {
		t.Fatalf("tasks/get after the decision = %v (error %v), want status completed", got, e)
	}
	result, _ := got["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if sc["status"] != "approved" || sc["request_id"] != ids[0] || result["isError"] == true || !strings.Contains(got["statusMessage"].(string), "approved") {
		t.Fatalf("completed task = %v, want status approved on %s, no error, a statusMessage containing %q", got, ids[0], "approved")
	}
	// A call that needs nobody (read-only) answers its result, no task.
	res, e = c.call("tools/call", withMeta(map[string]any{"name": "confirm_action", "arguments": map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "summary": "again", "headless": true}}, modernMeta))
	if e != nil || res["resultType"] == "task" || res["structuredContent"].(map[string]any)["status"] != "denied" {
		t.Fatalf("a call decided at once = %v (error %v), want no task and status denied", res, e)
	}
}

// 2025-11-25's task-augmented tools/call (what the official TypeScript
// SDK 1.32.2 speaks): initialize and tools/list advertise it; params.task
// gets a task handle; tasks/get polls it; tasks/result gives the result.
func TestLegacyTasksAreAdvertisedAndAnswered(t *testing.T) {
	b := actionBot(t)
	url := httpServer(t, b)
	c := &rpc{t: t, url: url, key: "deploy"}
	init, e := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}})
	caps, _ := init["capabilities"].(map[string]any)
	if e != nil || fmt.Sprint(caps["tasks"]) != "map[requests:map[tools:map[call:map[]]]]" {
		t.Fatalf("initialize = %v (error %v), want capabilities.tasks %s", init, e, "map[requests:map[tools:map[call:map[]]]]")
	}
	list, _ := c.call("tools/list", map[string]any{})
	found := false
	for _, tl := range list["tools"].([]any) {
		tm := tl.(map[string]any)
		if tm["name"] == "confirm_action" {
			found = fmt.Sprint(tm["execution"]) == "map[taskSupport:optional]"
		} else if tm["execution"] != nil {
			t.Errorf("%s advertises execution %v, want none", tm["name"], tm["execution"])
		}
	}
	if !found {
		t.Fatalf("tools/list does not offer confirm_action as a task")
	}
	res, e := c.call("tools/call", map[string]any{"name": "confirm_action", "arguments": restart, "task": map[string]any{"ttl": 60000}})
	task, _ := res["task"].(map[string]any)
	if e != nil || task["status"] != "working" || task["pollInterval"] != float64(5000) || !strings.Contains(fmt.Sprint(res["_meta"]), "Poll action_status") {
		t.Fatalf("task-augmented call = %v (error %v), want task status working, pollInterval 5000 and _meta containing %q", res, e, "Poll action_status")
	}
	id, _ := task["taskId"].(string)
	got, e := c.call("tasks/get", map[string]any{"taskId": id})
	if e != nil || got["status"] != "working" || got["taskId"] != id {
		t.Fatalf("tasks/get = %v (error %v), want status working, taskId %q", got, e, id)
	}
	if _, e := c.call("tasks/cancel", map[string]any{"taskId": id}); e == nil || e["code"] != float64(jsonrpc.CodeMethodNotFound) {
		t.Fatalf("tasks/cancel error = %v, want code %d (method not found)", e, jsonrpc.CodeMethodNotFound)
	}
	ids := b.ids()
	decide(t, b, ids[0])
	if got, e = c.call("tasks/get", map[string]any{"taskId": id}); e != nil || got["status"] != "completed" {
		t.Fatalf("tasks/get after the decision = %v (error %v), want status completed", got, e)
	}
	final, e := c.call("tasks/result", map[string]any{"taskId": id})
	sc, _ := final["structuredContent"].(map[string]any)
	if e != nil || sc["status"] != "approved" || !strings.Contains(fmt.Sprint(final["_meta"]), id) {
		t.Fatalf("tasks/result = %v (error %v), want status approved and _meta naming %s", final, e, id)
	}
	// A refused call makes no task: a JSON-RPC error with the reason.
	_, e = c.call("tools/call", map[string]any{"name": "confirm_action", "arguments": map[string]any{"tool": "wipe_disk", "arguments": map[string]any{}, "summary": "x"}, "task": map[string]any{}})
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "dry_run") {
		t.Fatalf("a refused task-augmented call: error %v, want one whose message names %q", e, "dry_run")
	}
}

// stdioSession serves b over pipes and returns a raw JSON-RPC sender and
// a stop function.
func stdioSession(t *testing.T, b *recorder) (send func(method string, params map[string]any) map[string]any, stop func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(ctx, longOptions(b, callerOf(deployBot)), inR, outW)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	n := 0
	send = func(method string, params map[string]any) map[string]any {
		t.Helper()
		msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
		notification := strings.HasPrefix(method, "notifications/")
		if !notification {
			n++
			msg["id"] = n
		}
		b, _ := json.Marshal(msg)
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		if notification {
			return nil
		}
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil && m["id"] == float64(n) {
				return m
			}
		}
		t.Fatalf("%s: no answer (%v)", method, lines.Err())
		return nil
	}
	return send, func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cancel()
	}
}

// The same over stdio: the tasks/* methods are answered on the pipe, and
// a 2025-11-25 session is told of tasks.
func TestTasksOverStdio(t *testing.T) {
	b := actionBot(t)
	send, stop := stdioSession(t, b)
	res := send("tools/call", withMeta(map[string]any{"name": "confirm_action", "arguments": restart}, modernMeta))["result"].(map[string]any)
	if res["resultType"] != "task" {
		t.Fatalf("over stdio = %v, want resultType task", res)
	}
	id := res["taskId"].(string)
	if got := send("tasks/get", withMeta(map[string]any{"taskId": id}, modernMeta)); got["result"].(map[string]any)["status"] != "working" {
		t.Fatalf("tasks/get over stdio = %v, want status working", got)
	}
	decide(t, b, b.ids()[0])
	got := send("tasks/get", withMeta(map[string]any{"taskId": id}, modernMeta))["result"].(map[string]any)
	if got["status"] != "completed" || got["result"].(map[string]any)["structuredContent"].(map[string]any)["status"] != "approved" {
		t.Fatalf("tasks/get over stdio after the decision = %v, want status completed, result status approved", got)
	}
	stop()

	send, stop = stdioSession(t, b)
	defer stop()
	init := send("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}})
	if !strings.Contains(fmt.Sprint(init["result"]), "tasks:map[requests:map[tools:map[call:map[]]]]") {
		t.Fatalf("initialize over stdio = %v, want a result containing %q", init, "tasks:map[requests:map[tools:map[call:map[]]]]")
	}
	send("notifications/initialized", nil)
	res = send("tools/call", map[string]any{"name": "confirm_action", "arguments": restart, "task": map[string]any{}})["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	if task["status"] != "working" {
		t.Fatalf("a 2025-11-25 task over stdio = %v, want task status working", res)
	}
	if got := send("tasks/get", map[string]any{"taskId": task["taskId"]}); got["result"].(map[string]any)["status"] != "working" {
		t.Fatalf("2025-11-25 tasks/get over stdio = %v, want status working", got)
	}
}
