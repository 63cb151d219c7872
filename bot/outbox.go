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

// retry records a failed delivery attempt and when to try again.
func (o *Outbox) retry(ctx context.Context, ev Event, next time.Time, cause error) error {
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

// The records of the events the outbox gave up on.
const (
	bucketGivenUp      = "outbox_given_up"       // sink 0x00 seq -> GivenUp JSON: the newest keepGivenUp of each sink
	bucketGivenUpCount = "outbox_given_up_count" // sink -> big-endian count of the events ever given up
)

// keepGivenUp bounds the records GivenUp keeps per sink (the count in
// Stats is never cut).
const keepGivenUp = 1000

// GivenUp is the record of an event the outbox stopped trying to deliver.
type GivenUp struct {
	Event
	At     time.Time `json:"given_up_at"`
	Reason string    `json:"reason"` // the last failure
}

// giveUp takes ev off the queue, records it (GivenUp, and the count in
// Stats) and logs it as an error, all or nothing: a notification is never
// dropped without a trace. An event delivered or given up meanwhile (by
// another replica) is left alone.
func (o *Outbox) giveUp(ctx context.Context, ev Event, cause error) error {
	ev.Attempts++
	ev.LastError = cause.Error()
	rec := GivenUp{Event: ev, At: o.b.now(), Reason: cause.Error()}
	key := outboxKey(ev.Sink, ev.Seq)
	gone := false
	err := o.b.store.Update(ctx, func(tx kv.Tx) error {
		gone = false
		if cur, err := tx.Get(bucketOutbox, key); err != nil || cur == nil {
			gone = cur == nil
			return err
		}
		if err := tx.Delete(bucketOutbox, key); err != nil {
			return err
		}
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := tx.Put(bucketGivenUp, key, v); err != nil {
			return err
		}
		n := uint64(0)
		if b, err := tx.Get(bucketGivenUpCount, []byte(ev.Sink)); err != nil {
			return err
		} else if len(b) == 8 {
			n = kv.ParseU64(b)
		}
		if err := tx.Put(bucketGivenUpCount, []byte(ev.Sink), kv.U64(n+1)); err != nil {
			return err
		}
		return o.pruneGivenUp(tx, ev.Sink)
	})
	if err != nil || gone {
		return err
	}
	msg := "outbox delivery given up"
	if ev.Type == EventDecided {
		msg = "outbox delivery given up: this surface does not show the item's outcome"
	}
	o.b.log.Error(msg, "sink", ev.Sink, "item", ev.ItemID, "type", ev.Type, "attempts", ev.Attempts, "err", cause)
	return nil
}

// pruneGivenUp keeps the newest keepGivenUp records of sink.
func (o *Outbox) pruneGivenUp(tx kv.Tx, sink string) error {
	var keys [][]byte
	prefix := append([]byte(sink), 0)
	err := tx.Descend(bucketGivenUp, prefix, kv.PrefixEnd(prefix), func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	if err != nil || len(keys) <= keepGivenUp {
		return err
	}
	for _, k := range keys[keepGivenUp:] {
		if err := tx.Delete(bucketGivenUp, k); err != nil {
			return err
		}
	}
	return nil
}

// GivenUp returns up to limit of the events of sink the outbox gave up on,
// newest first (the newest 1000 are kept; Stats counts them all).
func (o *Outbox) GivenUp(ctx context.Context, sink string, limit int) ([]GivenUp, error) {
	var out []GivenUp
	prefix := append([]byte(sink), 0)
	err := o.b.store.View(ctx, func(tx kv.Tx) error {
		return tx.Descend(bucketGivenUp, prefix, kv.PrefixEnd(prefix), func(_, v []byte) error {
			var g GivenUp
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			out = append(out, g)
			if len(out) >= limit {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}
