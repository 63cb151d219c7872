// Package kv defines the transactional key-value contract through which the
// domain packages (memory, approvals, bot) keep their state.
//
// One tool call is one transaction: the state change, its audit entry and the
// notifications it causes (the outbox) are written through the same Tx and
// commit together or not at all. (A read-only answer changes nothing; its
// audit entry commits in a transaction of its own: see bot.ReadAudit.) adapters/bolt implements the contract with
// bbolt; a second engine (PostgreSQL, for several replicas) implements the
// same interfaces without touching the domain.
package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrStop, returned from a scan callback, ends the scan without an error.
var ErrStop = errors.New("kv: stop scan")

// ErrUnavailable is wrapped by the error of a transaction that could not run
// or whose commit is not known to have happened because the store cannot be
// reached (a database that is down, restarting or too busy). Nothing of the
// transaction may be acknowledged; the caller should fail closed and may
// retry later (the HTTP edge answers 503 with Retry-After).
var ErrUnavailable = errors.New("the store is unavailable")

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

// PreCommit is work a transaction runs once, after every function of the
// transaction has returned nil and just before it commits (see Finisher).
type PreCommit interface {
	// BeforeCommit runs in the transaction. An error rolls the transaction
	// back: nothing of it commits, and every caller whose function ran in it
	// gets the error.
	BeforeCommit(tx Tx) error
}

// Finisher is implemented by a read-write Tx that can defer work to just
// before its commit. Under group commit one transaction holds the writes of
// several Update functions; their PreCommits run once for all of them, after
// the last one, so work that only the final state needs (signing the audit
// chain's head) is done once per commit instead of once per function.
type Finisher interface {
	// Finally returns the PreCommit registered under key in this
	// transaction, registering newHook() first when there is none. The
	// PreCommits of a transaction run in the order of their registration.
	// A PreCommit is never shared between transactions: a group that is
	// rolled back and re-run starts with none. ok is false when the
	// transaction cannot defer work (a read-only transaction); the caller
	// must then do the work at once.
	Finally(key string, newHook func() PreCommit) (hook PreCommit, ok bool)
}

// Finally registers newHook() under key on tx when tx is a Finisher (see
// Finisher.Finally), and returns the registered hook. ok is false when tx
// cannot defer work (it is not a Finisher, for example a wrapper, or it is
// read-only): the caller must then do the work now, in tx.
func Finally(tx Tx, key string, newHook func() PreCommit) (PreCommit, bool) {
	f, ok := tx.(Finisher)
	if !ok {
		return nil, false
	}
	return f.Finally(key, newHook)
}

// Store runs transactions. Update commits durably before it returns nil:
// a caller may acknowledge a write only after Update has returned nil.
//
// Update may run fn more than once before it returns: an engine re-runs it
// after a conflict with a concurrent writer (PostgreSQL's serialization
// failures and deadlocks) and group commit re-runs the functions of a group
// in which another failed. Each run starts from a rolled-back state. So fn
// must do nothing outside the transaction, and must assign, not accumulate,
// whatever it hands back to its caller; only the last run's results count.
// Tests make the rule visible with kvtest.Twice, which runs every function
// twice (a rolled-back rehearsal, then for real).
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

// Hooks is the set of PreCommits of one attempt of one transaction, for an
// engine that implements Finisher. The zero Hooks is empty and ready to
// use; a transaction that is rolled back and run again starts a new one.
type Hooks struct {
	keys  map[string]PreCommit
	order []PreCommit
}

// Finally returns the PreCommit registered under key, registering newHook()
// first when there is none (Finisher.Finally).
func (h *Hooks) Finally(key string, newHook func() PreCommit) PreCommit {
	if p, ok := h.keys[key]; ok {
		return p
	}
	p := newHook()
	if h.keys == nil {
		h.keys = map[string]PreCommit{}
	}
	h.keys[key] = p
	h.order = append(h.order, p)
	return p
}

// Run runs every registered PreCommit in tx, in order of registration
// (including any registered while they run), each once. A panic becomes an
// error, so that a bad hook cannot take an engine's committer down.
func (h *Hooks) Run(tx Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("kv: pre-commit hook panicked: %v", v)
		}
	}()
	for i := 0; i < len(h.order); i++ {
		if err := h.order[i].BeforeCommit(tx); err != nil {
			return err
		}
	}
	return nil
}
