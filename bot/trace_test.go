package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traceArgs are the arguments of the traced test tool: value stands for
// what a span must never hold (a fact's value, an argument).
type traceArgs struct {
	Value string `json:"value"`
	Fail  string `json:"fail,omitempty"`
}

// tracedEnv is deliveryEnv's bot with a span recorder as its tracer
// provider, and a tool that makes an item (or fails as asked).
func tracedEnv(t *testing.T, rec *tracetest.SpanRecorder) *deliveryEnv {
	t.Helper()
	e := newDeliveryEnv(t)
	if rec != nil {
		e.b.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(tracerName)
	}
	err := e.b.Register(Tool{Name: "make_item", Capability: policy.CapWrite, Args: traceArgs{},
		Handler: func(ctx context.Context, c *Call, a any) (Result, error) {
			args := a.(*traceArgs)
			switch args.Fail {
			case "invalid":
				return Result{}, Invalid("value", "the value %q is refused", args.Value)
			case "internal":
				return Result{}, errors.New("the disk holding " + args.Value + " failed")
			}
			var id uint64
			err := c.Update(ctx, func(tx *Tx) error {
				var err error
				e.src.status["k"] = "pending"
				id, err = tx.NewItem(KindAction, "k", Space{UserID: "u"}, "default", time.Now().Add(time.Hour))
				return err
			})
			return Result{Text: args.Value, Data: id}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var traceAgent = &Caller{Principal: Principal{ID: "prin_agent", Name: "ward_bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}

// spanNamed returns the one ended span called name.
func spanNamed(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, names)
	}
	return found[0]
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.String()
	}
	return out
}

// wantAttrs fails for every attribute of want the span lacks or holds
// with another value.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	got := attrsOf(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (attributes %v)", s.Name(), k, got[k], v, got)
		}
	}
}

// noText fails when any span's name, attribute, status or event holds
// secret.
func noText(t *testing.T, rec *tracetest.SpanRecorder, secret string) {
	t.Helper()
	for _, s := range rec.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, string(kv.Key), kv.Value.String())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, x := range texts {
			if strings.Contains(x, secret) {
				t.Errorf("span %q holds %q: %q", s.Name(), secret, x)
			}
		}
	}
}

// TestTraceToolCallAndDelivery: a tool call is a span (a child of the
// caller's) naming the tool, the surface, the request id and the item it
// made, never its arguments; the item's outbox delivery is a trace of its
// own, linked to the call that queued it, and the renderer's work is a
// child of the delivery's span.
func TestTraceToolCallAndDelivery(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	e := tracedEnv(t, rec)
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	ctx, parent := tracer.Start(WithRequestID(context.Background(), "req-e2e-1"), "POST /v1/tools/{name}")
	res, err := e.b.Call(ctx, traceAgent, "make_item", []byte(`{"value":"penicillin-secret"}`))
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	id := res.Data.(uint64)
	call := spanNamed(t, rec, "execute_tool make_item")
	if call.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the call's span's parent is %s, want the request's %s", call.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	wantAttrs(t, call, map[attribute.Key]string{
		attrTool: "make_item", AttrSurface: "http", AttrRequestID: "req-e2e-1",
		AttrItemID: "1", AttrOutcome: "ok",
	})
	if id != 1 {
		t.Fatalf("the item is #%d, want #1", id)
	}
	evs := e.queued()
	if len(evs) != 1 || !strings.HasPrefix(evs[0].Trace, "00-"+call.SpanContext().TraceID().String()+"-"+call.SpanContext().SpanID().String()+"-") {
		t.Fatalf("queued events %+v, want one whose trace names the call's span %s", evs, call.SpanContext().SpanID())
	}

	var inDelivery trace.SpanContext
	deliver := func(ctx context.Context, ev Event) error {
		_, s := tracer.Start(ctx, "renderer work")
		inDelivery = s.SpanContext()
		s.End()
		if ev.Type == EventDecided {
			return &PermanentError{Err: errors.New("channel_not_found for penicillin-secret")}
		}
		return nil
	}
	if err := e.b.Outbox().Drain(context.Background(), "chat", deliver); err != nil {
		t.Fatal(err)
	}
	d := spanNamed(t, rec, "outbox.deliver chat")
	switch {
	case d.Parent().IsValid():
		t.Errorf("the delivery's span has parent %s, want a root span (a trace of its own)", d.Parent().SpanID())
	case d.SpanContext().TraceID() == call.SpanContext().TraceID():
		t.Errorf("the delivery is in the call's trace %s, want its own", d.SpanContext().TraceID())
	case len(d.Links()) != 1 || d.Links()[0].SpanContext.SpanID() != call.SpanContext().SpanID() || d.Links()[0].SpanContext.TraceID() != call.SpanContext().TraceID():
		t.Errorf("the delivery's links %+v, want one to the call's span %s", d.Links(), call.SpanContext().SpanID())
	case d.SpanKind() != trace.SpanKindConsumer:
		t.Errorf("the delivery's span kind is %s, want consumer", d.SpanKind())
	}
	wantAttrs(t, d, map[attribute.Key]string{attrSink: "chat", attrEvent: EventCreated, AttrItemID: "1", attrAttempt: "1", AttrOutcome: "delivered"})
	work := spanNamed(t, rec, "renderer work")
	if work.Parent().SpanID() != d.SpanContext().SpanID() || inDelivery.TraceID() != d.SpanContext().TraceID() {
		t.Errorf("the renderer's span has parent %s, want the delivery's %s", work.Parent().SpanID(), d.SpanContext().SpanID())
	}

	// A delivery refused for good: the span says so by kind, and holds
	// nothing of the error's text.
	e.emit(id, EventDecided, "")
	if err := e.b.Outbox().Drain(context.Background(), "chat", deliver); err != nil {
		t.Fatal(err)
	}
	var failed sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "outbox.deliver chat" && attrsOf(s)[attrEvent] == EventDecided {
			failed = s
		}
	}
	if failed == nil {
		t.Fatal("no span of the decided event's delivery")
	}
	wantAttrs(t, failed, map[attribute.Key]string{AttrOutcome: "permanent", AttrErrorType: "permanent"})
	if failed.Status().Code != codes.Error || len(failed.Links()) != 0 {
		t.Errorf("the refused delivery: status %v, links %v; want an error, and no link (a system call queued it, outside any trace)", failed.Status(), failed.Links())
	}
	noText(t, rec, "penicillin-secret")
	noText(t, rec, "ward_bot")
}

