package approvals

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/kv"
)

// Request buckets.
const (
	bucketRequests   = "requests"     // request id -> Request JSON
	bucketRequestKey = "request_keys" // requester id 0x00 action_id -> request id
	bucketDeadlines  = "request_due"  // big-endian unix nanoseconds ++ request id -> kind
)

// AuditedBuckets are approvals' buckets written only in the same
// transaction as an audit entry (the action requests), for Emptied.
func AuditedBuckets() []string { return []string{bucketRequests, bucketReviews} }

// RequestsBucket is the bucket a request's every change is written to: a
// replica that hears of a committed write there (key: the request id) wakes
// whoever waits on that request.
const RequestsBucket = bucketRequests

// PutRequest stores r, moving its deadline-index entry to due (the zero
// time removes it), and files a terminal request in the retention indexes
// (retention.go). Call it for every change of a request, so that the
// indexes never point at a stale time.
func PutRequest(tx kv.Tx, r *Request, due time.Time) error {
	if !r.DueAt.IsZero() && !r.DueAt.Equal(due) {
		if err := tx.Delete(bucketDeadlines, deadlineKey(r.DueAt, r.ID)); err != nil {
			return err
		}
	}
	if !due.IsZero() {
		if err := tx.Put(bucketDeadlines, deadlineKey(due, r.ID), []byte(r.Kind)); err != nil {
			return err
		}
	}
	r.DueAt = due
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketRequests, []byte(r.ID), b); err != nil {
		return err
	}
	return indexClosed(tx, r)
}

// LoadRequest reads a request; it returns nil if there is none.
func LoadRequest(tx kv.Tx, id string) (*Request, error) {
	b, err := tx.Get(bucketRequests, []byte(id))
	if err != nil || b == nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("request %s: %w", id, err)
	}
	return &r, nil
}

func idempotencyKey(requesterID, actionID string) []byte {
	return kv.Join([]byte(requesterID), []byte(actionID))
}

// LookupActionID returns the request an agent created under its
// idempotency key action_id, or "" if none. Keys are per requester, so one
// agent's key never reaches another's request.
func LookupActionID(tx kv.Tx, requesterID, actionID string) (string, error) {
	b, err := tx.Get(bucketRequestKey, idempotencyKey(requesterID, actionID))
	return string(b), err
}

// PutActionID records the request an idempotency key created.
func PutActionID(tx kv.Tx, requesterID, actionID, requestID string) error {
	return tx.Put(bucketRequestKey, idempotencyKey(requesterID, actionID), []byte(requestID))
}

// deadlineKey sorts by time, then id: a range scan up to now finds every
// request due by then.
func deadlineKey(due time.Time, id string) []byte {
	return append(kv.U64(uint64(max(due.UnixNano(), 0))), id...)
}

// DueEntry is one deadline-index entry.
type DueEntry struct {
	At time.Time
	ID string
}

// DueRequests returns up to limit deadline-index entries at or before now,
// earliest first.
func DueRequests(tx kv.Tx, now time.Time, limit int) ([]DueEntry, error) {
	var out []DueEntry
	end := kv.U64(uint64(max(now.UnixNano(), 0)) + 1)
	err := tx.Ascend(bucketDeadlines, nil, end, func(k, _ []byte) error {
		if len(k) <= 8 {
			return nil
		}
		out = append(out, DueEntry{At: time.Unix(0, int64(kv.ParseU64(k))), ID: string(k[8:])})
		if len(out) >= limit {
			return kv.ErrStop
		}
		return nil
	})
	return out, err
}

// DropDeadline removes one deadline-index entry (an entry whose request is
// gone or no longer due at that time).
func DropDeadline(tx kv.Tx, due time.Time, id string) error {
	return tx.Delete(bucketDeadlines, deadlineKey(due, id))
}
