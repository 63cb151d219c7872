package tracing

import (
	"context"
	"errors"

	"github.com/countersign/countersign/kv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The store spans' attribute keys.
const (
	// attrEngine is the semantic conventions' db.system.name: bbolt or
	// postgresql.
	attrEngine attribute.Key = "db.system.name"
	// attrRuns counts the runs of an Update's function: more than one
	// when group commit or a conflict re-ran it (kv.Store's contract).
	attrRuns attribute.Key = "countersign.store.runs"
)

// Store wraps s with a span per transaction ("store.update",
// "store.view", with the engine and, for an update, how often its function
// ran) made only inside a traced operation (a span in the context): the
// outbox's polls and the sweeper's steps outside any request make none.
// Nothing of the keys or values is recorded. A nil *Tracing returns s.
func (t *Tracing) Store(s kv.Store, engine string) kv.Store {
	if t == nil {
		return s
	}
	return tracedStore{s: s, tracer: t.tracer, engine: attrEngine.String(engine)}
}

type tracedStore struct {
	s      kv.Store
	tracer trace.Tracer
	engine attribute.KeyValue
}

func (s tracedStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return s.s.Update(ctx, fn)
	}
	ctx, span := s.tracer.Start(ctx, "store.update", trace.WithAttributes(s.engine))
	defer span.End()
	runs := 0
	err := s.s.Update(ctx, func(tx kv.Tx) error { runs++; return fn(tx) })
	span.SetAttributes(attrRuns.Int(runs))
	fail(span, err)
	return err
}

func (s tracedStore) View(ctx context.Context, fn func(kv.Tx) error) error {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return s.s.View(ctx, fn)
	}
	ctx, span := s.tracer.Start(ctx, "store.view", trace.WithAttributes(s.engine))
	defer span.End()
	err := s.s.View(ctx, fn)
	fail(span, err)
	return err
}

// fail records a failed transaction by kind: the store could not be
// reached (unavailable), or the transaction's own error (error), which
// may be a refusal the domain chose (a conflict, a denial).
func fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	kind := "error"
	if errors.Is(err, kv.ErrUnavailable) {
		kind = "unavailable"
		span.SetStatus(codes.Error, kind)
	}
	span.SetAttributes(attribute.String("error.type", kind))
}
