package memory

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/countersign/countersign/kv"
)

// Retention buckets.
const (
	// U64(closed unix ns) ++ space key ++ U64(id) -> nothing: every proposal
	// closed without being applied (rejected, stale or expired).
	bucketClosed = "mem_closed"
	// "backfill" -> the last fact key IndexClosed read, or backfillDone.
	bucketRetentionMeta = "mem_retention"
)

const (
	keyBackfill  = "backfill"
	backfillDone = "\x00done"
)

// closedUnapplied reports whether f is a proposal that was closed without
// being applied: rejected, stale or expired. Such a row changes no value;
// it only records that a change was asked for and not made. A confirmed
// proposal is the fact it became (or its tombstone) and is history, never
// pruned.
func (f *Fact) closedUnapplied() bool {
	return f.IsProposal() && f.Resolved != "" && f.Resolved != ResolvedConfirmed && !f.Status.Live()
}

func closedTime(f *Fact) time.Time {
	switch {
	case !f.DecidedAt.IsZero():
		return f.DecidedAt
	case !f.RetiredAt.IsZero():
		return f.RetiredAt
	}
	return f.ProposedAt
}

func closedKey(f *Fact) []byte {
	return append(kv.U64(uint64(max(closedTime(f).UnixNano(), 0))), factKey(f.Space, f.ID)...)
}

// spaceOfKey parses a fact key (space key ++ U64(id)).
func spaceOfKey(k []byte) (Space, uint64, bool) {
	if len(k) < 8+3 {
		return Space{}, 0, false
	}
	parts := bytes.Split(k[:len(k)-8], []byte{0})
	if len(parts) != 4 || len(parts[3]) != 0 {
		return Space{}, 0, false
	}
	return Space{UserID: string(parts[0]), AgentID: string(parts[1]), RunID: string(parts[2])}, kv.ParseU64(k[len(k)-8:]), true
}

// DeleteClosedBefore deletes up to limit proposals closed without being
// applied before cutoff, oldest first: their rows and history-index
// entries. Current values, their history and open proposals are never
// touched. It returns the deleted proposals (for their item ids and the
// audit) and whether more may remain.
func DeleteClosedBefore(tx kv.Tx, cutoff time.Time, limit int) ([]*Fact, bool, error) {
	var keys [][]byte
	more := false
	err := tx.Ascend(bucketClosed, nil, kv.U64(uint64(max(cutoff.UnixNano(), 0))), func(k, _ []byte) error {
		if len(keys) >= limit {
			more = true
			return kv.ErrStop
		}
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	var out []*Fact
	for _, k := range keys {
		if err := tx.Delete(bucketClosed, k); err != nil {
			return nil, false, err
		}
		sp, id, ok := spaceOfKey(k[8:])
		if !ok {
			continue
		}
		f, err := Load(tx, sp, id)
		if err != nil {
			return nil, false, err
		}
		if f == nil || !f.closedUnapplied() {
			continue
		}
		if err := tx.Delete(bucketSubj, subjectKey(f.Space, f.Subject, f.ID)); err != nil {
			return nil, false, err
		}
		if err := tx.Delete(bucketFacts, factKey(f.Space, f.ID)); err != nil {
			return nil, false, err
		}
		out = append(out, f)
	}
	return out, more, nil
}

// IndexClosed files in the retention index up to limit facts stored before
// the index existed (their closed proposals), resuming where the previous
// call stopped (the position is kept in the store). It reports whether
// every fact has been read; once done it costs one read.
func IndexClosed(tx kv.Tx, limit int) (bool, error) {
	pos, err := tx.Get(bucketRetentionMeta, []byte(keyBackfill))
	if err != nil {
		return false, err
	}
	if string(pos) == backfillDone {
		return true, nil
	}
	var from []byte
	if pos != nil {
		from = append(pos, 0)
	}
	var last []byte
	var closed []*Fact
	n, more := 0, false
	err = tx.Ascend(bucketFacts, from, nil, func(k, v []byte) error {
		if n >= limit {
			more = true
			return kv.ErrStop
		}
		n++
		last = bytes.Clone(k)
		// Most facts are not proposals: skip them without decoding.
		if !bytes.Contains(v, []byte(`"pending":`)) {
			return nil
		}
		var f Fact
		if json.Unmarshal(v, &f) != nil {
			return nil // unreadable: kept as it is, never pruned
		}
		if f.closedUnapplied() {
			closed = append(closed, &f)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, f := range closed {
		if err := tx.Put(bucketClosed, closedKey(f), nil); err != nil {
			return false, err
		}
	}
	if !more {
		return true, tx.Put(bucketRetentionMeta, []byte(keyBackfill), []byte(backfillDone))
	}
	return false, tx.Put(bucketRetentionMeta, []byte(keyBackfill), last)
}
