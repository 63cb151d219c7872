package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP gateway: the tools of upstream MCP servers (adapters/mcp/gateway)
// served beside the registry's, as <upstream>__<tool>.
//
// A call of a read-only upstream tool (by configuration, never by the
// upstream's word) is passed straight through and audited. Any other call
// becomes an action request through confirm_action, the path an agent
// asking for approval takes (the one decision rule, quorum, step-up,
// grants, edits, cards), and waits for it as confirm_action waits over
// MCP (wait.go): a task handle for a client that supports tasks (tasks.go:
// its tasks/get runs the call once approved), MRTR for another 2026-07-28
// client, a bounded wait for an older one. Once approved, the gateway
// redeems the receipt itself (recorded as executed, once) and calls the
// upstream with exactly the approved arguments, an approver's edit
// included, never the call's own; a denial or an expiry answers a tool
// error saying so. A retry after the run (its requestState, its task, or
// the first identical call soon after) gets the upstream's recorded answer
// (forwarding.go), never a second run. On any doubt (no receipt, the
// approved arguments not readable, the store refusing) the call is
// refused, never let through.

// AuditFunc appends one audit entry made by caller outside a tool call.
type AuditFunc func(ctx context.Context, caller *bot.Caller, action, detail string) error

// metaRequest is the _meta key of an upstream's result that names the
// request it ran under.
const metaRequest = "io.countersign/request"

// serveUpstreams adds the gateway's tools to s, and keeps them in step
// with what the upstreams list (the SDK tells connected clients with
// notifications/tools/list_changed).
func serveUpstreams(s *sdk.Server, o Options, w *waiter) {
	served := map[string]bool{}
	var mu sync.Mutex
	resync := func() {
		mu.Lock()
		defer mu.Unlock()
		now := map[string]bool{}
		for _, t := range o.Upstreams.Gateway.Tools() {
			now[t.Name] = true
			s.AddTool(upstreamTool(t), upstreamHandler(o, w, t.Name))
		}
		var gone []string
		for name := range served {
			if !now[name] {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			s.RemoveTools(gone...)
		}
		served = now
	}
	resync()
	o.Upstreams.Gateway.Subscribe(resync)
}

// categoryWords says what a category means for a call, for the host.
func categoryWords(cat string) string {
	switch cat {
	case "read-only":
		return "read-only: calls pass straight through, audited"
	case "mutating", "destructive":
		return cat + ": each call waits for a person's approval in Countersign, and what runs is exactly what was approved (an approver may edit the arguments)"
	}
	return "unclassified: each call waits for a person's approval in Countersign, and what runs is exactly what was approved (an approver may edit the arguments)"
}

// upstreamTool is the MCP definition of an upstream tool: Countersign's
// annotations from its configured category; the upstream's description
// quoted as its claim, and its annotations kept only in _meta, as claims.
func upstreamTool(t gateway.Tool) *sdk.Tool {
	readOnly := t.Category == "read-only"
	destructive := t.Category != "read-only" && t.Category != "mutating"
	openWorld := true
	desc := fmt.Sprintf("%s of the upstream MCP server %s, through Countersign. Countersign classifies it %s.", t.UpstreamTool, t.Upstream, categoryWords(t.Category))
	if d := gateway.Clip(t.Description, 1000); strings.TrimSpace(d) != "" {
		desc += " The upstream describes it as follows (its claim, not verified by Countersign): «" + strings.NewReplacer("«", "‹", "»", "›").Replace(d) + "»"
	}
	meta := sdk.Meta{"countersign/category": categoryName(t.Category), "countersign/upstream": t.Upstream}
	if t.Annotations != nil {
		meta["countersign/upstream_annotations"] = t.Annotations
	}
	return &sdk.Tool{
		Name: t.Name, Description: desc, InputSchema: encodedSchema(t.InputSchema), Meta: meta,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive, OpenWorldHint: &openWorld},
	}
}

func categoryName(cat string) string {
	if cat == "" {
		return "unclassified"
	}
	return cat
}

