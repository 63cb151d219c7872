package bot

import (
	"context"
	"time"

	"github.com/countersign/countersign/kv"
)

// Delivery dedupe buckets.
const (
	bucketDeliveries   = "deliveries"     // delivery id -> first-seen unix seconds
	bucketDeliveriesAt = "deliveries_due" // U64(first seen, unix ns) ++ delivery id -> nothing
)

// DefaultDeliveryTTL is how long a delivery id is remembered unless
// Options.DeliveryTTL says otherwise. Slack's last retry arrives about 5
// minutes in and Discord's within minutes, so a week is far above any retry.
const DefaultDeliveryTTL = 7 * 24 * time.Hour

// deliveries indexes the delivery ids by the time they were first seen.
var deliveries = ExpiryIndex{Bucket: bucketDeliveries, Index: bucketDeliveriesAt, Written: func(v []byte) (time.Time, bool) {
	if len(v) < 8 {
		return time.Time{}, false
	}
	return time.Unix(int64(kv.ParseU64(v)), 0), true
}}

// Deliveries remembers the ids of the deliveries chat platforms made (for
// example "slack:<trigger_id>" or "discord:<interaction id>"), so that a
// replayed or retried delivery is not applied twice. Ids are forgotten
// Options.DeliveryTTL after they were first seen (the "deliveries" sweep
// step). It is an accessor, as Items is (reach it with Bot.Deliveries):
// only the surfaces that receive deliveries use it.
type Deliveries struct{ b *Bot }

// Deliveries returns the bot's delivery dedupe.
func (b *Bot) Deliveries() Deliveries { return Deliveries{b: b} }

// First records every delivery id of one delivery (a transport's envelope
// id and the platform's trigger id, say) in one transaction, and reports
// whether none of them was seen before. Any one seen means a replay or a
// retry, which must not be applied again. The record is durable before it
// returns; no id at all is never first.
func (d Deliveries) First(ctx context.Context, ids ...string) (bool, error) {
	b := d.b
	first := false
	err := b.store.Update(ctx, func(tx kv.Tx) error {
		first = true // reset: the function may run twice under group commit
		now := b.now()
		for _, id := range ids {
			v, err := tx.Get(bucketDeliveries, []byte(id))
			if err != nil {
				return err
			}
			if v != nil {
				first = false
				continue
			}
			if err := tx.Put(bucketDeliveries, []byte(id), kv.U64(uint64(now.Unix()))); err != nil {
				return err
			}
			if err := deliveries.Add(tx, now, []byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	return first && len(ids) > 0, err
}

// pruneDeliveries forgets delivery ids first seen more than the delivery
// TTL before now, in batches of RetentionBatch. It is the "deliveries"
// sweep step.
func (b *Bot) pruneDeliveries(ctx context.Context, now time.Time) (int, error) {
	return PruneExpired(ctx, b.store, deliveries, now, b.deliveryTTL)
}
