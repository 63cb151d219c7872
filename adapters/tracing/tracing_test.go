package tracing

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/internal/otlptest"
	"github.com/countersign/countersign/kv"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestFromEnv: tracing is off unless the environment names an endpoint
// (or asks for otlp), off when disabled, and every value it cannot honour
// stops start-up with the variable named and what to set instead.
func TestFromEnv(t *testing.T) {
	on := map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range on {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr []string // substrings of the error; nil: no error
	}{
		{"nothing set", map[string]string{}, false, nil},
		{"service name alone", map[string]string{EnvServiceName: "x"}, false, nil},
		{"endpoint", on, true, nil},
		{"traces endpoint", map[string]string{EnvTracesEndpoint: "https://collector.example:4318/v1/traces"}, true, nil},
		{"otlp asked, default endpoint", map[string]string{EnvExporter: "otlp"}, true, nil},
		{"disabled", with(map[string]string{EnvDisabled: "TRUE"}), false, nil},
		{"disabled false", with(map[string]string{EnvDisabled: "false"}), true, nil},
		{"exporter none", with(map[string]string{EnvExporter: "none"}), false, nil},
		{"exporter zipkin", with(map[string]string{EnvExporter: "zipkin"}), false, []string{EnvExporter + "=zipkin", "otlp or none"}},
		{"endpoint without scheme", map[string]string{EnvEndpoint: "localhost:4318"}, false, []string{EnvEndpoint, "not an http(s) URL", "http://localhost:4318"}},
		{"traces endpoint ftp", map[string]string{EnvTracesEndpoint: "ftp://x/v1/traces"}, false, []string{EnvTracesEndpoint, "not an http(s) URL"}},
		{"grpc", with(map[string]string{EnvProtocol: "grpc"}), false, []string{EnvProtocol + "=grpc", "http/protobuf"}},
		{"traces protocol wins", with(map[string]string{EnvTracesProtocol: "http/protobuf", EnvProtocol: "grpc"}), true, nil},
		{"json", with(map[string]string{EnvTracesProtocol: "http/json"}), false, []string{EnvTracesProtocol + "=http/json"}},
		{"sampler ratio", with(map[string]string{EnvSampler: "parentbased_traceidratio", EnvSamplerArg: "0.25"}), true, nil},
		{"sampler off", with(map[string]string{EnvSampler: "always_off"}), true, nil},
		{"sampler unknown", with(map[string]string{EnvSampler: "jaeger_remote"}), false, []string{EnvSampler + "=jaeger_remote", "parentbased_always_on"}},
		{"ratio out of range", with(map[string]string{EnvSampler: "traceidratio", EnvSamplerArg: "2"}), false, []string{EnvSamplerArg + "=2", "from 0 to 1"}},
		{"ratio not a number", with(map[string]string{EnvSampler: "traceidratio", EnvSamplerArg: "half"}), false, []string{EnvSamplerArg + "=half"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := FromEnv(context.Background(), envOf(c.env), Options{})
			if tr != nil {
				defer tr.Shutdown(context.Background())
			}
			if c.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one saying %q", c.wantErr)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v, want none", err)
			}
			if (tr != nil) != c.on {
				t.Fatalf("tracing on = %v, want %v", tr != nil, c.on)
			}
			if !c.on && tr.Provider() != nil {
				t.Fatal("tracing off, but Provider() is not nil")
			}
		})
	}
}

