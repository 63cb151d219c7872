package approvals

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/kv"
)

// Audit buckets.
const (
	bucketAudit     = "audit"      // U64(seq) -> Entry JSON
	bucketAuditHead = "audit_head" // "head" -> signed checkpoint of the newest entry
	// bucketAuditUser indexes entries by memory-space user: user_id 0x00
	// U64(seq) -> U64(seq). It is outside the chain: it only speeds up the
	// listing of one space's trail, and List re-checks every row it finds.
	bucketAuditUser = "audit_user"
)

// Genesis is the previous hash of the first entry of a chain.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxDetail is the most bytes of detail an entry keeps.
const MaxDetail = 500

// Entry is one row of the audit chain.
type Entry struct {
	Seq       uint64 `json:"seq"`
	TS        string `json:"ts"` // RFC 3339, UTC, whole seconds
	Principal string `json:"principal"`
	UserID    string `json:"user_id"`
	AgentID   string `json:"agent_id"`
	RunID     string `json:"run_id"`
	Action    string `json:"action"`
	Detail    string `json:"detail"`
	PrevHash  string `json:"prev_hash"`
	Hash      string `json:"hash"`
	Sig       string `json:"sig"` // hex Ed25519 over "countersign.audit.v1|" + Hash
}

// head is the signed checkpoint written after every append, so that deleting
// the newest rows is detected.
type head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	Sig  string `json:"sig"`
}

// Canonical returns the bytes the entry's hash covers: a compact JSON array,
// which has no field-boundary ambiguity.
func (e *Entry) Canonical() []byte {
	b, _ := json.Marshal([]any{e.Seq, e.TS, e.Principal, e.UserID, e.AgentID, e.RunID, e.Action, e.Detail})
	return b
}

// ComputeHash returns sha256hex(prev_hash + "|" + canonical).
func (e *Entry) ComputeHash() string {
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write([]byte("|"))
	h.Write(e.Canonical())
	return hex.EncodeToString(h.Sum(nil))
}

func entryMessage(hash string) []byte { return []byte("countersign.audit.v1|" + hash) }

func headMessage(seq uint64, hash string) []byte {
	return []byte(fmt.Sprintf("countersign.audit.head.v1|%d|%s", seq, hash))
}

// Append adds an entry to the chain inside tx, fills in Seq, TS, PrevHash,
// Hash and Sig, and moves the signed head. Appends are serialised by the
// store's single writer, so the chain cannot fork.
func Append(tx kv.Tx, key ed25519.PrivateKey, now time.Time, e Entry) (Entry, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Entry{}, errors.New("audit: no signing key")
	}
	prev := Genesis
	hb, err := tx.Get(bucketAuditHead, []byte("head"))
	if err != nil {
		return Entry{}, err
	}
	var h head
	if hb != nil {
		if err := json.Unmarshal(hb, &h); err != nil {
			return Entry{}, fmt.Errorf("audit head: %w", err)
		}
		prev = h.Hash
	}
	seq, err := tx.NextSequence(bucketAudit)
	if err != nil {
		return Entry{}, err
	}
	if len(e.Detail) > MaxDetail {
		e.Detail = truncateUTF8(e.Detail, MaxDetail-3) + "..."
	}
	e.Seq = seq
	e.TS = now.UTC().Truncate(time.Second).Format(time.RFC3339)
	e.PrevHash = prev
	e.Hash = e.ComputeHash()
	e.Sig = hex.EncodeToString(ed25519.Sign(key, entryMessage(e.Hash)))
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	if err := tx.Put(bucketAudit, kv.U64(seq), b); err != nil {
		return Entry{}, err
	}
	if e.UserID != "" {
		if err := tx.Put(bucketAuditUser, userIndexKey(e.UserID, seq), kv.U64(seq)); err != nil {
			return Entry{}, err
		}
	}
	nh := head{Seq: seq, Hash: e.Hash, Sig: hex.EncodeToString(ed25519.Sign(key, headMessage(seq, e.Hash)))}
	hb, _ = json.Marshal(nh)
	return e, tx.Put(bucketAuditHead, []byte("head"), hb)
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
