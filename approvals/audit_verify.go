package approvals

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/kv"
)

// The reasons Verify gives for the first break it finds.
const (
	ReasonLink      = "chain link mismatch (a row was deleted, reordered, or inserted)"
	ReasonTampered  = "content tampered (a row's stored bytes were altered)"
	ReasonSignature = "invalid signature"
	ReasonHeadSig   = "head checkpoint signature invalid"
	ReasonHeadGone  = "head checkpoint missing (the signed checkpoint of the newest row was removed)"
	ReasonTruncated = "log truncated or rolled back (head is behind the last signed checkpoint)"
)

// Report is the outcome of verifying the audit chain.
type Report struct {
	Intact bool `json:"intact"`
	// Entries counts the rows verified intact (all of them when Intact).
	Entries int `json:"entries"`
	// BrokenAt is the sequence number of the first break; Reason says what
	// broke there. Both are zero when Intact.
	BrokenAt uint64 `json:"broken_at,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Head is the signed checkpoint read from the store (zero if none).
	Head Checkpoint `json:"head"`
}

// Checkpoint is the signed head of the chain: the sequence number and hash
// of the newest entry, signed over "countersign.audit.head.v1|<seq>|<hash>".
type Checkpoint struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	Sig  string `json:"sig"`
}

// verifyBatch is how many rows one read transaction verifies, so that a long
// chain never pins one transaction (and the file's old pages) for long.
const verifyBatch = 4096

// Verify recomputes every row of the chain, in order: the row's hash from its
// content, its link to the previous row (sequence and previous hash), and its
// signature; then the signed head checkpoint, which catches the deletion of
// the newest rows. It reports the first break. An error means the chain
// could not be read, not that it is broken.
func Verify(ctx context.Context, store kv.Store, pub ed25519.PublicKey) (Report, error) {
	return verifyBatched(ctx, store, pub, verifyBatch)
}

// verifyBatched is Verify reading batch rows a transaction.
func verifyBatched(ctx context.Context, store kv.Store, pub ed25519.PublicKey, batch int) (Report, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Report{}, errors.New("audit: no public key to verify with")
	}
	v := verifier{pub: pub, prev: Genesis, want: 1}
	var from []byte
	for {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		done := false
		err := store.View(ctx, func(tx kv.Tx) error {
			n := 0
			var last []byte
			err := tx.Ascend(bucketAudit, from, nil, func(k, val []byte) error {
				if n == batch {
					return kv.ErrStop
				}
				n++
				last = append(last[:0], k...)
				if !v.row(k, val) {
					return kv.ErrStop
				}
				return nil
			})
			if err != nil {
				return err
			}
			if v.broken || n < batch {
				done = true
				if !v.broken {
					return v.head(tx)
				}
				return nil
			}
			from = append(last, 0) // the smallest key after last
			return nil
		})
		if err != nil {
			return Report{}, err
		}
		if done {
			return v.rep, nil
		}
	}
}

// verifier carries the state of one walk along the chain.
type verifier struct {
	pub    ed25519.PublicKey
	prev   string // hash of the last good row
	want   uint64 // sequence number the next row must have
	last   uint64 // sequence number of the last good row
	broken bool
	rep    Report
}

func (v *verifier) fail(seq uint64, reason string) bool {
	v.broken = true
	v.rep.BrokenAt, v.rep.Reason = seq, reason
	return false
}

// row checks one stored row and reports whether the walk may go on.
func (v *verifier) row(k, val []byte) bool {
	seq := v.want
	if len(k) == 8 {
		seq = kv.ParseU64(k)
	} else {
		return v.fail(seq, ReasonLink) // a key no append writes: an inserted row
	}
	var e Entry
	if err := json.Unmarshal(val, &e); err != nil {
		return v.fail(seq, ReasonTampered)
	}
	if e.ComputeHash() != e.Hash {
		return v.fail(seq, ReasonTampered)
	}
	if e.Seq != seq || seq != v.want || e.PrevHash != v.prev {
		return v.fail(seq, ReasonLink)
	}
	sig, err := hex.DecodeString(e.Sig)
	if err != nil || !ed25519.Verify(v.pub, entryMessage(e.Hash), sig) {
		return v.fail(seq, ReasonSignature)
	}
	v.prev, v.want, v.last = e.Hash, seq+1, seq
	v.rep.Entries++
	return true
}

// head checks the signed checkpoint against the last good row.
func (v *verifier) head(tx kv.Tx) error {
	h, ok, err := HeadOf(tx)
	if err != nil {
		v.fail(v.last, ReasonHeadSig)
		return nil
	}
	if !ok {
		if v.last > 0 {
			v.fail(v.last, ReasonHeadGone)
			return nil
		}
		v.rep.Intact = true
		return nil
	}
	v.rep.Head = h
	sig, err := hex.DecodeString(h.Sig)
	switch {
	case err != nil || !ed25519.Verify(v.pub, headMessage(h.Seq, h.Hash), sig):
		v.fail(h.Seq, ReasonHeadSig)
	case h.Seq > v.last:
		v.fail(v.last+1, ReasonTruncated)
	case h.Seq < v.last:
		v.fail(h.Seq+1, ReasonLink) // rows after the checkpoint that no append signed
	case h.Hash != v.prev:
		v.fail(v.last, ReasonLink)
	default:
		v.rep.Intact = true
	}
	return nil
}

// HeadOf reads the signed checkpoint. ok is false when the chain is empty.
func HeadOf(tx kv.Tx) (h Checkpoint, ok bool, err error) {
	b, err := tx.Get(bucketAuditHead, []byte("head"))
	if err != nil || b == nil {
		return Checkpoint{}, false, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Checkpoint{}, false, fmt.Errorf("audit head: %w", err)
	}
	return h, true, nil
}

// VerifyEntry checks one exported entry on its own: its hash against its
// content and its signature. It cannot see links; Verify walks those.
func VerifyEntry(pub ed25519.PublicKey, e Entry) error {
	if e.ComputeHash() != e.Hash {
		return errors.New(ReasonTampered)
	}
	sig, err := hex.DecodeString(e.Sig)
	if err != nil || !ed25519.Verify(pub, entryMessage(e.Hash), sig) {
		return errors.New(ReasonSignature)
	}
	return nil
}
