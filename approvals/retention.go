package approvals

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/countersign/countersign/kv"
)

// Retention buckets: what lets the sweeper find closed requests by the time
// they closed, without reading every request.
const (
	// kind 0x00 U64(closed unix ns) ++ request id -> nothing: every
	// terminal request, by kind and by the time it closed.
	bucketClosed = "request_closed"
	// U64(closed unix ns) ++ request id -> requester id 0x00 action_id: the
	// action_id records of closed requests still held.
	bucketClosedKeys = "request_closed_keys"
	// "backfill" -> the last request id indexed by IndexClosed, or
	// backfillDone once every request is indexed.
	bucketRetentionMeta = "request_retention"
)

const (
	keyBackfill  = "backfill"
	backfillDone = "\x00done"
)

// closedAt is when a terminal request closed: its decision time, or its
// creation for a record written before decisions carried one.
func closedAt(r *Request) time.Time {
	if !r.DecidedAt.IsZero() {
		return r.DecidedAt
	}
	return r.CreatedAt
}

func closedKey(kind RequestKind, at time.Time, id string) []byte {
	k := make([]byte, 0, len(kind)+1+8+len(id))
	k = append(k, kind...)
	k = append(k, 0)
	k = append(k, kv.U64(uint64(max(at.UnixNano(), 0)))...)
	return append(k, id...)
}

func closedKeysKey(at time.Time, id string) []byte {
	return append(kv.U64(uint64(max(at.UnixNano(), 0))), id...)
}

// indexClosed records a terminal request in the retention indexes. Writing
// the same request twice writes the same keys.
func indexClosed(tx kv.Tx, r *Request) error {
	if !r.Status.Terminal() {
		return nil
	}
	at := closedAt(r)
	if err := tx.Put(bucketClosed, closedKey(r.Kind, at, r.ID), nil); err != nil {
		return err
	}
	if r.Action != nil && r.Action.ActionID != "" {
		return tx.Put(bucketClosedKeys, closedKeysKey(at, r.ID), idempotencyKey(r.Requester.ID, r.Action.ActionID))
	}
	return nil
}

// ClosedBefore returns the ids of up to limit requests of kind that closed
// before cutoff, earliest first, and whether more may remain.
func ClosedBefore(tx kv.Tx, kind RequestKind, cutoff time.Time, limit int) ([]string, bool, error) {
	prefix := append([]byte(kind), 0)
	end := append(bytes.Clone(prefix), kv.U64(uint64(max(cutoff.UnixNano(), 0)))...)
	var ids []string
	more := false
	err := tx.Ascend(bucketClosed, prefix, end, func(k, _ []byte) error {
		if len(ids) >= limit {
			more = true
			return kv.ErrStop
		}
		if len(k) > len(prefix)+8 {
			ids = append(ids, string(k[len(prefix)+8:]))
		}
		return nil
	})
	return ids, more, err
}

// DeleteRequest removes a closed request and everything kept for it: its
// record, its action_id record (when it still names this request), its
// deadline-index entry and its retention-index entries. It returns the
// deleted request (for its item id), or nil when there is none. A pending
// request is never deleted: it returns nil and leaves it as it is.
func DeleteRequest(tx kv.Tx, id string) (*Request, error) {
	r, err := LoadRequest(tx, id)
	if err != nil || r == nil {
		return nil, err
	}
	if !r.Status.Terminal() {
		return nil, nil
	}
	at := closedAt(r)
	if err := tx.Delete(bucketClosed, closedKey(r.Kind, at, r.ID)); err != nil {
		return nil, err
	}
	if r.Action != nil && r.Action.ActionID != "" {
		if err := tx.Delete(bucketClosedKeys, closedKeysKey(at, r.ID)); err != nil {
			return nil, err
		}
		if err := dropActionID(tx, idempotencyKey(r.Requester.ID, r.Action.ActionID), r.ID); err != nil {
			return nil, err
		}
	}
	if !r.DueAt.IsZero() {
		if err := tx.Delete(bucketDeadlines, deadlineKey(r.DueAt, r.ID)); err != nil {
			return nil, err
		}
	}
	return r, tx.Delete(bucketRequests, []byte(r.ID))
}

// dropActionID deletes an action_id record if it still names request id.
func dropActionID(tx kv.Tx, key []byte, id string) error {
	cur, err := tx.Get(bucketRequestKey, key)
	if err != nil || string(cur) != id {
		return err
	}
	return tx.Delete(bucketRequestKey, key)
}

// ExpireActionIDs forgets up to limit action_id records of requests that
// closed before cutoff, earliest first. The requests themselves are kept
// (their retention is separate); an agent that sends the same action_id
// afterwards starts a new request, which a person decides again. It returns
// how many it forgot and whether more may remain.
func ExpireActionIDs(tx kv.Tx, cutoff time.Time, limit int) (int, bool, error) {
	type rec struct{ k, ak []byte }
	var batch []rec
	more := false
	end := kv.U64(uint64(max(cutoff.UnixNano(), 0)))
	err := tx.Ascend(bucketClosedKeys, nil, end, func(k, v []byte) error {
		if len(batch) >= limit {
			more = true
			return kv.ErrStop
		}
		batch = append(batch, rec{bytes.Clone(k), bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, e := range batch {
		if len(e.k) > 8 {
			if err := dropActionID(tx, e.ak, string(e.k[8:])); err != nil {
				return 0, false, err
			}
		}
		if err := tx.Delete(bucketClosedKeys, e.k); err != nil {
			return 0, false, err
		}
	}
	return len(batch), more, nil
}

// IndexClosed adds to the retention indexes up to limit requests stored
// before those indexes existed, resuming where the previous call stopped
// (the position is kept in the store). It returns how many requests it
// read and whether every request is now indexed. Once done it costs one
// read.
func IndexClosed(tx kv.Tx, limit int) (int, bool, error) {
	pos, err := tx.Get(bucketRetentionMeta, []byte(keyBackfill))
	if err != nil {
		return 0, false, err
	}
	if string(pos) == backfillDone {
		return 0, true, nil
	}
	var from []byte
	if pos != nil {
		from = append(pos, 0) // the smallest key after the last one indexed
	}
	var last []byte
	n := 0
	more := false
	var rs []*Request
	err = tx.Ascend(bucketRequests, from, nil, func(k, v []byte) error {
		if n >= limit {
			more = true
			return kv.ErrStop
		}
		n++
		last = bytes.Clone(k)
		var r Request
		if json.Unmarshal(v, &r) != nil {
			return nil // unreadable: kept as it is, never pruned
		}
		if r.Status.Terminal() {
			rs = append(rs, &r)
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, r := range rs {
		if err := indexClosed(tx, r); err != nil {
			return 0, false, err
		}
	}
	if !more {
		return n, true, tx.Put(bucketRetentionMeta, []byte(keyBackfill), []byte(backfillDone))
	}
	return n, false, tx.Put(bucketRetentionMeta, []byte(keyBackfill), last)
}
