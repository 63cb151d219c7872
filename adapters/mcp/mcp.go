// Package mcp serves Countersign's one tool registry over the Model Context
// Protocol, with the official Go SDK: streamable HTTP (POST /mcp, the same
// bearer keys as the HTTP API) and stdio (a local agent). Every tool is
// declared once, in the bot; this package only translates: the registry's
// JSON Schema and annotations become MCP tool definitions, a tool call goes
// through bot.Call like any other surface's, and its answer becomes the
// same text as the HTTP API's plus the structured data.
package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// App is what the MCP server needs of the application.
type App interface {
	Call(ctx context.Context, caller *bot.Caller, tool string, args []byte) (bot.Result, error)
	Tools() []bot.ToolInfo
}

// CallerFunc returns the caller of one tool call: the principal behind the
// HTTP request's bearer key, or the local caller of a stdio session. A nil
// caller is unauthenticated (the call is refused with the reference's
// "authentication required" text); an error is shown to the client.
type CallerFunc func(ctx context.Context, req *sdk.CallToolRequest) (*bot.Caller, error)

// Options configure NewServer.
type Options struct {
	App     App
	Caller  CallerFunc
	Version string
	Logger  *slog.Logger
	// MaxCallWait bounds how long one call may wait for a decision:
	// action_status's wait_seconds is cut to it, so that the call answers
	// (pending, with the text telling the agent to poll) before an MCP host
	// gives up on it, at about 60 seconds; a confirm_action that waits for
	// a person (wait.go) answers within it too. Zero: no bound on
	// action_status, and 45 seconds for confirm_action.
	MaxCallWait time.Duration
	// StateKey seals what the server hands a client to bring back (an MRTR
	// requestState, a task id; seal.go). Every replica must use the same
	// key. Empty: a random key of this process.
	StateKey []byte
	// ItemURL returns the console page of an item, for the client of a
	// call that needs step-up; "" (or nil) when the console is not public.
	ItemURL func(item uint64) string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Upstreams serves the tools of upstream MCP servers beside the
	// registry's (upstreams.go); nil: none.
	Upstreams *Upstreams
}

// instructions tell a connecting agent how Countersign is meant to be used.
const instructions = `Countersign holds an agent memory with safety gates and a human approval queue.
Before an irreversible action, call check_before_act (or safe_recall for an answer you will act on): a BLOCKED or WITHHELD verdict means do not act.
Changes to confirm-required memory and gated tool calls wait for a person: pending_changes and action_status show them; an agent key cannot approve its own proposal.
Every call is attributed to the key you authenticated with and recorded on a signed audit chain.`

// NewServer returns an MCP server declaring every tool of the registry, as
// it is when NewServer runs.
func NewServer(o Options) *sdk.Server { return newServer(o, newWaiter(o)) }

func newServer(o Options, w *waiter) *sdk.Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "countersign", Title: "Countersign", Version: o.Version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       quiet(o.Logger),
		// No logging capability: the server does not stream its logs to
		// clients. The Tasks extension is answered by tasks.go.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Extensions: map[string]any{tasksExtension: map[string]any{}}},
	})
	for _, ti := range o.App.Tools() {
		s.AddTool(toolOf(ti), handler(o, w, ti.Name))
	}
	if o.Upstreams != nil && o.Upstreams.Gateway != nil {
		serveUpstreams(s, o, w)
	}
	s.AddReceivingMiddleware(reshape)
	return s
}

// toolOf translates a registry entry into an MCP tool definition.
func toolOf(ti bot.ToolInfo) *sdk.Tool {
	destructive := ti.Annotations.Destructive
	openWorld := false // no tool reaches outside Countersign's own state
	return &sdk.Tool{
		Name:        ti.Name,
		Description: ti.Description,
		InputSchema: encodedSchema(ti.Schema),
		Annotations: &sdk.ToolAnnotations{
			ReadOnlyHint:    ti.Annotations.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  ti.Annotations.Idempotent,
			OpenWorldHint:   &openWorld,
		},
		Meta: sdk.Meta{"countersign/capability": string(ti.Capability)},
	}
}

// encodedSchema is schema as the JSON it is sent as, encoded once when
// the tool is added. The SDK encodes a tool's input schema again for
// every tools/list, and for every tools/call over HTTP (it reads the
// schema's x-mcp-header annotations to check the request's headers):
// bytes are copied there, where a *jsonschema.Schema or a map is walked by
// reflection each time (BENCHMARKS.md, "The MCP gateway"). A schema that
// does not encode is given as it is, for the SDK to refuse when it adds
// the tool.
func encodedSchema(schema any) any {
	b, err := json.Marshal(schema)
	if err != nil {
		return schema
	}
	return json.RawMessage(b)
}

