package chat

import (
	"context"

	"github.com/countersign/countersign/bot"
	"go.opentelemetry.io/otel/attribute"
)

// attrVerb is the decision's verb on its span (approve, reject, answer).
const attrVerb attribute.Key = "countersign.verb"

// startDecision starts the span of a decision (bot.StartSpan: nothing
// when tracing is off). It names the surface, the item and the verb: never
// the person, the reason or the item's text.
func startDecision(ctx context.Context, b *bot.Bot, d Decision) (context.Context, bot.Span) {
	if !b.Tracing() {
		return ctx, bot.Span{}
	}
	return b.StartSpan(ctx, "chat.decide",
		bot.AttrSurface.String(d.Surface), bot.AttrItemID.Int64(int64(d.ItemID)), attrVerb.String(string(d.Verb)))
}

// endDecision records the decision's status and ends its span; Failed
// marks it failed.
func endDecision(s bot.Span, out Outcome) {
	w := statusWord(out.Status)
	s.SetAttributes(bot.AttrOutcome.String(w))
	if out.Status == Failed {
		s.Fail(w)
	}
	s.End()
}

// statusWord names a status on a span.
func statusWord(s Status) string {
	switch s {
	case Decided:
		return "decided"
	case Counted:
		return "counted"
	case Ready:
		return "ready"
	case Duplicate:
		return "duplicate"
	case Refused:
		return "refused"
	case Closed:
		return "closed"
	case NotFound:
		return "not_found"
	case Invalid:
		return "invalid"
	case Failed:
		return "failed"
	}
	return "unknown"
}
