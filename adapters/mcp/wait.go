package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A confirm_action that a person must decide answers according to what
// the client says it supports, on each request:
//
//   - a client that declares the Tasks extension (io.modelcontextprotocol/
//     tasks, 2026-07-28) gets a task handle at once, and polls tasks/get
//     until the task is completed (tasks.go);
//   - a 2025-11-25 client that asks for a task-augmented call (params.task)
//     gets that revision's task handle, polled the same way, its result read
//     with tasks/result (tasks.go);
//   - any other 2026-07-28 client gets MRTR: the call waits for a decision
//     up to MaxCallWait, then answers input_required with a sealed
//     requestState (and, for an item that requires step-up, a URL-mode
//     elicitation of the item's console page, when the client supports
//     it); the client retries with that state, and the retry waits again;
//   - an older client gets today's answer: pending at once, with the text
//     telling the agent to poll action_status (whose wait_seconds is cut
//     to MaxCallWait).
//
// No call is held past MaxCallWait, and nothing is lost when a host gives
// up: the approval request lives in the store, and a task id or a
// requestState only points at it.

// confirmTool is the tool whose pending answer waits for a person.
const confirmTool = "confirm_action"

// defaultMaxCallWait bounds an MRTR round when Options.MaxCallWait is
// zero (config's default).
const defaultMaxCallWait = 45 * time.Second

// pollInterval is the task polling interval suggested to clients.
const pollInterval = 5 * time.Second

// tasksExtension is the Tasks extension's identifier.
const tasksExtension = "io.modelcontextprotocol/tasks"

// metaTaskRequested is the _meta key a 2025-11-25 task request (params.task,
// which the SDK does not keep) is moved to before the SDK reads the
// message (liftTask); its value is the client's task metadata.
const metaTaskRequested = "io.countersign/task-requested"

// metaPending is the _meta key of an input_required answer that names the
// pending request and what action_status says of it.
const metaPending = "io.countersign/pending"

// shapeKey carries, in a tool result's _meta, a result of another shape
// (a task handle, an input_required result) that the reshape middleware
// sends instead. It never reaches the wire.
const shapeKey = "io.countersign/shape"

// clientSupport is what one request says of its client.
type clientSupport struct {
	modern     bool // 2026-07-28 or later: MRTR
	tasks      bool // declares the Tasks extension
	urlElicit  bool // declares URL-mode elicitation
	legacyTask bool // a 2025-11-25 task-augmented tools/call
}

func supportOf(req *sdk.CallToolRequest) clientSupport {
	var s clientSupport
	if req == nil {
		return s
	}
	s.modern = req.ProtocolVersion() >= "2026-07-28"
	if caps := req.ClientCapabilities(); caps != nil && s.modern {
		_, s.tasks = caps.Extensions[tasksExtension]
		s.urlElicit = caps.Elicitation != nil && caps.Elicitation.URL != nil
	}
	if req.Params != nil && req.Params.Meta != nil {
		_, s.legacyTask = req.Params.Meta[metaTaskRequested]
	}
	if s.modern {
		s.legacyTask = false // the 2026-07-28 revision has no params.task
	}
	return s
}

// waiter runs the waits of confirm_action.
type waiter struct {
	app       App
	seal      sealer
	maxWait   time.Duration
	now       func() time.Time
	itemURL   func(uint64) string
	gw        *gateway.Gateway // nil: no upstreams
	audit     AuditFunc
	auditRead AuditFunc
	store     kv.Store      // the gateway's forwarding markers; nil: none kept
	run       func() string // this serving run's id (Upstreams.Run)
	alive     AliveFunc     // other runs' liveness (Upstreams.Alive)
	logger    *slog.Logger
}

func newWaiter(o Options) *waiter {
	w := &waiter{app: o.App, seal: newSealer(o.StateKey), maxWait: o.MaxCallWait, now: o.Now, itemURL: o.ItemURL}
	if u := o.Upstreams; u != nil {
		w.gw, w.audit, w.auditRead, w.store, w.run, w.alive = u.Gateway, u.Audit, u.AuditRead, u.Store, u.Run, u.Alive
	}
	if w.auditRead == nil {
		w.auditRead = w.audit
	}
	if w.logger = o.Logger; w.logger == nil {
		w.logger = slog.New(slog.DiscardHandler)
	}
	if w.maxWait <= 0 {
		w.maxWait = defaultMaxCallWait
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.itemURL == nil {
		w.itemURL = func(uint64) string { return "" }
	}
	return w
}

// outcome is one answer of the application, as the MCP result and the
// structured fields the wait reads.
type outcome struct {
	res  *sdk.CallToolResult
	data map[string]any
	err  error // the application's error, already in res
}

func (o outcome) status() string    { s, _ := o.data["status"].(string); return s }
func (o outcome) requestID() string { s, _ := o.data["request_id"].(string); return s }
func (o outcome) pending() bool     { return o.err == nil && o.status() == "pending" }

// call runs one tool through the application.
func (w *waiter) call(ctx context.Context, log logFunc, caller *bot.Caller, tool string, args []byte) outcome {
	out, err := w.app.Call(bot.WithSurface(ctx, "mcp"), caller, tool, args)
	if err != nil {
		return outcome{res: log(tool, err), err: err}
	}
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Text}}}
	var data map[string]any
	if out.Data != nil {
		r.StructuredContent = structured(out.Data)
		if b, err := json.Marshal(out.Data); err == nil {
			_ = json.Unmarshal(b, &data)
		}
	}
	return outcome{res: r, data: data}
}

