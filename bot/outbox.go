package bot

import (
	"context"
	"encoding/json"
	"time"

	"github.com/countersign/countersign/kv"
)

// Outbox is the queue of notifications a committed change causes: one
// event per sink (a chat platform, the callbacks), written in the same
// transaction as the change (Tx.Emit, Tx.EmitTo), drained by each sink's worker
// (Bot.RunSink) and removed once delivered. A crash loses none: an event
// not marked Delivered is delivered again (at least once).
type Outbox struct {
	store kv.Store
}

// Outbox returns the bot's outbox.
func (b *Bot) Outbox() *Outbox { return &Outbox{store: b.store} }

// Due returns up to limit queued events of sink whose next attempt is due
// at now, oldest first.
func (o *Outbox) Due(ctx context.Context, sink string, now time.Time, limit int) ([]Event, error) {
	var out []Event
	prefix := append([]byte(sink), 0)
	err := o.store.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, bucketOutbox, prefix, func(_, v []byte) error {
			var ev Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return err
			}
			if ev.NextAttempt.After(now) {
				return nil
			}
			out = append(out, ev)
			if len(out) >= limit {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}

// Depth counts the events queued for sink.
func (o *Outbox) Depth(ctx context.Context, sink string) (int, error) {
	n := 0
	err := o.store.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, bucketOutbox, append([]byte(sink), 0), func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

// Delivered removes a delivered event from the outbox.
func (o *Outbox) Delivered(ctx context.Context, ev Event) error {
	return o.store.Update(ctx, func(tx kv.Tx) error {
		return tx.Delete(bucketOutbox, outboxKey(ev.Sink, ev.Seq))
	})
}

// Retry records a failed delivery attempt and when to try again.
func (o *Outbox) Retry(ctx context.Context, ev Event, next time.Time, cause error) error {
	ev.Attempts++
	ev.NextAttempt = next
	if cause != nil {
		ev.LastError = cause.Error()
	}
	return o.store.Update(ctx, func(tx kv.Tx) error {
		if cur, err := tx.Get(bucketOutbox, outboxKey(ev.Sink, ev.Seq)); err != nil || cur == nil {
			return err // delivered or dropped meanwhile
		}
		v, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return tx.Put(bucketOutbox, outboxKey(ev.Sink, ev.Seq), v)
	})
}
