// Package webhook is the agents' HTTP edge: the tool API (POST
// /v1/tools/{name}, GET /v1/tools), health and readiness, and the mount
// points of the other HTTP surfaces (MCP, the Slack and Discord callbacks,
// metrics). It authenticates bearer keys and translates every error into
// one status code and a body that says what is wrong.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/adapters/httpstatus"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// App is what the server needs of the application.
type App interface {
	Authenticate(ctx context.Context, key string) (*bot.Caller, error)
	Call(ctx context.Context, caller *bot.Caller, tool string, args []byte) (bot.Result, error)
	Tools() []bot.ToolInfo
}

// Options configure NewServer.
type Options struct {
	App     App
	Logger  *slog.Logger
	MaxBody int64 // bytes; larger bodies get 413
	// Ready reports whether the store is open (for /readyz).
	Ready func() error
	// Degraded names the parts that are down while the server is still
	// ready (the gateway's upstreams, by name): /readyz answers 200 with
	// status "degraded" and their names. Nil: none.
	Degraded func() []string
	// Mounts are extra handlers by pattern ("POST /mcp", "POST /slack/interactions", "GET /metrics").
	Mounts map[string]http.Handler
	// Middleware wraps every tool call after authentication (rate limits,
	// idempotency, metrics); applied in order, outermost first.
	Middleware []func(http.Handler) http.Handler
	// OnRequest, if set, is told about every finished request: its route
	// pattern ("" when no route matched), status and duration.
	OnRequest func(pattern string, status int, d time.Duration)
	// Auth authenticates the bearer credential of a tool call (API keys
	// and, with OAuth configured, access tokens). Nil: App.
	Auth Authenticator
	// Guard, if set, checks Host and Origin on every route (the tool API,
	// every mount, the 404 answer) except the health probes, which answer
	// only a constant status to orchestrators that call them by names no
	// config knows, and the routes Trust names.
	Guard *HostGuard
	// Trust, by route pattern (a key of Mounts), is what the Guard checks
	// less on that route: TrustSigned or TrustOwnOrigin.
	Trust map[string]Trust
	// Trace, if set, wraps the handling of every request inside its
	// request id (cmd gives the span of each request: adapters/tracing).
	Trace func(http.Handler) http.Handler
}

// Trust is why a route is exempt from some of the Guard's checks.
type Trust int

const (
	// TrustSigned is a platform's webhook (Slack, Discord): called by the
	// platform, with the Host of whatever address it was given, and signed
	// over its raw body with a secret no browser page holds. No Host or
	// Origin check.
	TrustSigned Trust = iota + 1
	// TrustOwnOrigin is a surface that checks Origin itself (the web
	// console, on every form post): the Guard checks Host only.
	TrustOwnOrigin
)

// NewServer returns the HTTP handler of the whole API.
func NewServer(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	mux := http.NewServeMux()
	addRoutes(mux, o)
	h := withObserve(o.OnRequest, withRecover(o.Logger, mux))
	if o.Trace != nil {
		h = o.Trace(h)
	}
	return withRequestID(h)
}

func addRoutes(mux *http.ServeMux, o Options) {
	guard := func(pattern string, h http.Handler) http.Handler {
		if o.Guard == nil {
			return h
		}
		switch o.Trust[pattern] {
		case TrustSigned:
			return h
		case TrustOwnOrigin:
			return o.Guard.Check(h, false)
		}
		return o.Guard.Check(h, true)
	}
	var call http.Handler = handleCall(o)
	for i := len(o.Middleware) - 1; i >= 0; i-- {
		call = o.Middleware[i](call)
	}
	var auth Authenticator = o.App
	if o.Auth != nil {
		auth = o.Auth
	}
	mux.Handle("POST /v1/tools/{name}", guard("", Authenticate(auth, o.Logger, "http")(call)))
	mux.Handle("GET /v1/tools", guard("", handleList(o.App)))
	// The probes: no Host check (see Options.Guard).
	mux.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.Handle("GET /readyz", handleReady(o.Ready, o.Degraded))
	for pattern, h := range o.Mounts {
		mux.Handle(pattern, guard(pattern, h))
	}
	mux.Handle("/", guard("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no route " + r.Method + " " + r.URL.Path + "; tools are called with POST /v1/tools/{name}, listed by GET /v1/tools"})
	})))
}

type ctxKey int

const keyCaller ctxKey = iota

// CallerFrom returns the authenticated caller of a request.
func CallerFrom(ctx context.Context) *bot.Caller {
	c, _ := ctx.Value(keyCaller).(*bot.Caller)
	return c
}

// RequestID returns the request's id (also sent as X-Request-ID).
func RequestID(ctx context.Context) string { return bot.RequestID(ctx) }

// BearerKey extracts the key of an "Authorization: Bearer <key>" header.
func BearerKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

// Authenticator resolves an API key to its principal.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (*bot.Caller, error)
}

// Authenticate returns middleware that resolves the request's bearer key to
// a caller on surface (http, mcp), answers 401 when it cannot, and passes the
// caller on in the request's context (CallerFrom). The key is looked up on
// every request, so a revoked key stops working at once.
func Authenticate(app Authenticator, log *slog.Logger, surface string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := bot.Secret(BearerKey(r))
			caller, err := app.Authenticate(r.Context(), key.Reveal())
			if err != nil {
				WriteError(w, r, log, err)
				return
			}
			caller.Surface = surface
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyCaller, caller)))
		})
	}
}