// upstreamHandler runs a call of the upstream tool name.
func upstreamHandler(o Options, w *waiter, name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		if ti := tokenInfo(req); ti != nil {
			if id, ok := ti.Extra["request_id"].(string); ok {
				ctx = bot.WithRequestID(ctx, id)
			}
			if p, ok := ti.Extra["prepaid"].(*bot.Prepaid); ok {
				ctx = bot.WithPrepaid(ctx, p)
			}
		}
		defer func() {
			if v := recover(); v != nil {
				res, err = internalError(ctx, o.Logger, name, errors.New("panic in the gateway's handler"), v), nil
			}
		}()
		log := func(tool string, err error) *sdk.CallToolResult { return errorResult(ctx, o.Logger, tool, err) }
		caller, err := o.Caller(ctx, req)
		if err != nil {
			return log(name, err), nil
		}
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		// The SDK read params as JSON: arguments that start with '{' are
		// an object. Only a gated call needs it decoded (its request).
		if a := bytes.TrimLeft(args, " \t\r\n"); len(a) == 0 || a[0] != '{' {
			return log(name, bot.Invalid("arguments", "must be a JSON object")), nil
		}
		t, ok := o.Upstreams.Gateway.Tool(name)
		if ok && caller != nil && !o.Upstreams.Gateway.MayCall(t.Upstream, caller.Name) {
			err := &bot.Error{Kind: bot.KindDenied, Msg: fmt.Sprintf("Access denied: %s may not call the tools of upstream %s (gateway.upstreams[].principals lists who may). Nothing was run.", caller, t.Upstream)}
			if w.audit != nil {
				_ = w.audit(ctx, caller, "gateway_denied", fmt.Sprintf("%s: %s is not among the upstream's principals", name, caller))
			}
			return log(name, err), nil
		}
		if !ok {
			return toolError(fmt.Sprintf("%s is not offered now: its upstream no longer lists it. Nothing was run.", name), nil), nil
		}
		if t.Category == "read-only" {
			return w.passThrough(ctx, o.Logger, caller, t, args), nil
		}
		var obj map[string]any
		if json.Unmarshal(args, &obj) != nil || obj == nil {
			return log(name, bot.Invalid("arguments", "must be a JSON object")), nil
		}
		return w.gated(ctx, o.Logger, req, caller, t, args, obj, log)
	}
}

// toolError is an MCP tool error with text and structured data.
func toolError(text string, data map[string]any) *sdk.CallToolResult {
	if data == nil {
		data = map[string]any{}
	}
	data["error"] = text
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: data}
	r.IsError = true
	return r
}

// passThrough forwards a read-only call and audits it with the upstream's
// answer: no answer is given that was not recorded.
func (w *waiter) passThrough(ctx context.Context, log *slog.Logger, caller *bot.Caller, t gateway.Tool, args json.RawMessage) *sdk.CallToolResult {
	if caller == nil {
		return errorResult(ctx, log, t.Name, bot.Errorf(bot.KindUnauthenticated, "Access denied: authentication required. Provide a valid API key (Authorization: Bearer %s…).", bot.KeyPrefix))
	}
	if !caller.MayWrite() {
		return errorResult(ctx, log, t.Name, &bot.Error{Kind: bot.KindDenied, Msg: fmt.Sprintf("Access denied: %s may not call upstream tools; only a role that may call confirm_action (agent, member, admin) does.", caller)})
	}
	ans, ferr := w.gw.Call(ctx, t.Name, args)
	detail := t.Name + " read-only args_sha256=" + digest(args) + " " + resultDetail(ans, ferr)
	if err := w.auditRead(ctx, caller, "gateway_passed", detail); err != nil {
		return internalError(ctx, log, t.Name, fmt.Errorf("auditing a passed-through call: %w", err), nil)
	}
	if ferr != nil {
		return toolError(ferr.Error(), map[string]any{"upstream": t.Upstream})
	}
	return ans.Result
}

// digest is the SHA-256 of b, hex.
func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// resultDetail describes an upstream's answer for the audit: its SHA-256,
// isError and size, or the failure.
func resultDetail(a gateway.Answer, err error) string {
	if err != nil {
		return "upstream_error=" + strconv.Quote(gateway.Clip(err.Error(), 300))
	}
	return "result_sha256=" + digest(a.JSON) + " is_error=" + strconv.FormatBool(a.Result.IsError) + " result_bytes=" + strconv.Itoa(len(a.JSON))
}

