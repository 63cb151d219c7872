package bot

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// RetentionBatch bounds the records one retention transaction deletes, so
// that the store's only writer is held for a few milliseconds at a time.
const RetentionBatch = 256

// ExpiryIndex finds the records of a bucket by the time they were written,
// so that a sweep step deletes the expired ones without reading the rest.
// Index keys are U64(unix ns) ++ record key; every write of a record adds
// an entry at its new time, and an entry older than the record it names is
// dropped when reached.
type ExpiryIndex struct {
	Bucket string // the records
	Index  string // the index
	// Written returns the time a record was last written, read from its
	// value; ok is false for a value it cannot read (such a record expires
	// with its oldest entry).
	Written func(v []byte) (t time.Time, ok bool)
}

// backfillKey holds the backfill position in the index bucket: a time no
// entry can have (after the largest int64 nanosecond), so no scan reaches it.
var backfillKey = append(bytes.Repeat([]byte{0xff}, 8), "backfill"...)

var backfillDone = []byte{0}

func indexKey(at time.Time, key []byte) []byte {
	return append(kv.U64(uint64(max(at.UnixNano(), 0))), key...)
}

// Add files record key, written at at, in the index. Call it in the same
// transaction as every Put of the record.
func (x ExpiryIndex) Add(tx kv.Tx, at time.Time, key []byte) error {
	return tx.Put(x.Index, indexKey(at, key), nil)
}

// expire deletes up to limit records written before cutoff, oldest first,
// with their index entries. It returns how many records it deleted and
// whether more entries before cutoff remain.
func (x ExpiryIndex) expire(tx kv.Tx, cutoff time.Time, limit int) (int, bool, error) {
	var entries [][]byte
	more := false
	err := tx.Ascend(x.Index, nil, kv.U64(uint64(max(cutoff.UnixNano(), 0))), func(k, _ []byte) error {
		if len(entries) >= limit {
			more = true
			return kv.ErrStop
		}
		entries = append(entries, bytes.Clone(k))
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	n := 0
	for _, e := range entries {
		if err := tx.Delete(x.Index, e); err != nil {
			return n, false, err
		}
		if len(e) <= 8 {
			continue
		}
		key := e[8:]
		v, err := tx.Get(x.Bucket, key)
		if err != nil {
			return n, false, err
		}
		if v == nil {
			continue
		}
		if t, ok := x.Written(v); ok && !t.Before(cutoff) {
			continue // rewritten since: its newer entry expires it
		}
		if err := tx.Delete(x.Bucket, key); err != nil {
			return n, false, err
		}
		n++
	}
	return n, more, nil
}

// backfill files in the index up to limit records written before the index
// existed, resuming where the previous call stopped (the position is kept
// in the index bucket). It reports whether every record is indexed; once
// done it costs one read.
func (x ExpiryIndex) backfill(tx kv.Tx, limit int) (bool, error) {
	pos, err := tx.Get(x.Index, backfillKey)
	if err != nil {
		return false, err
	}
	if bytes.Equal(pos, backfillDone) {
		return true, nil
	}
	var from []byte
	if pos != nil {
		from = append(pos[1:], 0) // the smallest key after the last one indexed
	}
	type rec struct {
		key []byte
		at  time.Time
	}
	var batch []rec
	var last []byte
	more := false
	err = tx.Ascend(x.Bucket, from, nil, func(k, v []byte) error {
		if len(batch) >= limit {
			more = true
			return kv.ErrStop
		}
		last = bytes.Clone(k)
		t, ok := x.Written(v)
		if !ok {
			t = time.Unix(0, 0) // unreadable: expires first
		}
		batch = append(batch, rec{last, t})
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, r := range batch {
		if err := x.Add(tx, r.at, r.key); err != nil {
			return false, err
		}
	}
	if !more {
		return true, tx.Put(x.Index, backfillKey, backfillDone)
	}
	return false, tx.Put(x.Index, backfillKey, append([]byte{1}, last...))
}

// PruneExpired runs x's backfill to its end, then deletes every record
// written before now-ttl, each in transactions of at most RetentionBatch
// records. A ttl of zero or less keeps everything. It is the body of a
// sweep step.
func PruneExpired(ctx context.Context, store kv.Store, x ExpiryIndex, now time.Time, ttl time.Duration) (int, error) {
	if ttl <= 0 {
		return 0, nil
	}
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		err := store.Update(ctx, func(tx kv.Tx) error {
			var err error
			done, err = x.backfill(tx, 4*RetentionBatch)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	cutoff := now.Add(-ttl)
	return InBatches(ctx, store, func(tx kv.Tx) (int, bool, error) {
		return x.expire(tx, cutoff, RetentionBatch)
	})
}

// InBatches runs step in one write transaction after another until step
// reports no more work, and returns the sum of the counts it reported. It
// is how a sweep step deletes many records without holding the store's
// only writer for long: step does at most a batch (RetentionBatch) per
// transaction. Like every write function it may run more than once per
// transaction (kv.Store's contract), so it returns its counts rather than
// accumulating them. It stops at the first error or when ctx ends.
func InBatches(ctx context.Context, store kv.Store, step func(tx kv.Tx) (n int, more bool, err error)) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		var more bool
		err := store.Update(ctx, func(tx kv.Tx) error {
			var err error
			n, more, err = step(tx)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

// DropItem deletes item id's record (its envelope and message references)
// and its open-items and queue entries, in tx. The sweeper calls it when it deletes the
// request or proposal the item shows; a chat click on it afterwards is
// answered "no such item".
func DropItem(tx kv.Tx, id uint64) error {
	if id == 0 {
		return nil
	}
	if err := unfileOpen(tx, id); err != nil {
		return err
	}
	return tx.Delete(bucketItems, kv.U64(id))
}

// AuditDeleted appends the audit entries of a retention deletion: what was
// deleted and why (head, for example "deleted 3 action requests closed
// before 2026-01-01T00:00:00Z (retention.action_requests 2160h0m0s)"),
// then the ids, as many entries as the entry size limit needs, each naming
// its part ("ids 1-40 of 256: ..."). Nothing in the chain is rewritten.
func (tx *Tx) AuditDeleted(principal, action, head string, ids []string) error {
	for i := 0; i < len(ids); {
		prefix := fmt.Sprintf("%s; ids %d-", head, i+1)
		room := approvals.MaxDetail - len(prefix) - len(fmt.Sprintf("%d of %d: ", len(ids), len(ids)))
		j, used := i, 0
		for j < len(ids) && (j == i || used+len(ids[j])+1 <= room) {
			used += len(ids[j]) + 1
			j++
		}
		detail := fmt.Sprintf("%s%d of %d: %s", prefix, j, len(ids), strings.Join(ids[i:j], " "))
		if _, err := tx.AuditAs(principal, Space{}, action, detail); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// ActionRetentionPruned is the audit action of a retention deletion.
const ActionRetentionPruned = "retention_pruned"
