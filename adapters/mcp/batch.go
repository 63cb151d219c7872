package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/countersign/countersign/bot"
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
func guardMessages(o HTTPOptions, next http.Handler) http.Handler {
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
		}
		_ = json.Unmarshal(body, &msg) // a malformed message is the SDK's to answer
		charge := o.Charge
		if msg.Method != "tools/call" {
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
			if msg.Method == "tools/call" {
				r = r.WithContext(ctx) // the prepaid token goes on to bot.Call
			}
		}
		next.ServeHTTP(w, r)
	})
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
