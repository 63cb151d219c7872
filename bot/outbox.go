package bot

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/countersign/countersign/kv"
)

// Outbox is the queue of notifications a committed change causes: one
// event per sink (a chat platform, the callbacks), written in the same
// transaction as the change (Tx.Emit, Tx.EmitTo), drained by each sink's
// worker (Run, worker.go) and removed once delivered. A crash loses none:
// an event not marked Delivered is delivered again (at least once).
type Outbox struct {
	b       *Bot
	tracked []string // sinks fed only through EmitTo, reported in Stats

	wakeMu sync.Mutex
	wake   chan struct{} // closed (and replaced) after a commit that queued events
}

// Outbox returns the bot's outbox.
func (b *Bot) Outbox() *Outbox { return b.outbox }

// Wake tells every worker that new events are queued: the channel
// returned by woken is closed and a fresh one takes its place. A commit
// through the bot wakes them itself; Wake is for events another replica
// committed.
func (o *Outbox) Wake() {
	o.wakeMu.Lock()
	close(o.wake)
	o.wake = make(chan struct{})
	o.wakeMu.Unlock()
}

// woken returns a channel that is closed at the next Wake.
func (o *Outbox) woken() <-chan struct{} {
	o.wakeMu.Lock()
	defer o.wakeMu.Unlock()
	return o.wake
}

// sinks returns the outbox consumers: those Emit feeds (Options.Sinks), and
// those added with TrackSink.
func (o *Outbox) sinks() []string { return append(append([]string(nil), o.b.sinks...), o.tracked...) }

// TrackSink names a sink fed only through EmitTo (for example callbacks), so
// that its depth is reported by Stats even while it is empty. Call it
// while wiring, before the bot serves.
func (o *Outbox) TrackSink(name string) { o.tracked = append(o.tracked, name) }

// Due returns up to limit queued events of sink whose next attempt is due
// at now, oldest first.
func (o *Outbox) Due(ctx context.Context, sink string, now time.Time, limit int) ([]Event, error) {
	var out []Event
	prefix := append([]byte(sink), 0)
	err := o.b.store.View(ctx, func(tx kv.Tx) error {
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
	err := o.b.store.View(ctx, func(tx kv.Tx) error {
		return kv.Prefix(tx, bucketOutbox, append([]byte(sink), 0), func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

// Delivered removes a delivered event from the outbox.
func (o *Outbox) Delivered(ctx context.Context, ev Event) error {
	return o.b.store.Update(ctx, func(tx kv.Tx) error {
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
	return o.b.store.Update(ctx, func(tx kv.Tx) error {
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