// gated runs a call that needs a decision: confirm_action, the wait, then
// on approval the redemption and the forwarding of the approved
// arguments. An MRTR retry (requestState) waits on the request its state
// names, never a second one.
func (w *waiter) gated(ctx context.Context, lg *slog.Logger, req *sdk.CallToolRequest, caller *bot.Caller, t gateway.Tool, args json.RawMessage, obj map[string]any, log logFunc) (*sdk.CallToolResult, error) {
	start := w.now()
	deadline := start.Add(w.maxWait)
	sup := supportOf(req)
	var st requestState
	var out outcome
	if rs := req.Params.RequestState; rs != "" {
		principal := ""
		if caller != nil {
			principal = caller.ID
		}
		var err error
		if st, err = w.seal.openState(rs, principal, t.Name, args, start); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		out = w.status(ctx, log, caller, st.Request, deadline)
	} else {
		summary := fmt.Sprintf("%s on upstream %s, held by the Countersign gateway.", t.UpstreamTool, t.Upstream)
		if d := gateway.Clip(t.Description, 300); strings.TrimSpace(d) != "" {
			summary += " What the upstream says the tool does (its claim, not verified): «" + d + "»"
		}
		plan := ""
		if t.DryRun != nil {
			var refused *sdk.CallToolResult
			if plan, refused = w.dryRun(ctx, lg, caller, t, obj); refused != nil {
				return refused, nil
			}
		}
		var err error
		if out, err = w.request(ctx, log, caller, t, obj, summary, plan); err != nil {
			return log(t.Name, err), nil
		}
		switch {
		case sup.legacyTask:
			// A 2025-11-25 task-augmented call: a task at once, whatever
			// the request's state; tasks/get runs it once approved.
			return w.legacyTaskAnswer(out, caller, t.Name)
		case out.pending() && sup.tasks:
			return w.taskAnswer(out, caller, t.Name)
		case out.pending():
			out = w.status(ctx, log, caller, out.requestID(), deadline)
		}
	}
	if out.err != nil {
		return out.res, nil
	}
	id := out.requestID()
	switch out.status() {
	case "approved":
		res, _ := w.forward(ctx, lg, log, caller, t, args, out)
		return res, nil
	case "pending":
		if sup.modern {
			return w.inputRequired(out, caller, t.Name, args, st.Asked, sup)
		}
		return toolError(fmt.Sprintf("%s is waiting for a person's approval (request %s), and this call could wait no longer. Nothing was run yet. Call %s again with the same arguments to go on waiting on the same request: once it is approved, that call runs it, once (action_status with request_id %s shows where it stands).", t.Name, id, t.Name, id),
			map[string]any{"request_id": id, "status": "pending"}), nil
	case "denied", "expired":
		return decidedError(t, out), nil
	}
	// Anything else (a clarification, a refusal in the result): not run.
	res := out.res
	if res == nil {
		res = toolError(t.Name+" was not run.", nil)
	}
	res.IsError = true
	return res, nil
}

// decidedError is the tool error of a call of t whose request out was
// denied or expired: who denied it, and why.
func decidedError(t gateway.Tool, out outcome) *sdk.CallToolResult {
	id := out.requestID()
	reason, _ := out.data["reason"].(string)
	var names []string
	switch v := out.data["decided_by"].(type) {
	case string:
		names = append(names, v)
	case []any:
		for _, n := range v {
			if s, ok := n.(string); ok {
				names = append(names, s)
			}
		}
	}
	by := strings.Join(names, ", ")
	text := fmt.Sprintf("%s was not run: request %s was %s", t.Name, id, out.status())
	if by != "" && out.status() == "denied" {
		text += " by " + by
	}
	if reason != "" {
		text += " (" + reason + ")"
	}
	return toolError(text+".", map[string]any{"request_id": id, "status": out.status(), "reason": reason})
}

// maxGenerations bounds how many earlier runs of one exact call request
// skips before it makes a request that no retry finds again.
const maxGenerations = 16

