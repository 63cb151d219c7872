package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks: a pending confirm_action answered with a task handle instead of a
// result, in either of two revisions:
//
//   - the Tasks extension (io.modelcontextprotocol/tasks) of 2026-07-28:
//     tools/call answers resultType "task"; tasks/get returns the task
//     with its result inline once completed; tasks/update and tasks/cancel
//     are acknowledged;
//   - the task-augmented requests of 2025-11-25 (params.task): tools/call
//     answers {"task": …}; tasks/get returns the task, tasks/result its
//     result.
//
// The SDK implements neither, so the tasks/* methods are answered here,
// before the SDK sees the message (on HTTP in guardMessages, on stdio in
// taskConn), and the 2025-11-25 capability is added to the SDK's
// initialize and tools/list answers (advertise).
//
// A task id is a sealed handle (seal.go) naming the approval request, the
// principal it belongs to and when it was made: the task is the request
// itself, kept in the store, so any replica answers for it, a restart
// loses nothing, and a host that stops polling leaves the request exactly
// as it was. Only the principal that made a task may read it. A task is
// "working" while its request is pending and "completed" once it is
// decided or expired, its result action_status's answer. tasks/cancel
// cancels nothing: a requester does not withdraw an approval request; it
// stays open for its approvers until decided or expired.

// Task statuses used here.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
)

// extTask is a task of the Tasks extension: a CreateTaskResult (resultType
// "task") or a GetTaskResult (resultType "complete", result inline once
// completed).
type extTask struct {
	sdk.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"` // null: as long as its request is kept
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// legacyTask is a 2025-11-25 Task.
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// legacyCreateTask is 2025-11-25's CreateTaskResult.
type legacyCreateTask struct {
	sdk.ResultBase
	Task legacyTask `json:"task"`
}

// legacyGetTask is 2025-11-25's GetTaskResult: the task's fields, flat.
type legacyGetTask struct {
	sdk.ResultBase
	legacyTask
}

// modelImmediateResponse is 2025-11-25's _meta key for the text a host may
// give the model at once while the task runs.
const modelImmediateResponse = "io.modelcontextprotocol/model-immediate-response"

// relatedTask is the _meta key that ties a result to its task.
const relatedTask = "io.modelcontextprotocol/related-task"

// taskState is a task as the request stands now.
type taskState struct {
	id, status, message, created, updated string
	result                                json.RawMessage // the final CallToolResult, once completed
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// newTask makes the handle of a task following out's request, for a call
// of the upstream tool named tool ("" for confirm_action).
func (w *waiter) newTask(out outcome, caller *bot.Caller, tool string) (taskHandle, string, error) {
	created := w.now()
	if s, _ := out.data["created_at"].(string); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			created = t
		}
	}
	h := taskHandle{Request: out.requestID(), Principal: principalOf(caller), Created: created.UnixMilli(), Tool: tool}
	id, err := w.seal.seal(kindTask, h)
	return h, id, err
}

func principalOf(c *bot.Caller) string {
	if c == nil {
		return ""
	}
	return c.ID
}

// state is the task id of h as out (its request's current answer) says.
func (w *waiter) state(id string, h taskHandle, out outcome) taskState {
	ts := taskState{id: id, created: stamp(time.UnixMilli(h.Created)), status: taskWorking}
	ts.updated = ts.created
	if !out.pending() {
		ts.status = taskCompleted
		if s, _ := out.data["decided_at"].(string); s != "" {
			ts.updated = s
		}
		ts.message = resultText(out.res)
		ts.result, _ = json.Marshal(out.res)
		return ts
	}
	ts.message = fmt.Sprintf("Waiting for a person to decide %s (%v)", out.requestID(), out.data["tool"])
	if exp, _ := out.data["expires_at"].(string); exp != "" {
		ts.message += "; it expires at " + exp
	}
	ts.message += "."
	if stepUp, _ := out.data["step_up"].(bool); stepUp {
		if url := w.consoleURL(out.data); url != "" {
			ts.message += " It is approved only after a fresh sign-in, in the console: " + url
		}
	}
	return ts
}

