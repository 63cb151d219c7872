package approvals

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/kv"
)

// Audit buckets.
const (
	bucketAudit     = "audit"      // U64(seq) -> the entry's row (audit_row.go)
	bucketAuditHead = "audit_head" // "head" -> signed checkpoint of the newest entry
	// bucketAuditUser indexes entries by memory-space user: user_id 0x00
	// U64(seq) -> nothing (stores written before binary rows hold U64(seq)
	// again as the value; the key says it). It is outside the chain: it
	// only speeds up the listing of one space's trail, and List re-checks
	// every row it finds.
	bucketAuditUser = "audit_user"
)

// SequentialBuckets are the audit buckets whose new keys sort after every
// key already there (the chain by sequence number, its per-user index by
// user then sequence number), for a store that fills such pages fuller.
func SequentialBuckets() []string { return []string{bucketAudit, bucketAuditUser} }

// ChainHead names what every append reads first: the bucket and key of the
// chain's signed head, and the bucket whose sequence numbers the entries,
// for a store that can read them ahead of a transaction's first statement.
func ChainHead() (bucket string, key []byte, sequence string) {
	return bucketAuditHead, []byte("head"), bucketAudit
}

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
	// Sig is the hex Ed25519 signature over "countersign.audit.v1|" + Hash
	// of an entry written before heads alone were signed; newer entries
	// have none (the signed head covers them through the hash links).
	Sig string `json:"sig,omitempty"`
}

// head is the signed checkpoint of the newest entry, written with every
// commit that appends, so that deleting the newest rows is detected.
type head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	Sig  string `json:"sig"`
}

// Canonical returns the bytes the entry's hash covers: a compact JSON array,
// which has no field-boundary ambiguity, exactly as encoding/json's Marshal
// writes []any{seq, ts, principal, user_id, agent_id, run_id, action,
// detail} (docs/audit.md spells it out; a fuzz test holds the two to each
// other).
func (e *Entry) Canonical() []byte {
	return e.appendCanonical(nil)
}

func (e *Entry) appendCanonical(dst []byte) []byte {
	dst = append(dst, '[')
	dst = strconv.AppendUint(dst, e.Seq, 10)
	for _, s := range [...]string{e.TS, e.Principal, e.UserID, e.AgentID, e.RunID, e.Action, e.Detail} {
		dst = appendCanonicalString(append(dst, ','), s)
	}
	return append(dst, ']')
}

// appendCanonicalString appends s as encoding/json's Marshal writes a
// string: with HTML escaping, invalid UTF-8 as \ufffd.
func appendCanonicalString(dst []byte, s string) []byte {
	return AppendJSONString(dst, s, true)
}

// AppendJSONString appends s as a JSON string exactly as encoding/json
// writes it: invalid UTF-8 becomes \ufffd, control characters are escaped
// (\b \f \n \r \t, else \u00XX), and so are U+2028 and U+2029; with
// escapeHTML, < > & too (Marshal's default, the audit chain's canonical
// form), without it as an Encoder with SetEscapeHTML(false) writes (the
// HTTP edge's answers, bot.AppendJSONString). The fuzz tests of both
// callers hold it to encoding/json.
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || (b != '<' && b != '>' && b != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters, and < > &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ComputeHash returns sha256hex(prev_hash + "|" + canonical).
func (e *Entry) ComputeHash() string {
	var buf [512]byte
	b := append(buf[:0], e.PrevHash...)
	b = e.appendCanonical(append(b, '|'))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func entryMessage(hash string) []byte { return []byte("countersign.audit.v1|" + hash) }

func headMessage(seq uint64, hash string) []byte {
	return []byte(fmt.Sprintf("countersign.audit.head.v1|%d|%s", seq, hash))
}

// Append adds an entry to the chain inside tx, fills in Seq, TS, PrevHash
// and Hash, writes it, and has the head checkpoint moved and signed before
// tx commits. Appends are serialised by the store's single writer, so the
// chain cannot fork.
//
// Entries are not signed one by one: each is hash-linked to the one
// before, and the head, signed, names the newest, so one signature covers
// the whole chain up to it (docs/audit.md; BenchmarkEntrySignature measured
// a per-row signature at about a third of an append's CPU). When tx can
// defer work to its commit (kv.Finisher: the bbolt store), the head is
// signed once per transaction, for the last entry, just before the commit:
// under group commit a transaction holds many callers' appends, so the
// head costs one signature per commit. Otherwise (a wrapped or foreign Tx)
// the head is signed at once. The stored chain is the same either way, and
// every commit leaves a head signed over its newest row.
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
	if s != nil && s.seq > 0 {
		prev = s.hash
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
	ts := now.UTC().Truncate(time.Second)
	e.Seq = seq
	e.TS = ts.Format(time.RFC3339)
	e.PrevHash = prev
	e.Hash = e.ComputeHash()
	e.Sig = ""
	if e.UserID != "" {
		if err := tx.Put(bucketAuditUser, userIndexKey(e.UserID, seq), nil); err != nil {
			return Entry{}, err
		}
	}
	b, err := encodeRow(make([]byte, 0, 64+len(e.Principal)+len(e.UserID)+len(e.AgentID)+len(e.RunID)+len(e.Action)+len(e.Detail)), &e, ts.Unix())
	if err != nil {
		return Entry{}, err
	}
	if err := tx.Put(bucketAudit, kv.U64(seq), b); err != nil {
		return Entry{}, err
	}
	if s != nil {
		if seq == 1 {
			s.genesisAt = now
		}
		if s.first == 0 {
			s.first, s.firstHash = seq, e.Hash
		}
		s.seq, s.hash = seq, e.Hash
		return e, nil
	}
	if seq == 1 {
		if err := putGenesis(tx, signGenesis(key, now, e.Hash)); err != nil {
			return Entry{}, err
		}
	}
	return e, putHead(tx, signHead(key, seq, e.Hash))
}

// signerKey registers the audit chain's PreCommit.
const signerKey = "approvals.audit"

// signer is the PreCommit of the audit chain in one transaction: the
// newest entry appended in it, whose head it signs once, just before the
// commit. It signs only the hash its own transaction computed, so a row
// altered in the file is never covered by a new head (the new entries
// link to the head's hash, not to the altered row's). A transaction rolled
// back drops its signer.
type signer struct {
	key ed25519.PrivateKey
	// first and firstHash are the transaction's first entry; seq and hash
	// its newest.
	first     uint64
	firstHash string
	seq       uint64
	hash      string
	// genesisAt is set when this transaction appends the chain's first
	// entry: its genesis record is written with it.
	genesisAt time.Time
}

// BeforeCommit signs and writes the new head (and the genesis record with
// the chain's first entry).
func (s *signer) BeforeCommit(tx kv.Tx) error {
	if s.seq == 0 {
		return nil
	}
	if !s.genesisAt.IsZero() {
		if err := putGenesis(tx, signGenesis(s.key, s.genesisAt, s.firstHash)); err != nil {
			return err
		}
	}
	return putHead(tx, signHead(s.key, s.seq, s.hash))
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