// request makes (or finds again) the action request of a call: its
// action_id is derived from the tool and the arguments, so that a host
// that retries a call which gave up waiting (an older client's bounded
// wait) waits on the same request, and finds it approved, rather than
// asking a person twice. A request that was denied, expired or already
// ran is not the call's any more: the next generation's id makes a new one.
func (w *waiter) request(ctx context.Context, log logFunc, caller *bot.Caller, t gateway.Tool, obj map[string]any, summary, plan string) (outcome, error) {
	canon, err := json.Marshal(obj) // map keys sorted: one text per object
	if err != nil {
		return outcome{}, bot.Invalid("arguments", "cannot be encoded: %v", err)
	}
	base := "gw-" + digest(append([]byte(t.Name+"\x00"), canon...))[:40]
	var out outcome
	for gen := 1; gen <= maxGenerations+1; gen++ {
		args := map[string]any{"tool": t.Name, "arguments": obj, "summary": summary}
		switch {
		case plan != "":
			args["dry_run"] = plan
		case strings.EqualFold(t.Category, "destructive"):
			// A destructive call is shown with its plan; an upstream
			// tool has none of its own, so the plan is the exact call.
			args["dry_run"] = fmt.Sprintf("No dry run: upstream %s offers none for %s. Approving runs exactly this call, once: %s %s", t.Upstream, t.UpstreamTool, t.UpstreamTool, canon)
		}
		if gen <= maxGenerations {
			args["action_id"] = fmt.Sprintf("%s-%d", base, gen)
		}
		b, _ := json.Marshal(args)
		out = w.call(ctx, log, caller, confirmTool, b)
		if out.err != nil {
			var e *bot.Error
			if errors.As(out.err, &e) && e.Kind == bot.KindConflict && e.Field == "action_id" {
				continue // the same id with another body (a changed summary): a new one
			}
			return out, nil
		}
		_, ran := out.data["executed_at"]
		switch st := out.status(); {
		case st == "approved" && ran:
			// It ran. The first identical call soon after is the retry of
			// a host that lost the answer: it gets the recorded answer
			// (forward replays it). Any other is a new call.
			// (Or, while another call forwards it, is told to come back.)
			replay, running, err := w.claimReplay(ctx, out.requestID())
			if err != nil {
				return outcome{}, fmt.Errorf("reading the recorded answer of %s: %w", out.requestID(), err)
			}
			if replay || running {
				return out, nil
			}
			continue
		case st == "denied" || st == "expired":
			if w.recent(out.data["decided_at"]) {
				return out, nil // the retry of a call just decided gets the decision
			}
			continue
		}
		return out, nil
	}
	return out, nil
}

// maxPlan bounds the dry-run plan taken from a companion's answer.
const maxPlan = 16 << 10

// dryRun calls the configured read-only companion of t with the call's
// arguments (or the configured ones) and returns its answer as the plan
// for the card. A companion that configuration does not classify
// read-only, that fails, or that answers an error refuses the call:
// nobody is asked without the plan configuration promised them.
func (w *waiter) dryRun(ctx context.Context, log *slog.Logger, caller *bot.Caller, t gateway.Tool, obj map[string]any) (string, *sdk.CallToolResult) {
	name := gateway.Name(t.Upstream, t.DryRun.Tool)
	refuse := func(why string) (string, *sdk.CallToolResult) {
		return "", toolError(fmt.Sprintf("%s was not run, and nobody was asked: its dry run %s %s. Nothing was run.", t.Name, name, why), map[string]any{"dry_run": name})
	}
	comp, ok := w.gw.Tool(name)
	switch {
	case !ok:
		return refuse("is not offered by the upstream now")
	case comp.Category != "read-only":
		return refuse("is not classified read-only (gateway.upstreams[].tools), so it is not called to plan another call")
	}
	if caller == nil || !caller.MayWrite() {
		return refuse("may not be called by this caller")
	}
	args := t.DryRun.Arguments
	if args == nil {
		args = obj
	}
	b, err := json.Marshal(args)
	if err != nil {
		return refuse("has arguments that cannot be encoded")
	}
	ans, ferr := w.gw.Call(ctx, name, b)
	res := ans.Result
	if err := w.audit(ctx, caller, "gateway_dry_run", fmt.Sprintf("%s for %s args_sha256=%s %s", name, t.Name, digest(b), resultDetail(ans, ferr))); err != nil {
		return "", internalError(ctx, log, t.Name, fmt.Errorf("auditing a dry run: %w", err), nil)
	}
	switch {
	case ferr != nil:
		return refuse("failed: " + ferr.Error())
	case res.IsError:
		return refuse("answered an error: " + gateway.Clip(resultText(res), 500))
	}
	out := strings.ToValidUTF8(resultText(res), "\uFFFD")
	if len(out) > maxPlan {
		out = gateway.Clip(out, maxPlan)
	}
	return fmt.Sprintf("Dry run by upstream %s's %s (its answer, not verified by Countersign):\n%s", t.Upstream, t.DryRun.Tool, out), nil
}