func (ts taskState) ext(resultType string) *extTask {
	t := &extTask{ResultType: resultType, TaskID: ts.id, Status: ts.status, StatusMessage: ts.message,
		CreatedAt: ts.created, LastUpdatedAt: ts.updated}
	if ts.status == taskWorking {
		t.PollIntervalMs = pollInterval.Milliseconds()
	} else if resultType == "complete" {
		t.Result = ts.result
	}
	return t
}

func (ts taskState) legacy() legacyTask {
	t := legacyTask{TaskID: ts.id, Status: ts.status, StatusMessage: ts.message, CreatedAt: ts.created, LastUpdatedAt: ts.updated}
	if ts.status == taskWorking {
		t.PollInterval = pollInterval.Milliseconds()
	}
	return t
}

// taskAnswer answers a pending call (confirm_action, or the gated call of
// the upstream tool named tool) with a Tasks extension handle.
func (w *waiter) taskAnswer(out outcome, caller *bot.Caller, tool string) (*sdk.CallToolResult, error) {
	h, id, err := w.newTask(out, caller, tool)
	if err != nil {
		return nil, err
	}
	return shaped(w.state(id, h, out).ext("task")), nil
}

// legacyTaskAnswer answers a 2025-11-25 task-augmented confirm_action: a
// task handle whatever the request's state (a decided one is a completed
// task), and a refused call as a JSON-RPC error (no task was made). tool
// is as for taskAnswer; a gateway task is working until its call is run.
func (w *waiter) legacyTaskAnswer(out outcome, caller *bot.Caller, tool string) (*sdk.CallToolResult, error) {
	if out.err != nil || out.requestID() == "" || out.res.IsError {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: resultText(out.res)}
	}
	h, id, err := w.newTask(out, caller, tool)
	if err != nil {
		return nil, err
	}
	ts := w.state(id, h, out)
	if tool != "" {
		ts = taskState{id: id, status: taskWorking, created: ts.created, updated: ts.created, message: ts.message}
		if !out.pending() {
			ts.message = fmt.Sprintf("Request %s is %s; poll tasks/get for the answer.", out.requestID(), out.status())
		}
	}
	r := &legacyCreateTask{Task: ts.legacy()}
	r.Meta = sdk.Meta{modelImmediateResponse: resultText(out.res)}
	return shaped(r), nil
}

// errTaskNotFound is the protocol's answer for a task id that is not one of
// the caller's (or whose request is gone): the same either way, so that a
// task id reveals nothing to another principal.
var errTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// taskParams are the params of a tasks/* request.
type taskParams struct {
	TaskID string         `json:"taskId"`
	Meta   map[string]any `json:"_meta"`
}

// isTaskMethod reports whether method is one of the tasks/* methods
// answered here.
func isTaskMethod(method string) bool { return strings.HasPrefix(method, "tasks/") }