// TestOffHandsBackWhatItWasGiven: a nil *Tracing decorates nothing.
func TestOffHandsBackWhatItWasGiven(t *testing.T) {
	var tr *Tracing
	var h http.Handler = &plainHandler{}
	if got := tr.Handler(h); got != h {
		t.Errorf("Handler with tracing off = %T, want the handler itself", got)
	}
	db := openStore(t)
	if got := tr.Store(db, "bbolt"); got != kv.Store(db) {
		t.Errorf("Store with tracing off = %T, want the store itself", got)
	}
	if got := tr.Transport("slack", nil); got != http.DefaultTransport {
		t.Errorf("Transport with tracing off = %T, want http.DefaultTransport", got)
	}
	if tr.Client("slack", 0) != nil {
		t.Error("Client with tracing off is not nil (the adapter's default must stay)")
	}
	base := slog.NewTextHandler(io.Discard, nil)
	if got := tr.LogHandler(base); got != slog.Handler(base) {
		t.Errorf("LogHandler with tracing off = %T, want the handler itself", got)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// plainHandler is a comparable http.Handler.
type plainHandler struct{}

func (*plainHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

func openStore(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// memTracing is tracing on with an in-memory exporter.
func memTracing(t *testing.T) (*Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := FromEnv(context.Background(), envOf(nil), Options{Exporter: exp})
	if err != nil || tr == nil {
		t.Fatalf("FromEnv with an exporter: %v %v, want tracing on", tr, err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, exp
}

func flushed(t *testing.T, tr *Tracing, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans()
}

func attrOf(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestServerSpan: a request's span is named for its method and route, a
// child of the caller's traceparent, with the status and the request id,
// and nothing of the path's values or the query; probes are not traced;
// a 5xx marks it failed.
func TestServerSpan(t *testing.T) {
	tr, exp := memTracing(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Error("the handler's context holds no span")
		}
		if r.PathValue("name") == "boom" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("{}"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	h := tr.Handler(mux)
	serve := func(method, target string, hdr map[string]string) {
		req := httptest.NewRequest(method, target, strings.NewReader("{}"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req = req.WithContext(bot.WithRequestID(req.Context(), "rid-1"))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	serve("POST", "/v1/tools/remember?token=query-secret", map[string]string{"Traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"})
	serve("POST", "/v1/tools/boom", nil)
	serve("GET", "/healthz", nil)
	spans := flushed(t, tr, exp)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2 (the probe untraced): %v", len(spans), spans)
	}
	ok, boom := spans[0], spans[1]
	if ok.Name != "POST /v1/tools/{name}" || attrOf(ok, "http.route") != "/v1/tools/{name}" || attrOf(ok, "http.response.status_code") != "200" ||
		attrOf(ok, "countersign.request_id") != "rid-1" || ok.SpanKind != trace.SpanKindServer {
		t.Errorf("span %q kind %v attrs %v, want POST /v1/tools/{name}, server, route, 200, request id", ok.Name, ok.SpanKind, ok.Attributes)
	}
	if ok.Parent.TraceID().String() != parentTrace || ok.Parent.SpanID().String() != parentSpan {
		t.Errorf("parent %s/%s, want the traceparent's %s/%s", ok.Parent.TraceID(), ok.Parent.SpanID(), parentTrace, parentSpan)
	}
	for _, kv := range ok.Attributes {
		if v := kv.Value.String(); strings.Contains(v, "remember") || strings.Contains(v, "query-secret") {
			t.Errorf("attribute %s = %q holds the path's value or the query", kv.Key, v)
		}
	}
	if boom.Status.Code.String() != "Error" || attrOf(boom, "error.type") != "500" {
		t.Errorf("a 500's span: status %v, error.type %q; want Error and 500", boom.Status, attrOf(boom, "error.type"))
	}
}

// TestPathTemplate: a client span's template keeps the platforms' fixed
// words and turns every id or token into {id}.
func TestPathTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"/api/chat.update":                                "/api/chat.update",
		"/api/chat.postMessage":                           "/api/chat.postMessage",
		"/api/v10/channels/1234567890/messages/987654321": "/api/v10/channels/{id}/messages/{id}",
		"/api/v10/interactions/1234/aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDpYWVo/callback":        "/api/v10/interactions/{id}/{id}/callback",
		"/api/v10/webhooks/1234/abcdefghijklmnopqrstuvwxyzABCDEFGHIJ/messages/@original": "/api/v10/webhooks/{id}/{id}/messages/@original",
		"":           "/",
		"/users/@me": "/users/@me",
		"/x/v1a":     "/x/{id}",
	} {
		if got := pathTemplate(in); got != want {
			t.Errorf("pathTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClientSpan: a platform API call is a client span, a child of the
// caller's span, named for its method and template, with the status; the
// token in the path and the query never reach it, and no trace context is
// sent to the platform.
func TestClientSpan(t *testing.T) {
	tr, exp := memTracing(t)
	var sent http.Header
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = r.Header.Clone()
		if strings.Contains(r.URL.Path, "gone") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer api.Close()
	c := tr.Client("discord", 0)
	ctx, parent := tr.tracer.Start(context.Background(), "outbox.deliver discord")
	for _, p := range []string{"/api/v10/webhooks/1234/tokenSECRETtokenSECRETtokenSECRETtoken/messages/@original?wait=query-secret", "/api/gone"} {
		req, _ := http.NewRequestWithContext(ctx, "PATCH", api.URL+p, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	parent.End()
	if sent.Get("Traceparent") != "" {
		t.Errorf("the platform was sent a traceparent %q, want none", sent.Get("Traceparent"))
	}
	spans := flushed(t, tr, exp)
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	call, gone := spans[0], spans[1]
	if call.Name != "PATCH /api/v10/webhooks/{id}/{id}/messages/@original" || call.SpanKind != trace.SpanKindClient ||
		call.Parent.SpanID() != parent.SpanContext().SpanID() || attrOf(call, "http.response.status_code") != "200" ||
		attrOf(call, "server.address") != "127.0.0.1" || attrOf(call, "countersign.platform") != "discord" {
		t.Errorf("client span %q kind %v parent %s attrs %v; want %q, client, the operation's child (%s), status 200, server 127.0.0.1, platform discord", call.Name, call.SpanKind, call.Parent.SpanID(), call.Attributes, "PATCH /api/v10/webhooks/{id}/{id}/messages/@original", parent.SpanContext().SpanID())
	}
	if gone.Status.Code.String() != "Error" || attrOf(gone, "error.type") != "404" {
		t.Errorf("a 404's span: status %v, error.type %q; want Error and 404", gone.Status, attrOf(gone, "error.type"))
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "SECRET") || strings.Contains(v, "query-secret") {
				t.Errorf("span %q attribute %s = %q holds the token or the query", s.Name, kv.Key, v)
			}
		}
		if strings.Contains(s.Name, "SECRET") {
			t.Errorf("span name %q holds the token", s.Name)
		}
	}
}

// TestStoreSpans: inside a traced operation each transaction is a span
// (with how often an update's function ran); outside any, none is made.
func TestStoreSpans(t *testing.T) {
	tr, exp := memTracing(t)
	s := tr.Store(openStore(t), "bbolt")
	put := func(tx kv.Tx) error { return tx.Put("b", []byte("k"), []byte("fact value secret")) }
	if err := s.Update(context.Background(), put); err != nil {
		t.Fatal(err)
	}
	ctx, parent := tr.tracer.Start(context.Background(), "execute_tool remember")
	if err := s.Update(ctx, put); err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx kv.Tx) error { _, err := tx.Get("b", []byte("k")); return err }); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans := flushed(t, tr, exp)
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name)
		if sp.Name != "execute_tool remember" && sp.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q is not a child of the operation", sp.Name)
		}
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.String(), "secret") {
				t.Errorf("span %q holds the value: %s=%s", sp.Name, kv.Key, kv.Value.String())
			}
		}
	}
	if strings.Join(names, ",") != "store.update,store.view,execute_tool remember" {
		t.Fatalf("spans %v, want store.update, store.view, then the operation (none for the untraced update)", names)
	}
	if attrOf(spans[0], "countersign.store.runs") != "1" || attrOf(spans[0], "db.system.name") != "bbolt" {
		t.Errorf("update span attrs %v, want countersign.store.runs 1, db.system.name bbolt", spans[0].Attributes)
	}
}

// TestLogHandlerNamesTheSpan: a line logged with a span in its context
// carries trace_id and span_id; one without carries neither.
func TestLogHandlerNamesTheSpan(t *testing.T) {
	tr, _ := memTracing(t)
	var buf bytes.Buffer
	log := slog.New(tr.LogHandler(slog.NewTextHandler(&buf, nil))).With("surface", "slack")
	ctx, span := tr.tracer.Start(context.Background(), "x")
	log.InfoContext(ctx, "with span")
	log.Info("without span")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := "trace_id=" + span.SpanContext().TraceID().String() + " span_id=" + span.SpanContext().SpanID().String()
	if len(lines) != 2 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "surface=slack") || strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log lines:\n%s\nwant the first with %q, the second without", buf.String(), want)
	}
}

// TestExportsOverOTLPHTTP: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans
// reach an OTLP/HTTP receiver as protobuf on Shutdown (the flush of a
// stopping process), under the service OTEL_SERVICE_NAME names.
func TestExportsOverOTLPHTTP(t *testing.T) {
	rcv := otlptest.Start(t)
	tr, err := FromEnv(context.Background(), envOf(map[string]string{EnvEndpoint: rcv.URL() + "/", EnvServiceName: "countersign-test"}), Options{Version: "9.9.9"})
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v %v, want tracing on", tr, err)
	}
	ctx, parent := tr.tracer.Start(context.Background(), "outer")
	_, child := tr.tracer.Start(ctx, "inner")
	child.End()
	parent.End()
	if got := rcv.Spans(); len(got) != 0 {
		t.Fatalf("%d spans before the flush, want 0 (batched)", len(got))
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := rcv.Spans()
	if p := rcv.Problems(); len(p) > 0 {
		t.Fatalf("the receiver refused: %v", p)
	}
	if len(got) != 2 || got[0].Name != "inner" || got[1].Name != "outer" || got[0].ParentID != got[1].SpanID || got[0].TraceID != got[1].TraceID {
		t.Fatalf("received %+v, want inner as outer's child", got)
	}
	if r := got[1].Resource; r["service.name"] != "countersign-test" || r["service.version"] != "9.9.9" || got[1].Scope != scope {
		t.Errorf("resource %v scope %q, want service countersign-test 9.9.9, scope %q", r, got[1].Scope, scope)
	}
}
