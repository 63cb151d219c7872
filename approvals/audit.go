package approvals

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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

// SequentialBuckets are the audit buckets whose new keys sort after every
// key already there (the chain by sequence number, its per-user index by
// user then sequence number), for a store that fills such pages fuller.
func SequentialBuckets() []string { return []string{bucketAudit, bucketAuditUser} }

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

// head is the signed checkpoint of the newest entry, written with every
// commit that appends, so that deleting the newest rows is detected.
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

// Append adds an entry to the chain inside tx, fills in Seq, TS, PrevHash
// and Hash, and has the entry signed and the head checkpoint moved and
// signed before tx commits. Appends are serialised by the store's single
// writer, so the chain cannot fork.
//
// When tx can defer work to its commit (kv.Finisher: the bbolt store), the
// row and the head are written by one PreCommit per transaction: each entry
// is signed by a goroutine of its own from the moment it is appended (in
// parallel with the rest of the transaction), and the head once, for the
// last of them, just before the commit. Under group commit a
// transaction holds many callers' appends, so the head costs one signature
// per commit instead of one per entry. The returned entry's Sig is then
// empty: the signature exists once the transaction commits. Otherwise (a
// wrapped or foreign Tx) the row and the head are signed and written at
// once, as the returned entry shows. The stored chain is the same either
// way, and every commit leaves a head signed over its newest row.
func Append(tx kv.Tx, key ed25519.PrivateKey, now time.Time, e Entry) (Entry, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Entry{}, errors.New("audit: no signing key")
	}
	hook, deferred := kv.Finally(tx, signerKey, func() kv.PreCommit { return &signer{key: key} })
	var s *signer
	if deferred {
		var ok bool
		if s, ok = hook.(*signer); !ok {
			return Entry{}, fmt.Errorf("audit: the pre-commit key %q is taken by a %T", signerKey, hook)
		}
		if !s.key.Equal(key) {
			return Entry{}, errors.New("audit: one transaction appended with two signing keys")
		}
	}
	prev := Genesis
	if h, ok := s.lastHash(); ok {
		prev = h
	} else {
		h, ok, err := HeadOf(tx)
		if err != nil {
			return Entry{}, err
		}
		if ok {
			prev = h.Hash
		}
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
	e.Sig = ""
	if e.UserID != "" {
		if err := tx.Put(bucketAuditUser, userIndexKey(e.UserID, seq), kv.U64(seq)); err != nil {
			return Entry{}, err
		}
	}
	if s != nil {
		if seq == 1 {
			s.genesisAt = now
		}
		s.add(e)
		return e, nil
	}
	if seq == 1 {
		if err := putGenesis(tx, signGenesis(key, now, e.Hash)); err != nil {
			return Entry{}, err
		}
	}
	e.Sig = hex.EncodeToString(ed25519.Sign(key, entryMessage(e.Hash)))
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	if err := tx.Put(bucketAudit, kv.U64(seq), b); err != nil {
		return Entry{}, err
	}
	return e, putHead(tx, signHead(key, seq, e.Hash))
}

// signerKey registers the audit chain's PreCommit.
const signerKey = "approvals.audit"

// signer is the PreCommit of the audit chain in one transaction: the
// entries appended in it, in order, hashed and linked, each signed by its
// own goroutine from the moment it is appended (its hash is fixed by then),
// so that signing runs beside the rest of the transaction's work instead of
// after it. It writes nothing it did not append itself, so a row altered in
// the file is never re-signed. A transaction rolled back drops its signer;
// signatures still running finish and are discarded.
type signer struct {
	key  ed25519.PrivateKey
	rows []*pendingRow
	wg   sync.WaitGroup
	// genesisAt is set when this transaction appends the chain's first
	// entry: its genesis record is written with it.
	genesisAt time.Time
}

// pendingRow is one appended entry's place in the chain and, once its
// goroutine is done, its stored encoding.
type pendingRow struct {
	seq  uint64
	hash string
	raw  []byte
	err  error
}

// add has e signed and encoded by a goroutine of its own.
func (s *signer) add(e Entry) {
	p := &pendingRow{seq: e.Seq, hash: e.Hash}
	s.rows = append(s.rows, p)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		e.Sig = hex.EncodeToString(ed25519.Sign(s.key, entryMessage(e.Hash)))
		p.raw, p.err = json.Marshal(&e)
	}()
}

// lastHash returns the hash of the newest entry appended, if any.
func (s *signer) lastHash() (string, bool) {
	if s == nil || len(s.rows) == 0 {
		return "", false
	}
	return s.rows[len(s.rows)-1].hash, true
}

// BeforeCommit signs the new head (while the entries' signatures finish),
// then writes the signed rows and the head.
func (s *signer) BeforeCommit(tx kv.Tx) error {
	n := len(s.rows)
	if n == 0 {
		return nil
	}
	last := s.rows[n-1]
	hd := signHead(s.key, last.seq, last.hash)
	if !s.genesisAt.IsZero() {
		if err := putGenesis(tx, signGenesis(s.key, s.genesisAt, s.rows[0].hash)); err != nil {
			s.wg.Wait()
			return err
		}
	}
	s.wg.Wait()
	for _, p := range s.rows {
		if p.err != nil {
			return p.err
		}
		if err := tx.Put(bucketAudit, kv.U64(p.seq), p.raw); err != nil {
			return err
		}
	}
	return putHead(tx, hd)
}

func signHead(key ed25519.PrivateKey, seq uint64, hash string) head {
	return head{Seq: seq, Hash: hash, Sig: hex.EncodeToString(ed25519.Sign(key, headMessage(seq, hash)))}
}

func putHead(tx kv.Tx, h head) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return tx.Put(bucketAuditHead, []byte("head"), b)
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