// handleTask answers one tasks/* request of caller: its result, or a
// JSON-RPC error.
func (w *waiter) handleTask(ctx context.Context, log logFunc, caller *bot.Caller, method string, raw json.RawMessage) (any, error) {
	var p taskParams
	if err := json.Unmarshal(raw, &p); err != nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params must be an object with a taskId string"}
	}
	modern := false
	if v, _ := p.Meta[sdk.MetaKeyProtocolVersion].(string); v >= "2026-07-28" {
		modern = true
		if !declaresTasks(p.Meta) {
			data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
			return nil, &jsonrpc.Error{Code: sdk.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability: declare the " + tasksExtension + " extension in io.modelcontextprotocol/clientCapabilities", Data: data}
		}
	}
	switch {
	case method == "tasks/list":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not offered: a task id is returned by the tools/call that made it"}
	case method == "tasks/cancel" && !modern:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/cancel is not offered (capabilities.tasks.cancel is not declared): an approval request is not withdrawn by its requester; it stays open for its approvers until it is decided or expires. Stop polling to give up waiting."}
	case method == "tasks/update" && !modern, method == "tasks/result" && modern:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " is not a method of this protocol revision"}
	case method != "tasks/get" && method != "tasks/result" && method != "tasks/update" && method != "tasks/cancel":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%q is not a tasks method", method)}
	}
	var h taskHandle
	if err := w.seal.open(kindTask, p.TaskID, &h); err != nil || caller == nil || h.Principal != caller.ID {
		return nil, errTaskNotFound
	}
	if method == "tasks/update" || method == "tasks/cancel" {
		// Nothing to take: no input is asked of a task, and an approval
		// request is not withdrawn by its requester (see above).
		return map[string]any{"resultType": "complete"}, nil
	}
	deadline := w.now() // tasks/get answers at once
	if method == "tasks/result" {
		deadline = w.now().Add(w.maxWait)
	}
	out := w.status(ctx, log, caller, h.Request, deadline)
	if out.err != nil {
		switch bot.KindOf(out.err) {
		case bot.KindNotFound, bot.KindDenied, bot.KindUnauthenticated:
			return nil, errTaskNotFound
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resultText(out.res)}
	}
	ts := w.state(p.TaskID, h, out)
	if h.Tool != "" && !out.pending() {
		// A gateway task: decided, its result is the upstream's answer
		// (the call forwarded now, once, if it was approved and has not
		// run), or the tool error of a denial or an expiry.
		res, running := w.gatewayResult(ctx, log, caller, h.Tool, out)
		if running {
			ts.status, ts.result = taskWorking, nil
			ts.message = fmt.Sprintf("Request %s is approved and its call is running at the upstream now.", out.requestID())
		} else {
			ts.message, out.res = gateway.Clip(resultText(res), 2000), res
			ts.result, _ = json.Marshal(res)
		}
	}
	switch {
	case modern:
		return ts.ext("complete"), nil
	case method == "tasks/get":
		return &legacyGetTask{legacyTask: ts.legacy()}, nil
	case ts.status != taskCompleted:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task is still working after %s: %s Poll tasks/get, and ask for the result once the task is completed.", w.maxWait, ts.message)}
	}
	res := out.res
	if res.Meta == nil {
		res.Meta = sdk.Meta{}
	}
	res.Meta[relatedTask] = map[string]any{"taskId": p.TaskID}
	return res, nil
}

// gatewayResult is the result of the gateway task of the upstream tool
// name, whose request out has decided: the upstream's answer, forwarded
// now if the request is approved and has not run (running: another call
// is forwarding it), or a tool error.
func (w *waiter) gatewayResult(ctx context.Context, log logFunc, caller *bot.Caller, name string, out outcome) (res *sdk.CallToolResult, running bool) {
	if w.gw == nil {
		return toolError(name+" was not run: no upstream is configured.", nil), false
	}
	t, ok := w.gw.Tool(name)
	if !ok {
		up, tool, _ := gateway.Split(name)
		t = gateway.Tool{Name: name, Upstream: up, UpstreamTool: tool}
	}
	id := out.requestID()
	switch out.status() {
	case "approved":
		if _, ran := out.data["executed_at"]; ran {
			return w.replay(ctx, t, id, "", false) // the task's result, read again
		}
		if _, withheld := out.data["details_withheld"]; withheld {
			return toolError(fmt.Sprintf("%s was not run from its task: request %s is approved, but its arguments are withheld from this caller, so the gateway runs it only on the call itself. Call %s again with the same arguments (without a task): it runs then, once.", name, id, name), map[string]any{"request_id": id, "status": "approved"}), false
		}
		return w.forward(ctx, w.logger, log, caller, t, nil, out)
	case "denied", "expired":
		return decidedError(t, out), false
	}
	res = out.res
	if res == nil {
		res = toolError(name+" was not run.", nil)
	}
	res.IsError = true
	return res, false
}

// declaresTasks reports whether a request's _meta declares the Tasks
// extension in its client capabilities.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[sdk.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension]
	return ok
}