// handler runs tool name through the application's one call path.
func handler(o Options, w *waiter, name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		if ti := tokenInfo(req); ti != nil {
			if id, ok := ti.Extra["request_id"].(string); ok {
				ctx = bot.WithRequestID(ctx, id)
			}
		}
		defer func() {
			if v := recover(); v != nil {
				res, err = internalError(ctx, o.Logger, name, errors.New("panic in tool handler"), v), nil
			}
		}()
		if ti := tokenInfo(req); ti != nil {
			// The rate token the HTTP guard took for this call (batch.go).
			if p, ok := ti.Extra["prepaid"].(*bot.Prepaid); ok {
				ctx = bot.WithPrepaid(ctx, p)
			}
		}
		caller, err := o.Caller(ctx, req)
		if err != nil {
			return errorResult(ctx, o.Logger, name, err), nil
		}
		var args []byte
		if req.Params != nil {
			args = req.Params.Arguments
		}
		if name == confirmTool {
			return w.confirm(ctx, req, caller, args, func(tool string, err error) *sdk.CallToolResult {
				return errorResult(ctx, o.Logger, tool, err)
			})
		}
		if name == waitingTool {
			args = capWait(args, o.MaxCallWait)
		}
		out, err := o.App.Call(bot.WithSurface(ctx, "mcp"), caller, name, args)
		if err != nil {
			return errorResult(ctx, o.Logger, name, err), nil
		}
		r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Text}}}
		if out.Data != nil {
			r.StructuredContent = structured(out.Data)
		}
		return r, nil
	}
}

// waitingTool is the one tool whose call waits for a decision
// (confirm_action answers at once, pending or decided).
const waitingTool = "action_status"

// capWait cuts the wait_seconds of args to limit (whole seconds, at least
// one). Arguments that are not a JSON object, or carry no wait, are passed
// on unchanged: the tool's own validation answers for them.
func capWait(args []byte, limit time.Duration) []byte {
	secs := int(limit / time.Second)
	if secs < 1 {
		return args
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	var w float64
	if raw, ok := m["wait_seconds"]; !ok || json.Unmarshal(raw, &w) != nil || w <= float64(secs) || w > 60 {
		// Over 60 is a bad request the tool refuses by name; leave it to it.
		return args
	}
	m["wait_seconds"] = json.RawMessage(strconv.Itoa(secs))
	out, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return out
}

func tokenInfo(req *sdk.CallToolRequest) *auth.TokenInfo {
	if req == nil || req.Extra == nil {
		return nil
	}
	return req.Extra.TokenInfo
}

// structured returns data as a JSON object for StructuredContent: an object
// as it is, anything else wrapped as {"result": ...}.
func structured(data any) any {
	b, err := json.Marshal(data)
	if err != nil {
		return nil
	}
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' {
		return json.RawMessage(b)
	}
	return map[string]json.RawMessage{"result": b}
}

// errorResult turns a failed call into an MCP tool error: the message the
// HTTP API would show (the "Access denied" wording intact), and the error's
// structured detail. A fault of Countersign's shows only a reference.
func errorResult(ctx context.Context, log *slog.Logger, tool string, err error) *sdk.CallToolResult {
	var e *bot.Error
	if !errors.As(err, &e) || e.Kind == bot.KindInternal {
		return internalError(ctx, log, tool, err, nil)
	}
	data := map[string]any{"error": e.Error(), "kind": bot.KindName(e.Kind)}
	if e.Field != "" {
		data["field"] = e.Field
	}
	if e.Data != nil {
		data["data"] = e.Data
	}
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: e.Error()}}, StructuredContent: data}
	r.IsError = true
	return r
}