// status reads request id through action_status, waiting for a decision
// until deadline (whole seconds; none when less than one is left).
func (w *waiter) status(ctx context.Context, log logFunc, caller *bot.Caller, id string, deadline time.Time) outcome {
	args := map[string]any{"request_id": id}
	if secs := int(deadline.Sub(w.now()) / time.Second); secs >= 1 {
		args["wait_seconds"] = min(secs, 60)
	}
	b, _ := json.Marshal(args)
	return w.call(ctx, log, caller, waitingTool, b)
}

// logFunc turns an application error into the tool error result.
type logFunc func(tool string, err error) *sdk.CallToolResult

// confirm is confirm_action over MCP.
func (w *waiter) confirm(ctx context.Context, req *sdk.CallToolRequest, caller *bot.Caller, args []byte, log logFunc) (*sdk.CallToolResult, error) {
	start := w.now()
	deadline := start.Add(w.maxWait)
	sup := supportOf(req)
	var st requestState
	var out outcome
	if rs := req.Params.RequestState; rs != "" {
		// An MRTR retry: wait on the request the state names, never make a
		// second one.
		principal := ""
		if caller != nil {
			principal = caller.ID
		}
		var err error
		if st, err = w.seal.openState(rs, principal, confirmTool, args, start); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		out = w.status(ctx, log, caller, st.Request, deadline)
		if out.err != nil {
			return out.res, nil
		}
	} else {
		out = w.call(ctx, log, caller, confirmTool, args)
		switch {
		case sup.legacyTask:
			return w.legacyTaskAnswer(out, caller, "")
		case !out.pending():
			return out.res, nil
		case sup.tasks:
			return w.taskAnswer(out, caller, "")
		case !sup.modern:
			return out.res, nil // poll action_status, as the text says
		}
		out = w.status(ctx, log, caller, out.requestID(), deadline)
		if out.err != nil {
			return out.res, nil
		}
	}
	if !out.pending() || !sup.modern {
		return out.res, nil
	}
	return w.inputRequired(out, caller, confirmTool, args, st.Asked, sup)
}

// inputRequired is the MRTR answer to a call of tool still pending: a
// sealed requestState naming the request (bound to tool and args), and for a step-up item, once, a
// URL-mode elicitation of its console page.
func (w *waiter) inputRequired(out outcome, caller *bot.Caller, tool string, args []byte, asked bool, sup clientSupport) (*sdk.CallToolResult, error) {
	id := out.requestID()
	ir := &inputRequiredResult{ResultType: "input_required"}
	// For a host that does not retry (and its agent), the request and the
	// answer a poll would give: nothing is lost if the host gives up.
	ir.Meta = sdk.Meta{metaPending: map[string]any{"request_id": id, "status": out.status(), "text": resultText(out.res)}}
	url := w.consoleURL(out.data)
	if stepUp, _ := out.data["step_up"].(bool); stepUp && url != "" && sup.urlElicit && !asked {
		ir.InputRequests = sdk.InputRequestMap{"countersign_console": &sdk.ElicitParams{
			Mode:          "url",
			URL:           url,
			ElicitationID: id,
			Message:       fmt.Sprintf("%s (%s) needs a person's approval after a fresh sign-in. Open the Countersign console to approve or deny it; this call continues when it is decided.", id, out.data["tool"]),
		}}
		asked = true
	}
	principal := ""
	if caller != nil {
		principal = caller.ID
	}
	state, err := w.seal.seal(kindState, requestState{
		Request: id, Principal: principal, Tool: tool, Args: argsDigest(args),
		Expires: w.now().Add(stateTTL).Unix(), Asked: asked,
	})
	if err != nil {
		return nil, err
	}
	ir.RequestState = state
	return shaped(ir), nil
}

// consoleURL is the console page of the item in data, or "".
func (w *waiter) consoleURL(data map[string]any) string {
	switch n := data["item_id"].(type) {
	case float64:
		if n > 0 {
			return w.itemURL(uint64(n))
		}
	case json.Number:
		if v, err := strconv.ParseUint(string(n), 10, 64); err == nil && v > 0 {
			return w.itemURL(v)
		}
	}
	return ""
}

// shaped wraps a result of another shape in a tool result for the reshape
// middleware to send instead.
func shaped(r sdk.Result) *sdk.CallToolResult {
	return &sdk.CallToolResult{Meta: sdk.Meta{shapeKey: r}}
}

// reshape sends the result a tool handler wrapped with shaped instead of
// the tool result: the SDK's tool handlers return only CallToolResult.
func reshape(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/call" {
			return res, err
		}
		if r, ok := res.(*sdk.CallToolResult); ok && r != nil && r.Meta != nil {
			if v, ok := r.Meta[shapeKey].(sdk.Result); ok {
				return v, nil
			}
		}
		return res, nil
	}
}

// inputRequiredResult is MRTR's InputRequiredResult. The SDK's
// CallToolResult cannot carry input_required without input requests, and
// a pending approval has none to ask (only a state to bring back).
type inputRequiredResult struct {
	sdk.ResultBase
	ResultType    string              `json:"resultType"`
	InputRequests sdk.InputRequestMap `json:"inputRequests,omitempty"`
	RequestState  string              `json:"requestState,omitempty"`
}

// resultText is the text content of a tool result.
func resultText(r *sdk.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