// liftTask moves a 2025-11-25 tools/call's params.task, which the SDK
// drops, into its _meta (metaTaskRequested), where the tool handler finds
// it. Params it cannot read are returned unchanged (the SDK answers them).
func liftTask(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	task, ok := p["task"]
	if !ok {
		return params
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params
	}
	if len(task) == 0 || string(task) == "null" {
		task = json.RawMessage("{}")
	}
	meta[metaTaskRequested] = task
	delete(p, "task")
	b, err := json.Marshal(meta)
	if err != nil {
		return params
	}
	p["_meta"] = b
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// advertise adds what the SDK cannot declare to its answer to method: the
// 2025-11-25 tasks capability (task-augmented tools/call) to initialize,
// and execution.taskSupport "optional" to confirm_action and the gated
// upstream tools in tools/list.
// Anything it cannot read is returned unchanged.
func advertise(method string, result json.RawMessage) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil {
		return result
	}
	switch method {
	case "initialize":
		var caps map[string]json.RawMessage
		if json.Unmarshal(r["capabilities"], &caps) != nil {
			return result
		}
		caps["tasks"] = json.RawMessage(`{"requests":{"tools":{"call":{}}}}`)
		b, _ := json.Marshal(caps)
		r["capabilities"] = b
	case "tools/list":
		var tools []map[string]json.RawMessage
		if json.Unmarshal(r["tools"], &tools) != nil {
			return result
		}
		for _, t := range tools {
			if string(t["name"]) == `"`+confirmTool+`"` || gatedUpstream(t["_meta"]) {
				t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
			}
		}
		b, _ := json.Marshal(tools)
		r["tools"] = b
	default:
		return result
	}
	out, err := json.Marshal(r)
	if err != nil {
		return result
	}
	return out
}

// gatedUpstream reports whether a tool's _meta is an upstream tool's (the
// gateway's) that is not read-only: its calls wait for a person.
func gatedUpstream(meta json.RawMessage) bool {
	var m map[string]any
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	cat, ok := m["countersign/category"].(string)
	_, up := m["countersign/upstream"]
	return ok && up && cat != "read-only"
}

// advertised reports whether the answer to method is changed by advertise.
func advertised(method string) bool { return method == "initialize" || method == "tools/list" }

// taskTransport is the stdio transport with the tasks/* methods answered
// here and the SDK's answers advertised (see above).
type taskTransport struct {
	sdk.Transport
	w      *waiter
	caller CallerFunc
	log    logFunc
}

// Connect wraps the connection.
func (t *taskTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	return &taskConn{Connection: c, t: t, ctx: ctx, cancel: cancel, patch: map[any]string{}}, nil
}

// taskConn is one connection of taskTransport.
type taskConn struct {
	sdk.Connection
	t      *taskTransport
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	patch  map[any]string // id of a request whose answer advertise changes -> its method
}

// Read returns the next message for the SDK, answering tasks/* requests
// itself.
func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		m, err := c.Connection.Read(ctx)
		if err != nil {
			return m, err
		}
		req, ok := m.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			return m, nil
		}
		switch {
		case isTaskMethod(req.Method):
			go c.answerTask(req)
			continue
		case req.Method == "tools/call":
			req.Params = liftTask(req.Params)
		case advertised(req.Method):
			c.mu.Lock()
			c.patch[req.ID.Raw()] = req.Method
			c.mu.Unlock()
		}
		return req, nil
	}
}

func (c *taskConn) answerTask(req *jsonrpc.Request) {
	resp := &jsonrpc.Response{ID: req.ID}
	caller, err := c.t.caller(c.ctx, nil)
	if err == nil {
		var res any
		if res, err = c.t.w.handleTask(c.ctx, c.t.log, caller, req.Method, req.Params); err == nil {
			resp.Result, err = json.Marshal(res)
		}
	}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp.Error, resp.Result = je, nil
	}
	_ = c.Connection.Write(c.ctx, resp)
}

// Write sends a message of the SDK's, advertising in the answers that
// need it.
func (c *taskConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if resp, ok := m.(*jsonrpc.Response); ok && resp.Result != nil {
		c.mu.Lock()
		method, found := c.patch[resp.ID.Raw()]
		delete(c.patch, resp.ID.Raw())
		c.mu.Unlock()
		if found {
			resp.Result = advertise(method, resp.Result)
		}
	}
	return c.Connection.Write(ctx, m)
}

// Close ends the tasks being answered and closes the connection.
func (c *taskConn) Close() error {
	c.cancel()
	return c.Connection.Close()
}
