package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/countersign/countersign/kv"
)

// CallEvent describes one finished tool call, for metrics and logs. It never
// carries the call's arguments or result: those may hold secrets or personal
// data.
type CallEvent struct {
	// Tool is the tool's name; empty when the name was not a registered tool
	// (so that arbitrary names never become metric labels).
	Tool       string
	Capability string
	Caller     *Caller // nil when the call was not authenticated
	Duration   time.Duration
	Err        error // nil on success; KindOf(Err) classifies it
	// surface is the surface named by WithSurface in the call's context.
	surface string
	// Decided is true when the call took a new decision on a pending item
	// (it closed the item). A retry answered with the recorded outcome, a
	// quorum vote short of the quorum and a refusal are not decisions.
	Decided bool
	// Waited, on a decision, is how long the decided item waited: from
	// its card's appearing (the item made) to the decision; Kind is its
	// kind. Zero when the call decided nothing.
	Waited time.Duration
	Kind   ItemKind
}

// Outcome names how the call ended: "ok", or the error kind ("invalid",
// "unauthenticated", "denied", "not_found", "conflict", "too_large",
// "unprocessable", "rate_limited", "internal").
func (e CallEvent) Outcome() string {
	if e.Err == nil {
		return "ok"
	}
	return KindName(KindOf(e.Err))
}

// Surface is where the call came from (http, mcp, cli, slack, discord,
// system): the caller's surface, else (an unauthenticated call) the one the
// serving edge put in the call's context with WithSurface, else "none".
func (e CallEvent) Surface() string {
	if e.Caller != nil && e.Caller.Surface != "" {
		return e.Caller.Surface
	}
	if e.surface != "" {
		return e.surface
	}
	return "none"
}

type surfaceKey struct{}

// WithSurface returns ctx naming the surface a call arrives on, so that a
// call refused before anyone is authenticated is still logged and counted
// under its surface rather than "none".
func WithSurface(ctx context.Context, surface string) context.Context {
	return context.WithValue(ctx, surfaceKey{}, surface)
}

// KindName names an error kind as metrics, logs and MCP error results show
// it: "invalid", "unauthenticated", "denied", "not_found", "conflict",
// "too_large", "unprocessable", "rate_limited" or "internal".
func KindName(k Kind) string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindUnauthenticated:
		return "unauthenticated"
	case KindDenied:
		return "denied"
	case KindNotFound:
		return "not_found"
	case KindConflict:
		return "conflict"
	case KindTooLarge:
		return "too_large"
	case KindUnprocessable:
		return "unprocessable"
	case KindRateLimited:
		return "rate_limited"
	}
	return "internal"
}

// Observer is told about every tool call once it has finished, on every
// surface. It must be fast and must not block: it runs on the caller's
// goroutine.
type Observer func(ctx context.Context, ev CallEvent)

// SetObserver installs the observer of tool calls. Call it before serving.
func (b *Bot) SetObserver(o Observer) { b.observer = o }

// observe reports a finished call to the observer, if any.
func (b *Bot) observe(ctx context.Context, caller *Caller, name string, start time.Time, c *Call, err error) {
	if b.observer == nil {
		return
	}
	ev := CallEvent{Caller: caller, Duration: time.Since(start), Err: err, Decided: c != nil && c.decided}
	ev.surface, _ = ctx.Value(surfaceKey{}).(string)
	if t, ok := b.tools[name]; ok {
		ev.Tool, ev.Capability = t.Name, string(t.Capability)
	}
	if ev.Decided && c.decidedItem != 0 && err == nil {
		// One read per decision (decisions are rare next to calls).
		_ = b.store.View(context.WithoutCancel(ctx), func(tx kv.Tx) error {
			rec, err := LoadItemRecord(tx, c.decidedItem)
			if err == nil && rec != nil {
				ev.Waited, ev.Kind = max(c.Now.Sub(rec.CreatedAt), 0), rec.Kind
			}
			return err
		})
	}
	b.observer(ctx, ev)
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request being served (the
// HTTP X-Request-ID), so that logs of every layer can name it.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Secret is a string that must never reach a log: an API key, a token. It
// logs and prints as "[redacted]"; Reveal returns the value. JSON encodes
// the value (a key shown once in an answer is meant to be read).
type Secret string

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// String implements fmt.Stringer, so %v and %s never print the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString implements fmt.GoStringer, for %#v.
func (s Secret) GoString() string { return s.String() }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// PendingByKind counts the items that still await a decision, by kind. It
// walks the open items (those not yet decided) in one read transaction;
// callers that poll it (a metrics scrape) should share the answer.
func (x Items) PendingByKind(ctx context.Context) (map[ItemKind]int, error) {
	b := x.b
	out := map[ItemKind]int{}
	for k := range b.kinds {
		out[k] = 0
	}
	err := b.store.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend(bucketOpen, nil, nil, func(k, _ []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			it, err := b.itemView(tx, kv.ParseU64(k))
			if err != nil {
				return nil // an item this build cannot render is not counted
			}
			if it.Pending() {
				out[it.Kind]++
			}
			return nil
		})
	})
	return out, err
}

// OutboxStat describes one sink's outbox.
type OutboxStat struct {
	Depth    int // events queued
	Retrying int // queued events whose last delivery attempt failed
	Failures int // failed attempts of the queued events, summed
	// GivenUp counts the events of the sink the outbox ever gave up on
	// (Outbox.GivenUp lists the newest).
	GivenUp uint64
}

// Stats reads every sink's outbox in one read transaction.
func (o *Outbox) Stats(ctx context.Context) (map[string]OutboxStat, error) {
	out := map[string]OutboxStat{}
	for _, sink := range o.sinks() {
		out[sink] = OutboxStat{}
	}
	err := o.b.store.View(ctx, func(tx kv.Tx) error {
		// One pass over the whole outbox: every sink that has events shows,
		// including those fed only by EmitTo (callbacks).
		err := tx.Ascend(bucketOutbox, nil, nil, func(k, v []byte) error {
			sink, _, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return nil
			}
			st := out[string(sink)]
			st.Depth++
			var ev Event
			if json.Unmarshal(v, &ev) == nil && ev.Attempts > 0 {
				st.Retrying++
				st.Failures += ev.Attempts
			}
			out[string(sink)] = st
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Ascend(bucketGivenUpCount, nil, nil, func(k, v []byte) error {
			st := out[string(k)]
			st.GivenUp = kv.ParseU64(v)
			out[string(k)] = st
			return nil
		})
	})
	return out, err
}