// retryWindow is how long after a denial or an expiry a retry of the same
// call is answered with it; later, the same call asks again.
const retryWindow = 15 * time.Minute

// recent reports whether a decided_at stamp is within retryWindow.
func (w *waiter) recent(v any) bool {
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339, s)
	return err == nil && w.now().Sub(at) < retryWindow
}

// forward redeems the receipt of the approved request in out and calls
// the upstream with exactly the approved arguments, once. A request that
// already ran (or is being run by another call now: running) gets its
// recorded answer, never a second run. Once the marker is committed the
// call is finished and recorded even if the host goes away meanwhile (it
// is bounded by the gateway's call timeout).
func (w *waiter) forward(ctx context.Context, lg *slog.Logger, log logFunc, caller *bot.Caller, t gateway.Tool, args json.RawMessage, out outcome) (res *sdk.CallToolResult, running bool) {
	id := out.requestID()
	if _, ran := out.data["executed_at"]; ran {
		// Already run (a retry, with its requestState or as an identical
		// call, or a task polled again): its recorded answer.
		return w.replay(ctx, t, id, "", true)
	}
	rec, _ := out.data["receipt"].(string)
	if rec == "" {
		return toolError(fmt.Sprintf("%s was not run: request %s is approved but carries no receipt to redeem (is it sensitive, with its details withheld from you?).", t.Name, id), map[string]any{"request_id": id}), false
	}
	if _, ok := w.gw.Tool(t.Name); !ok {
		return toolError(fmt.Sprintf("%s was not run: its upstream does not offer it now. Request %s stays approved and unused: call %s again with the same arguments once the upstream lists it (tools/list).", t.Name, id, t.Name), map[string]any{"request_id": id, "upstream": t.Upstream}), false
	}
	// The marker first: should the process stop from here to the audit of
	// the answer, the next start says the outcome is unknown. One call
	// holds it; another that finds it is told to come back for the answer.
	ctx = context.WithoutCancel(ctx)
	owned, err := w.mark(ctx, caller, id, t.Name)
	if err != nil {
		return internalError(ctx, lg, t.Name, fmt.Errorf("recording the forwarding of %s: %w", id, err), nil), false
	}
	if !owned {
		return w.replay(ctx, t, id, "", true)
	}
	var kept json.RawMessage // the answer to keep for a retry
	defer func() {
		if err := w.finish(ctx, id, kept); err != nil {
			lg.Error("gateway: dropping a forwarding marker", "request", id, "err", err)
		}
	}()
	b, _ := json.Marshal(map[string]string{"receipt": rec})
	red := w.call(ctx, log, caller, "redeem_receipt", b)
	if red.err != nil {
		// Already redeemed: a retry of a call that ran gets its recorded
		// answer; anything else (reopened, expired) as the core says.
		var e *bot.Error
		if errors.As(red.err, &e) && e.Kind == bot.KindConflict && e.Field == "" {
			return w.replay(ctx, t, id, resultText(red.res), true)
		}
		return red.res, false
	}
	approved, sum, err := approvedArguments(t.Name, red, args)
	if err != nil {
		_ = w.audit(ctx, caller, "gateway_refused", fmt.Sprintf("%s %s: %v", id, t.Name, err))
		return toolError(fmt.Sprintf("%s was not run: %v. Request %s is recorded as executed; ask again for a new decision.", t.Name, err, id), map[string]any{"request_id": id}), false
	}
	ans, ferr := w.gw.Call(ctx, t.Name, approved)
	detail := fmt.Sprintf("%s %s approved_args_sha256=%s %s", id, t.Name, sum, resultDetail(ans, ferr))
	if err := w.audit(ctx, caller, "gateway_forwarded", detail); err != nil {
		// The upstream ran; its answer could not be recorded.
		return internalError(ctx, lg, t.Name, fmt.Errorf("auditing the upstream's answer to %s: %w", id, err), nil), false
	}
	if ferr != nil {
		return toolError(fmt.Sprintf("%s was approved (request %s) and forwarded once, but the upstream call failed: %v. It is not retried.", t.Name, id, ferr), map[string]any{"request_id": id, "upstream": t.Upstream}), false
	}
	kept = ans.JSON
	edited, _ := red.data["edited"].(bool)
	cp := *ans.Result
	if cp.Meta == nil {
		cp.Meta = sdk.Meta{}
	} else {
		m := sdk.Meta{}
		for k, v := range cp.Meta {
			m[k] = v
		}
		cp.Meta = m
	}
	cp.Meta[metaRequest] = map[string]any{"request_id": id, "approved_args_sha256": sum, "edited": edited, "confirmed_by": red.data["confirmed_by"]}
	return &cp, false
}

