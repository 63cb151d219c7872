package bot

import (
	"context"
	"errors"

	"github.com/countersign/countersign/kv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The core's spans (Options.Tracing): one per tool call (Call), one per
// chat decision (bot/chat's Decide, through StartSpan) and one per outbox
// delivery (Drain). With tracing off (no Options.Tracing) none is made, and
// what is left on the path of a call is a nil check.
//
// A span carries ids and names only: the tool's name, the surface, the
// request id, the item id, the outcome word. Never an argument, a result, a
// fact's value, an item's text, a principal's name or an error's message
// (which may quote any of them): an error is recorded as its kind.

// Attribute keys of the core's spans. The HTTP edge adds AttrRequestID to
// its server span too.
const (
	// AttrRequestID is the request id (the HTTP X-Request-ID) the work was
	// done for.
	AttrRequestID attribute.Key = "countersign.request_id"
	// AttrItemID is the id of the item (#12) decided, created or delivered.
	AttrItemID attribute.Key = "countersign.item_id"
	// AttrSurface is where a call or a decision came from (http, mcp, cli,
	// slack, discord, web, system).
	AttrSurface attribute.Key = "countersign.surface"
	// AttrOutcome is how the work ended: a call's "ok" or error kind
	// (KindName), a decision's status, a delivery's result.
	AttrOutcome attribute.Key = "countersign.outcome"
	// attrTool is the tool's name (the semantic conventions' key for the
	// tool an execute_tool span runs).
	attrTool attribute.Key = "gen_ai.tool.name"
	// attrSink is the outbox sink an event is delivered to (slack,
	// discord, callbacks).
	attrSink attribute.Key = "countersign.sink"
	// attrEvent is the type of the outbox event delivered (created,
	// decided, ...).
	attrEvent attribute.Key = "countersign.event"
	// attrAttempt counts the delivery attempts of an event, this one
	// included.
	attrAttempt attribute.Key = "countersign.attempt"
	// AttrErrorType is the semantic conventions' error.type: the kind of
	// a failure, never its message.
	AttrErrorType attribute.Key = "error.type"
)

// tracerName names the core's tracer (its instrumentation scope).
const tracerName = "github.com/countersign/countersign/bot"

// Span is a span of the core, or nothing (its zero value, when tracing is
// off): every method is then a no-op.
type Span struct{ s trace.Span }

// SetAttributes adds attributes to the span.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// Fail marks the span failed with kind, a word naming the kind of failure
// (an error kind, a status): never an error's message.
func (s Span) Fail(kind string) {
	if s.s != nil {
		s.s.SetAttributes(AttrErrorType.String(kind))
		s.s.SetStatus(codes.Error, kind)
	}
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// StartSpan starts a span of the core named name, a child of the span in
// ctx (if any), carrying the request id of ctx (if any) and attrs. With
// tracing off it returns ctx and the zero Span. The caller ends the span.
func (b *Bot) StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, Span) {
	if b.tracer == nil {
		return ctx, Span{}
	}
	ctx, s := b.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	if id := RequestID(ctx); id != "" {
		s.SetAttributes(AttrRequestID.String(id))
	}
	return ctx, Span{s}
}

// Tracing reports whether the bot makes spans (Options.Tracing).
func (b *Bot) Tracing() bool { return b.tracer != nil }

// Continued returns ctx carrying the request id and the trace span of
// from: for work that goes on after its request was answered (a Slack
// click decided on a worker after its acknowledgement), so that its log
// lines name the request and its spans are children of the request's.
// ctx keeps its own deadline and cancellation.
func Continued(ctx, from context.Context) context.Context {
	if id := RequestID(from); id != "" {
		ctx = WithRequestID(ctx, id)
	}
	if sc := trace.SpanContextFromContext(from); sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	return ctx
}

// startCall starts the span of a tool call (name is a registered tool's).
func (b *Bot) startCall(ctx context.Context, caller *Caller, name string) (context.Context, Span) {
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, attrTool.String(name))
	if caller != nil && caller.Surface != "" {
		attrs = append(attrs, AttrSurface.String(caller.Surface))
	} else if s, _ := ctx.Value(surfaceKey{}).(string); s != "" {
		attrs = append(attrs, AttrSurface.String(s))
	}
	if id := RequestID(ctx); id != "" {
		attrs = append(attrs, AttrRequestID.String(id))
	}
	ctx, s := b.tracer.Start(ctx, "execute_tool "+name, trace.WithAttributes(attrs...))
	return ctx, Span{s}
}

// endCall records how call c ended (nil when it ended before it began: an
// unknown tool, no caller) and ends its span.
func endCall(s Span, c *Call, err error) {
	if s.s == nil {
		return
	}
	if c != nil && c.item != 0 {
		s.s.SetAttributes(AttrItemID.Int64(int64(c.item)))
	}
	if err != nil {
		kind := KindName(KindOf(err))
		s.s.SetAttributes(AttrOutcome.String(kind), AttrErrorType.String(kind))
		if kind == "internal" {
			s.s.SetStatus(codes.Error, kind)
		}
	} else {
		s.s.SetAttributes(AttrOutcome.String("ok"))
	}
	s.s.End()
}

// traceparent is the W3C traceparent of the span in ctx, or "" when ctx
// has none: what an outbox event keeps of the request that queued it.
func traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// linkTo is the span link to the span named by a traceparent, if it names
// one.
func linkTo(tp string) (trace.Link, bool) {
	if tp == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	return trace.Link{SpanContext: sc}, sc.IsValid()
}

// deliver hands ev to d inside the span of its delivery: a trace of its
// own (the request that queued the event has answered long ago), linked to
// the span of the call that queued it when the event names one. The span
// records what the failure was, by kind: what Drain makes of it.
func (o *Outbox) deliver(ctx context.Context, ev Event, d Deliverer) error {
	if o.b.tracer == nil {
		return d(ctx, ev)
	}
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrSink.String(ev.Sink), attrEvent.String(ev.Type), AttrItemID.Int64(int64(ev.ItemID)), attrAttempt.Int(ev.Attempts+1)),
	}
	if l, ok := linkTo(ev.Trace); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	ctx, s := o.b.tracer.Start(ctx, "outbox.deliver "+ev.Sink, opts...)
	defer s.End()
	err := d(ctx, ev)
	var (
		perm *PermanentError
		ra   *RetryAfterError
		unav *UnavailableError
	)
	outcome := "delivered"
	switch {
	case err == nil:
	case errors.As(err, &perm):
		outcome = "permanent"
	case errors.As(err, &ra):
		outcome = "retry_after"
	case errors.As(err, &unav), errors.Is(err, kv.ErrUnavailable):
		outcome = "unavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = "canceled"
	default:
		outcome = "fault"
	}
	s.SetAttributes(AttrOutcome.String(outcome))
	if err != nil {
		s.SetAttributes(AttrErrorType.String(outcome))
		s.SetStatus(codes.Error, outcome)
	}
	return err
}