func internalError(ctx context.Context, log *slog.Logger, tool string, err error, panicked any) *sdk.CallToolResult {
	ref := bot.RequestID(ctx)
	if ref == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		ref = hex.EncodeToString(b[:])
	}
	msg := "Countersign couldn't complete that (ref " + ref + "). Retry if it was a transient blip; otherwise the full detail is in the server logs under that reference."
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		msg = "the call was cancelled or the server is shutting down; retry (ref " + ref + ")"
	}
	log.Error("mcp tool call failed", "request_id", ref, "tool", tool, "err", err, "panic", panicked)
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, StructuredContent: map[string]any{"error": msg, "kind": "internal"}}
	r.IsError = true
	return r
}

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	App     App
	Version string
	Logger  *slog.Logger
	// CallerFrom returns the caller that the authentication middleware in
	// front of this handler put in the request's context (nil: none).
	CallerFrom func(ctx context.Context) *bot.Caller
	// MaxBody bounds a request body (the middleware in front enforces it
	// with a 413 first; this is the SDK's own bound).
	MaxBody int64
	// MaxCallWait is Options.MaxCallWait.
	MaxCallWait time.Duration
	// StateKey, ItemURL and Now are Options'.
	StateKey []byte
	ItemURL  func(item uint64) string
	Now      func() time.Time
	// Upstreams is Options'.
	Upstreams *Upstreams
	// Charge takes the rate token of a tools/call message before the SDK
	// sees it (the bot's Charge), so that a limited call is answered HTTP
	// 429 with Retry-After. Nil: the bot's Call still takes it, and a
	// limited call is a tool error.
	Charge func(ctx context.Context, caller *bot.Caller) (context.Context, error)
	// ChargeProtocol takes a token for any other message (initialize,
	// tools/list, ping, notifications) from a bucket of its own. Nil: free.
	ChargeProtocol func(ctx context.Context, caller *bot.Caller) (context.Context, error)
}

// NewHTTPHandler returns the streamable HTTP endpoint. It is stateless: each
// POST carries its own bearer key, is authenticated on its own (so a
// revoked key stops working at once, mid-conversation), and leaves nothing
// behind when it ends. GET and DELETE answer 405, as the protocol allows a
// server without a stream of its own. Put authentication (and the host,
// rate and size guards) in front of it.
//
// The tool list is read from App on the first request, when every wiring
// step has registered its tools.
func NewHTTPHandler(o HTTPOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	so := Options{App: o.App, Version: o.Version, Logger: o.Logger, Caller: callerFromToken, MaxCallWait: o.MaxCallWait, StateKey: o.StateKey, ItemURL: o.ItemURL, Now: o.Now, Upstreams: o.Upstreams}
	w := newWaiter(so)
	server := sync.OnceValue(func() *sdk.Server { return newServer(so, w) })
	getServer := func(*http.Request) *sdk.Server { return server() }
	h := sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              quiet(o.Logger),
		MaxRequestBodyBytes: o.MaxBody,
		// The guard in front checks Host and Origin against the configured
		// lists (http.allowed_hosts, http.allowed_origins), which may name
		// more than localhost.
		DisableLocalhostProtection: true,
	})
	// Hand the caller to the SDK as token info, the one per-request value
	// it passes on to a tool handler.
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c := o.CallerFrom(r.Context())
		if c == nil {
			return nil, auth.ErrInvalidToken
		}
		extra := map[string]any{"caller": c, "request_id": bot.RequestID(r.Context())}
		if p := bot.PrepaidFrom(r.Context()); p != nil {
			extra["prepaid"] = p
		}
		return &auth.TokenInfo{UserID: c.ID, Extra: extra}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return guardMessages(o, w, authed)
}

// callerFromToken reads the caller the HTTP handler put in the token info.
func callerFromToken(_ context.Context, req *sdk.CallToolRequest) (*bot.Caller, error) {
	ti := tokenInfo(req)
	if ti == nil {
		return nil, nil
	}
	c, _ := ti.Extra["caller"].(*bot.Caller)
	return c, nil
}

// ServeStdio serves one MCP session over r and w (newline-delimited JSON)
// until the client closes r or ctx ends. caller names the caller of every
// call (the local admin, or the principal of a key).
func ServeStdio(ctx context.Context, o Options, r io.Reader, w io.Writer) error {
	rc, ok := r.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(r)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	wt := newWaiter(o)
	s := newServer(o, wt)
	err := s.Run(ctx, &taskTransport{
		Transport: &sdk.IOTransport{Reader: rc, Writer: nopWriteCloser{w}},
		w:         wt,
		caller:    o.Caller,
		log:       func(tool string, err error) *sdk.CallToolResult { return errorResult(ctx, o.Logger, tool, err) },
	})
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// quiet passes on only the SDK's warnings and errors: it logs every session
// at info, which for a stateless server is every request.
func quiet(l *slog.Logger) *slog.Logger { return slog.New(minLevel{l.Handler()}) }

type minLevel struct{ slog.Handler }

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler { return minLevel{h.Handler.WithAttrs(as)} }

func (h minLevel) WithGroup(name string) slog.Handler { return minLevel{h.Handler.WithGroup(name)} }
