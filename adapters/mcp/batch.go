package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes the guard answers with.
const (
	codeInvalidRequest = -32600 // JSON-RPC: not a valid request object
	codeRateLimited    = -32000 // implementation-defined server error
)

// guardMessages looks at each POST before the SDK does:
//
//   - A JSON-RPC batch (a JSON array) is refused with HTTP 400 and a
//     JSON-RPC error -32600, whatever its size: MCP 2025-06-18 removed
//     batching, and a batch would otherwise run many tool calls for one
//     request's worth of checks. (The SDK refuses batches only when the
//     client declares 2025-06-18 or later.)
//   - A message with a key given twice in one object, or nested deeper
//     than bot.MaxJSONDepth, is refused with HTTP 400 and -32600 naming
//     where (bot.CheckJSON): the SDK would keep the last of duplicate keys
//     ("params.arguments" twice), another reader the first.
//   - A tools/call message takes its rate token here (o.Charge), so that a
//     limited call is answered HTTP 429 with Retry-After and a JSON-RPC
//     error; the token travels on to bot.Call, which takes no second one.
//     The handshake (initialize, notifications/initialized, tools/list,
//     ping) takes no tool token: only tool calls count. Those messages
//     draw on a separate, much larger bucket (o.ChargeProtocol) so that
//     they cannot be sent without bound either.
//
// It also answers the tasks/* methods itself (tasks.go; charged as tool
// calls, since each reads its request through action_status), moves a
// 2025-11-25 tools/call's params.task where the tool handler finds it,
// and adds the tasks capability to the SDK's initialize and tools/list
// answers.
func guardMessages(o HTTPOptions, wt *waiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := bodyOf(r)
		if err != nil {
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if len(trimmed) > 0 && trimmed[0] == '[' {
			writeRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest,
				"JSON-RPC batches are not supported: MCP 2025-06-18 removed batching; send one JSON-RPC message per POST", nil)
			return
		}
		if err := bot.CheckJSON("", body); err != nil {
			writeRPCError(w, http.StatusBadRequest, nil, codeInvalidRequest, err.Error(), nil)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(body, &msg) // a malformed message is the SDK's to answer
		tasks := isTaskMethod(msg.Method) && len(msg.ID) > 0 && string(msg.ID) != "null"
		charge := o.Charge
		if msg.Method != "tools/call" && !tasks {
			// The handshake and housekeeping take no tool token, only one
			// from a far larger bucket of their own, so that they stay
			// free for a client and bounded for a flood.
			charge = o.ChargeProtocol
		}
		if charge != nil {
			ctx, err := charge(r.Context(), o.CallerFrom(r.Context()))
			if err != nil {
				var e *bot.Error
				if !errors.As(err, &e) || e.Kind != bot.KindRateLimited {
					writeRPCError(w, http.StatusInternalServerError, msg.ID, codeRateLimited, "internal error", nil)
					return
				}
				w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
				writeRPCError(w, http.StatusTooManyRequests, msg.ID, codeRateLimited, e.Msg, map[string]any{"retry_after_seconds": e.RetryAfter})
				return
			}
			if msg.Method == "tools/call" || tasks {
				r = r.WithContext(ctx) // the prepaid token goes on to bot.Call
			}
		}
		switch {
		case tasks:
			answerTask(w, r, o, wt, msg.ID, msg.Method, msg.Params)
			return
		case msg.Method == "tools/call":
			if lifted := liftTask(msg.Params); !bytes.Equal(lifted, msg.Params) {
				r = withParams(r, body, lifted)
			}
		case advertised(msg.Method):
			pw := &patchWriter{header: http.Header{}}
			next.ServeHTTP(pw, r)
			pw.flush(w, msg.Method)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// answerTask answers one tasks/* request of the authenticated caller.
func answerTask(w http.ResponseWriter, r *http.Request, o HTTPOptions, wt *waiter, id json.RawMessage, method string, params json.RawMessage) {
	caller := o.CallerFrom(r.Context())
	if caller == nil {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeRPCError(w, http.StatusUnauthorized, id, codeInvalidRequest, "authentication required", nil)
		return
	}
	ctx := r.Context()
	res, err := wt.handleTask(ctx, func(tool string, err error) *sdk.CallToolResult {
		return errorResult(ctx, o.Logger, tool, err)
	}, caller, method, params)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			o.Logger.Error("mcp task request failed", "request_id", bot.RequestID(ctx), "method", method, "err", err)
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
		var data any
		if len(je.Data) > 0 {
			data = je.Data
		}
		writeRPCError(w, http.StatusOK, id, int(je.Code), je.Message, data)
		return
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	if err != nil {
		writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInternalError, "internal error", nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// withParams returns r with its JSON-RPC message's params replaced.
func withParams(r *http.Request, body, params json.RawMessage) *http.Request {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return r
	}
	m["params"] = params
	b, err := json.Marshal(m)
	if err != nil {
		return r
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return r
}

// patchWriter holds the SDK's answer to a message whose answer advertise
// changes.
type patchWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (p *patchWriter) Header() http.Header { return p.header }

func (p *patchWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

func (p *patchWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.body.Write(b)
}

// flush writes the held answer to w, advertised when it is a JSON-RPC
// result.
func (p *patchWriter) flush(w http.ResponseWriter, method string) {
	body := p.body.Bytes()
	if p.status == http.StatusOK && strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
		var resp map[string]json.RawMessage
		if json.Unmarshal(body, &resp) == nil && resp["result"] != nil {
			resp["result"] = advertise(method, resp["result"])
			if b, err := json.Marshal(resp); err == nil {
				body = b
			}
		}
	}
	for k, v := range p.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if p.status == 0 {
		p.status = http.StatusOK
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(body)
}

// bodyOf returns the request's body and puts it back for the next reader.
// A body already buffered by the middleware in front (one with a Bytes
// method) is used as it is, not copied again.
func bodyOf(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(interface{ Bytes() []byte }); ok {
		return b.Bytes(), nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// writeRPCError answers a JSON-RPC error object with an HTTP status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data any) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