func handleCall(o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r, o.MaxBody)
		if err != nil {
			WriteError(w, r, o.Logger, err)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
			WriteError(w, r, o.Logger, bot.Invalid("", "Content-Type must be application/json, not %q", ct))
			return
		}
		res, err := o.App.Call(bot.WithSurface(r.Context(), "http"), CallerFrom(r.Context()), r.PathValue("name"), body)
		if err != nil {
			WriteError(w, r, o.Logger, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

func handleList(app App) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"tools": app.Tools()})
	})
}

func handleReady(ready func() error, degraded func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				// The cause is for the operator's logs, not for every prober.
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": "the store is not open"})
				return
			}
		}
		if degraded != nil {
			if down := degraded(); len(down) > 0 {
				writeJSON(w, http.StatusOK, map[string]any{"status": "degraded", "upstreams_down": down})
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}

// StatusOf maps an error kind to its HTTP status.
func StatusOf(err error) int {
	switch bot.KindOf(err) {
	case bot.KindInvalid:
		return http.StatusBadRequest
	case bot.KindUnauthenticated:
		return http.StatusUnauthorized
	case bot.KindDenied:
		return http.StatusForbidden
	case bot.KindNotFound:
		return http.StatusNotFound
	case bot.KindConflict:
		return http.StatusConflict
	case bot.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case bot.KindUnprocessable:
		return http.StatusUnprocessableEntity
	case bot.KindRateLimited:
		return http.StatusTooManyRequests
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kv.ErrUnavailable) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// unavailableRetry is the Retry-After of a 503 for a store that cannot be
// reached: a database restart or failover takes seconds.
const unavailableRetry = "2"

// WriteError is the one error translator of the HTTP edge. Known kinds get
// their status and message; anything else is a 500 with a reference id, and
// the detail goes to the log only.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status := StatusOf(err)
	body := map[string]any{}
	var e *bot.Error
	if errors.As(err, &e) {
		body["error"] = e.Error()
		body["text"] = e.Msg
		if e.Field != "" {
			body["field"] = e.Field
		}
		if e.Data != nil {
			body["data"] = e.Data
		}
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
	} else {
		ref := RequestID(r.Context())
		msg := "Countersign couldn't complete that (ref " + ref + "). Retry if it was a transient blip; otherwise the full detail is in the server logs under that reference."
		if status == http.StatusServiceUnavailable {
			msg = "the request was cancelled or the server is shutting down; retry (ref " + ref + ")"
		}
		if errors.Is(err, kv.ErrUnavailable) {
			// Nothing was done (or acknowledged): fail closed, say when to
			// come back.
			msg = "the store is unavailable, so nothing was done and no verdict can be given; retry in a few seconds (ref " + ref + ")"
			w.Header().Set("Retry-After", unavailableRetry)
		}
		body["error"], body["text"] = msg, msg
		log.Error("request failed", "request_id", ref, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusUnauthorized {
		// An OAuth refusal says where the metadata is and what was wrong
		// with the token (RFC 6750 §3, RFC 9728 §5.1).
		var ch interface{ Challenge() string }
		if errors.As(err, &ch) {
			w.Header().Set("WWW-Authenticate", ch.Challenge())
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="countersign"`)
		}
	}
	writeJSON(w, status, body)
}

// writeJSON answers v as JSON with status. The body is encoded whole before
// anything is sent, so that it goes out with its Content-Length rather than
// chunked.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putAnswerBuf(buf)
	var err error
	if r, ok := v.(bot.Result); ok {
		// The hot tools' answers write their own JSON: the same bytes,
		// without reflection (bot.JSONAppender).
		if b, done, aerr := bot.AppendResultJSON(buf.AvailableBuffer(), r); done {
			if err = aerr; err == nil {
				buf.Write(append(b, '\n'))
			}
			v = nil
		}
	}
	if v != nil {
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if err == nil {
		h.Set("Content-Length", strconv.Itoa(buf.Len()))
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// answerBufs holds the buffers answers are encoded into, so that a call
// does not grow a fresh one (a gate answer with its facts is a few KiB).
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer is the largest buffer returned to the pool: a rare large
// answer does not stay pinned in memory.
const maxPooledAnswer = 64 << 10

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() > maxPooledAnswer {
		return
	}
	b.Reset()
	answerBufs.Put(b)
}

func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(bot.WithRequestID(r.Context(), id)))
	})
}

// withObserve reports every finished request to fn.
func withObserve(fn func(pattern string, status int, d time.Duration), next http.Handler) http.Handler {
	if fn == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := httpstatus.Wrap(w)
		next.ServeHTTP(sw, r)
		fn(r.Pattern, sw.Status(), time.Since(start))
	})
}

// withRecover turns a panic in a handler into a logged 500 instead of a
// dropped connection. It is a last line: no input is meant to reach it.
func withRecover(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic in handler", "request_id", RequestID(r.Context()), "path", r.URL.Path, "panic", v)
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error (ref " + RequestID(r.Context()) + ")"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}
