// Package otlptest is an OTLP/HTTP trace receiver for tests: a server on
// 127.0.0.1 that decodes what an OpenTelemetry exporter posts to
// /v1/traces (protobuf, gzip-compressed or not, as the specification says)
// and keeps the spans, so that a test asserts the span tree a real process
// exported.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex and its attribute values
// rendered as text.
type Span struct {
	TraceID, SpanID, ParentID string // ParentID "" for a root span
	Name                      string
	Kind                      string // server, client, internal, producer, consumer
	Attrs                     map[string]string
	Links                     []Link
	StatusCode                string // unset, ok, error
	StatusMessage             string
	Scope                     string            // the instrumentation scope's name
	Resource                  map[string]string // the resource's attributes
	Events                    []string          // event names, then their attributes as key=value
}

// Link is a span link.
type Link struct{ TraceID, SpanID string }

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []Span
	problems []string
}

// Start starts a receiver, stopped when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the
// exporter posts to URL()+"/v1/traces").
func (r *Receiver) URL() string { return r.srv.URL }

// Spans returns the spans received so far, in the order received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Problems lists the requests the receiver refused (wrong path, method,
// content type, or a body that is not an ExportTraceServiceRequest).
func (r *Receiver) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.problems...)
}

// Texts returns every string the receiver was sent in spans: names,
// attribute keys and values, link ids, status messages, event names and
// attributes, resource attributes. A test looks for secrets in it.
func (r *Receiver) Texts() []string {
	var out []string
	for _, s := range r.Spans() {
		out = append(out, s.Name, s.StatusMessage, s.Scope)
		for _, m := range []map[string]string{s.Attrs, s.Resource} {
			for k, v := range m {
				out = append(out, k, v)
			}
		}
		out = append(out, s.Events...)
	}
	return out
}

func (r *Receiver) refuse(w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.problems = append(r.problems, msg)
	r.mu.Unlock()
	http.Error(w, msg, code)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.refuse(w, http.StatusNotFound, "%s %s: the receiver takes POST /v1/traces", req.Method, req.URL.Path)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.refuse(w, http.StatusUnsupportedMediaType, "content type %q, want application/x-protobuf", ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.refuse(w, http.StatusBadRequest, "gzip: %v", err)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		r.refuse(w, http.StatusBadRequest, "read: %v", err)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		r.refuse(w, http.StatusBadRequest, "not an ExportTraceServiceRequest: %v", err)
		return
	}
	var got []Span
	for _, rs := range export.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, convert(sp, ss.GetScope().GetName(), res))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func convert(sp *tracepb.Span, scope string, res map[string]string) Span {
	s := Span{
		TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		Name: sp.GetName(), Attrs: attrs(sp.GetAttributes()), Scope: scope, Resource: res,
		StatusMessage: sp.GetStatus().GetMessage(),
	}
	if p := sp.GetParentSpanId(); len(p) > 0 {
		s.ParentID = hex.EncodeToString(p)
	}
	s.Kind = strings.ToLower(strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_"))
	s.StatusCode = strings.ToLower(strings.TrimPrefix(sp.GetStatus().GetCode().String(), "STATUS_CODE_"))
	for _, l := range sp.GetLinks() {
		s.Links = append(s.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	for _, e := range sp.GetEvents() {
		s.Events = append(s.Events, e.GetName())
		a := attrs(e.GetAttributes())
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s.Events = append(s.Events, k+"="+a[k])
		}
	}
	return s
}

// attrs renders attribute values as text: strings as they are, numbers
// and booleans in Go's notation, arrays as [a b].
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, value(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *commonpb.AnyValue_KvlistValue:
		parts := make([]string, 0, len(x.KvlistValue.GetValues()))
		for _, e := range x.KvlistValue.GetValues() {
			parts = append(parts, e.GetKey()+"="+value(e.GetValue()))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return ""
}