// TestTraceFailedCalls: a refused call's span says its kind, a fault of
// Countersign's marks it failed; neither holds the error's text or the
// arguments, and an unknown tool's name never becomes a span.
func TestTraceFailedCalls(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	e := tracedEnv(t, rec)
	ctx := context.Background()
	if _, err := e.b.Call(ctx, traceAgent, "make_item", []byte(`{"value":"warfarin-secret","fail":"invalid"}`)); KindOf(err) != KindInvalid {
		t.Fatalf("invalid call: %v, want a KindInvalid error", err)
	}
	s := spanNamed(t, rec, "execute_tool make_item")
	wantAttrs(t, s, map[attribute.Key]string{AttrOutcome: "invalid", AttrErrorType: "invalid"})
	if s.Status().Code == codes.Error {
		t.Errorf("a refused call's span is marked failed (%v): a refusal is an answer, not a fault", s.Status())
	}
	rec2 := tracetest.NewSpanRecorder()
	e.b.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec2)).Tracer(tracerName)
	if _, err := e.b.Call(ctx, traceAgent, "make_item", []byte(`{"value":"warfarin-secret","fail":"internal"}`)); KindOf(err) != KindInternal {
		t.Fatalf("internal call: %v, want a KindInternal error", err)
	}
	s = spanNamed(t, rec2, "execute_tool make_item")
	wantAttrs(t, s, map[attribute.Key]string{AttrOutcome: "internal"})
	if s.Status().Code != codes.Error || s.Status().Description != "internal" {
		t.Errorf("a fault's span status is %+v, want error \"internal\"", s.Status())
	}
	if _, err := e.b.Call(ctx, traceAgent, "no_such_tool_secret", []byte(`{}`)); KindOf(err) != KindNotFound {
		t.Fatalf("unknown tool: %v, want a KindNotFound error", err)
	}
	if n := len(rec2.Ended()); n != 1 {
		t.Errorf("%d spans after an unknown tool's call, want still 1 (an arbitrary name is never a span)", n)
	}
	noText(t, rec, "warfarin-secret")
	noText(t, rec2, "warfarin-secret")
	noText(t, rec2, "no_such_tool_secret")
}

// TestTraceOffRecordsNothing: without Options.Tracing a call inside
// someone else's span makes no span and keeps no trace with its events.
func TestTraceOffRecordsNothing(t *testing.T) {
	e := tracedEnv(t, nil)
	rec := tracetest.NewSpanRecorder()
	ctx, parent := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test").Start(context.Background(), "outer")
	if _, err := e.b.Call(ctx, traceAgent, "make_item", []byte(`{"value":"x"}`)); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans, want only the test's own", n)
	}
	if evs := e.queued(); len(evs) != 1 || evs[0].Trace != "" {
		t.Errorf("queued %+v, want one event without a trace", evs)
	}
	if e.b.Tracing() {
		t.Error("Tracing() is true without Options.Tracing")
	}
	if _, s := e.b.StartSpan(ctx, "anything"); s != (Span{}) {
		t.Errorf("StartSpan made %v with tracing off, want the zero Span", s)
	}
}

// TestContinued: work continued after its request was answered carries
// the request's id and span, and keeps its own cancellation.
func TestContinued(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	from, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test").Start(WithRequestID(context.Background(), "req-7"), "request")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	got := Continued(ctx, from)
	if RequestID(got) != "req-7" || trace.SpanContextFromContext(got).SpanID() != span.SpanContext().SpanID() {
		t.Errorf("continued: request id %q, span %s; want req-7 and %s", RequestID(got), trace.SpanContextFromContext(got).SpanID(), span.SpanContext().SpanID())
	}
	if dl, ok := got.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Errorf("continued context lost its own deadline: %v %v; want one at least 59m away", dl, ok)
	}
	if plain := Continued(ctx, context.Background()); RequestID(plain) != "" || trace.SpanContextFromContext(plain).IsValid() {
		t.Error("continuing a context without a request added one")
	}
}