// replay answers a call of request id, which already ran, with the
// upstream's answer recorded when it ran; nothing is run. note marks it as
// a replay for the agent, in a text line (a task's result, read again, is
// not one); _meta says replayed either way. Without a recorded answer it
// is a tool error: running, when another call is forwarding it now (come
// back for the answer); else the upstream failed, the outcome is unknown,
// or the answer was pruned. why is the core's refusal, if any.
func (w *waiter) replay(ctx context.Context, t gateway.Tool, id, why string, note bool) (res *sdk.CallToolResult, running bool) {
	raw, at := w.recordedResult(ctx, id)
	var r sdk.CallToolResult
	if raw == nil || json.Unmarshal(raw, &r) != nil {
		switch found, live := w.forwarding(ctx, id); {
		case live:
			text := fmt.Sprintf("%s is running now at upstream %s under request %s (approved, forwarded once). Nothing was run again. Call %s again with the same arguments shortly to get its answer.", t.Name, t.Upstream, id, t.Name)
			return toolError(text, map[string]any{"request_id": id, "status": "running"}), true
		case found:
			text := fmt.Sprintf("%s was not run again: the call that forwarded request %s to upstream %s stopped before its answer was recorded, so whether the upstream ran it is unknown. It is not run again: check the upstream, then call %s again for a new decision.", t.Name, id, t.Upstream, t.Name)
			return toolError(text, map[string]any{"request_id": id, "status": "outcome_unknown"}), false
		}
		text := fmt.Sprintf("%s was not run again: request %s already ran once (its receipt is redeemed), and no answer of the upstream is kept for it (the upstream failed, or whether it ran is unknown: check the audit log and the upstream). Call it again for a new decision.", t.Name, id)
		if why != "" {
			text += " (" + why + ")"
		}
		return toolError(text, map[string]any{"request_id": id, "status": "approved", "executed": true}), false
	}
	if r.Meta == nil {
		r.Meta = sdk.Meta{}
	}
	ran := at.UTC().Format(time.RFC3339)
	r.Meta[metaRequest] = map[string]any{"request_id": id, "replayed": true, "ran_at": ran}
	if note {
		r.Content = append(r.Content, &sdk.TextContent{Text: fmt.Sprintf("[Countersign: the recorded answer of request %s, which ran once at %s; nothing ran again. Calling it again is a new call: it waits for a new decision, or runs at once if a standing grant covers it.]", id, ran)})
	}
	return &r, false
}

// approvedArguments reads what was approved from redeem_receipt's answer:
// its approved_arguments; or, when the details are withheld from the
// requester and the approval is of the proposal unedited (the approved
// hash is the proposal's), the call's own arguments. Either way the bytes
// returned hash to the approval's approved_args_sha256 for tool, or
// nothing is returned: what runs is what was approved.
func approvedArguments(tool string, red outcome, args json.RawMessage) (json.RawMessage, string, error) {
	data := red.data
	sum, _ := data["approved_args_sha256"].(string)
	if sum == "" {
		return nil, "", errors.New("the approval names no approved arguments")
	}
	var approved json.RawMessage
	if _, ok := data["approved_arguments"]; ok {
		// The bytes as the core wrote them (structured keeps them raw),
		// not a float64 round trip.
		var fields map[string]json.RawMessage
		raw, _ := red.res.StructuredContent.(json.RawMessage)
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, "", errors.New("the approval could not be read")
		}
		approved = bytes.TrimSpace(fields["approved_arguments"])
		if len(approved) == 0 || approved[0] != '{' {
			return nil, "", errors.New("the approved arguments are not a JSON object")
		}
	} else {
		proposed, _ := data["args_sha256"].(string)
		if edited, _ := data["edited"].(bool); edited || proposed != sum {
			return nil, "", errors.New("the approved arguments are withheld from this caller, and they differ from the call's")
		}
		approved = args
	}
	if h, err := bot.ArgsHash(tool, approved); err != nil || h != sum {
		return nil, "", errors.New("the arguments to run do not hash to the approval's approved_args_sha256")
	}
	return approved, sum, nil
}
