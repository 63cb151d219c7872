// Package kv defines the transactional key-value contract through which the
// domain packages (memory, approvals, bot) keep their state.
//
// One tool call is one transaction: the state change, its audit entry and the
// notifications it causes (the outbox) are written through the same Tx and
// commit together or not at all. adapters/bolt implements the contract with
// bbolt; a second engine (PostgreSQL, for several replicas) implements the
// same interfaces without touching the domain.
package kv

import (
	"context"
	"encoding/binary"
	"errors"
)

// ErrStop, returned from a scan callback, ends the scan without an error.
var ErrStop = errors.New("kv: stop scan")

// Tx is one transaction. Values passed to scan callbacks are only valid for
// the duration of the callback; Get returns a copy the caller may keep.
type Tx interface {
	// Get returns a copy of the value stored under key, or nil if there is none.
	Get(bucket string, key []byte) ([]byte, error)
	// Put stores value under key. It fails in a read-only transaction.
	Put(bucket string, key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(bucket string, key []byte) error
	// NextSequence returns the bucket's next sequence number, starting at 1.
	NextSequence(bucket string) (uint64, error)
	// Ascend calls fn for every key in [from, to) in ascending order.
	// A nil from starts at the first key; a nil to runs to the last.
	Ascend(bucket string, from, to []byte, fn func(key, value []byte) error) error
	// Descend calls fn for every key in [from, to) in descending order.
	Descend(bucket string, from, to []byte, fn func(key, value []byte) error) error
}

// Store runs transactions. Update commits durably before it returns nil:
// a caller may acknowledge a write only after Update has returned nil.
type Store interface {
	Update(ctx context.Context, fn func(Tx) error) error
	View(ctx context.Context, fn func(Tx) error) error
}

// U64 encodes n big-endian, so that keys sort numerically.
func U64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// ParseU64 decodes a key written by U64. It returns 0 for a short slice.
func ParseU64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b[:8])
}

// Join builds a composite key from parts separated by 0x00, a byte no part
// may contain (the parts are identifiers the domain validates).
func Join(parts ...[]byte) []byte {
	n := len(parts)
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			out = append(out, 0)
		}
		out = append(out, p...)
	}
	return out
}

// PrefixEnd returns the smallest key greater than every key with prefix,
// for use as the exclusive upper bound of a prefix scan. It returns nil
// (unbounded) when no such key exists.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Prefix scans every key that starts with prefix in ascending order.
func Prefix(tx Tx, bucket string, prefix []byte, fn func(key, value []byte) error) error {
	return tx.Ascend(bucket, prefix, PrefixEnd(prefix), fn)
}
