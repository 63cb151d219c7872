package bot

import (
	"context"
	"time"

	"github.com/countersign/countersign/kv"
)

const bucketDeliveries = "deliveries" // delivery id -> first-seen unix seconds

// DeliveryTTL is how long a delivery id is remembered. Slack's last retry
// arrives about 5 minutes in, so the window is kept well above that.
const DeliveryTTL = 2 * time.Hour

// FirstDelivery records delivery id (for example "slack:<trigger_id>" or
// "discord:<interaction id>") and reports whether this is the first time it
// was seen. A replayed or retried delivery returns false and must not be
// applied again. The record is durable before it returns.
func (b *Bot) FirstDelivery(ctx context.Context, id string) (bool, error) {
	first := false
	err := b.store.Update(ctx, func(tx kv.Tx) error {
		first = false // the function may run twice under group commit
		v, err := tx.Get(bucketDeliveries, []byte(id))
		if err != nil {
			return err
		}
		if v != nil {
			return nil
		}
		first = true
		return tx.Put(bucketDeliveries, []byte(id), kv.U64(uint64(b.now().Unix())))
	})
	return first, err
}

// pruneDeliveries forgets delivery ids older than DeliveryTTL, at most 1000
// per call so the write lock is held briefly.
func (b *Bot) pruneDeliveries(ctx context.Context, now time.Time) (int, error) {
	cutoff := uint64(now.Add(-DeliveryTTL).Unix())
	var old [][]byte
	err := b.store.View(ctx, func(tx kv.Tx) error {
		return tx.Ascend(bucketDeliveries, nil, nil, func(k, v []byte) error {
			if kv.ParseU64(v) < cutoff {
				old = append(old, append([]byte(nil), k...))
				if len(old) >= 1000 {
					return kv.ErrStop
				}
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	err = b.store.Update(ctx, func(tx kv.Tx) error {
		for _, k := range old {
			if err := tx.Delete(bucketDeliveries, k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(old), err
}
