package tracing

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/httpstatus"
	"github.com/countersign/countersign/bot"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The semantic conventions' HTTP attribute keys the spans use.
const (
	attrMethod     attribute.Key = "http.request.method"
	attrRoute      attribute.Key = "http.route"
	attrStatus     attribute.Key = "http.response.status_code"
	attrScheme     attribute.Key = "url.scheme"
	attrTemplate   attribute.Key = "url.template"
	attrServerAddr attribute.Key = "server.address"
	attrServerPort attribute.Key = "server.port"
	// attrPlatform names the chat platform a client span calls.
	attrPlatform attribute.Key = "countersign.platform"
)

// untraced are the paths probes and scrapers poll: a span for each would
// bury the requests that matter.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Handler wraps next (the HTTP server, inside its request id) with a
// server span per request: named for its method and route ("POST
// /slack/interactions"), a child of the caller's span when the request
// carries a W3C traceparent, with the method, the route, the status and
// the request id (bot.AttrRequestID). Never the path's values, the query,
// a header or the body. /healthz, /readyz and /metrics are not traced. A
// nil *Tracing returns next.
func (t *Tracing) Handler(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if untraced[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		method := knownMethod(r.Method)
		attrs := []attribute.KeyValue{attrMethod.String(method), attrScheme.String(scheme)}
		if id := bot.RequestID(ctx); id != "" {
			attrs = append(attrs, bot.AttrRequestID.String(id))
		}
		ctx, span := t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		sw := httpstatus.Wrap(w)
		r2 := r.WithContext(ctx)
		next.ServeHTTP(sw, r2) // the server's mux records the route in r2.Pattern
		if route := routeOf(r2.Pattern); route != "" {
			span.SetName(method + " " + route)
			span.SetAttributes(attrRoute.String(route))
		}
		code := sw.Status()
		span.SetAttributes(attrStatus.Int(code))
		if code >= 500 {
			span.SetAttributes(bot.AttrErrorType.String(strconv.Itoa(code)))
			span.SetStatus(codes.Error, strconv.Itoa(code))
		}
	})
}

// routeOf is the path of a ServeMux pattern ("POST /v1/tools/{name}" ->
// "/v1/tools/{name}").
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

// knownMethod is the request's method when it is a standard one, else
// "_OTHER" (the semantic conventions' word), so that a span name is never
// a client's arbitrary string.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// Transport wraps base (nil: http.DefaultTransport) with a client span per
// call of platform's API ("slack", "discord"): named for the method and
// the path's template ("POST /api/chat.update"), a child of the span in
// the request's context, with the method, the server's address and port,
// the template and the status. The template keeps a path segment only
// when it is a short fixed word (chat.update, channels, v10): an id or a
// token in the path (Discord's interaction and webhook tokens) becomes
// {id}. Never the query, a header or a body; no trace context is sent to
// the platform. A nil *Tracing returns base.
func (t *Tracing) Transport(platform string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if t == nil {
		return base
	}
	return transport{base: base, tracer: t.tracer, platform: platform}
}

// Client is an *http.Client with Transport's spans and the given timeout;
// nil when tracing is off (the caller keeps its own default).
func (t *Tracing) Client(platform string, timeout time.Duration) *http.Client {
	if t == nil {
		return nil
	}
	return &http.Client{Transport: t.Transport(platform, nil), Timeout: timeout}
}

type transport struct {
	base     http.RoundTripper
	tracer   trace.Tracer
	platform string
}

func (c transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := knownMethod(req.Method)
	tmpl := pathTemplate(req.URL.Path)
	attrs := []attribute.KeyValue{attrMethod.String(method), attrTemplate.String(tmpl), attrPlatform.String(c.platform)}
	if host, port, err := net.SplitHostPort(req.URL.Host); err == nil {
		attrs = append(attrs, attrServerAddr.String(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attrServerPort.Int(p))
		}
	} else if req.URL.Host != "" {
		attrs = append(attrs, attrServerAddr.String(req.URL.Host))
	}
	ctx, span := c.tracer.Start(req.Context(), method+" "+tmpl, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	resp, err := c.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		// The error's text quotes the URL, which may hold a token: only
		// its kind is recorded.
		kind := "transport"
		if ctx.Err() != nil {
			kind = "canceled"
		}
		span.SetAttributes(bot.AttrErrorType.String(kind))
		span.SetStatus(codes.Error, kind)
		return resp, err
	}
	span.SetAttributes(attrStatus.Int(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(bot.AttrErrorType.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
	}
	return resp, nil
}

// maxWord is the longest path segment a template keeps: the platforms'
// method and resource names are shorter, their tokens far longer.
const maxWord = 32

// pathTemplate is path with every segment that is not a fixed word
// replaced by {id}. A fixed word is at most maxWord letters, dots, dashes
// and underscores ("chat.postMessage", "channels", "@me"), or an API
// version ("v10"); anything with another character (an id, a token) is
// not one.
func pathTemplate(path string) string {
	if path == "" {
		return "/"
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s != "" && !fixedWord(s) {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}

func fixedWord(s string) bool {
	if len(s) > maxWord {
		return false
	}
	if len(s) >= 2 && s[0] == 'v' && strings.Trim(s[1:], "0123456789") == "" {
		return true // an API version: v10
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '.' && c != '-' && c != '_' && c != '@' {
			return false
		}
	}
	return true
}
