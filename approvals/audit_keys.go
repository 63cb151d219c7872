package approvals

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/countersign/countersign/kv"
)

// Keys of the audit_head bucket besides "head".
const (
	// keyGenesis is the signed record of the chain's creation, written with
	// its first entry, so that an emptied chain is told from a new one.
	keyGenesis = "genesis"
)

// bucketAuditKeys indexes the keys the chain has used: U64(first seq) ->
// hex public key. It is outside the chain (a listing for
// export_public_key and the start-up checks); Verify derives the keys from
// the genesis record and the rotation entries, never from this index.
const bucketAuditKeys = "audit_keys"

// ActionKeyRotation is the audit action of a signing-key rotation. Its
// detail names the old and the new public key; it and every later entry are
// signed by the new key.
const ActionKeyRotation = "rotate_signing_key"

// rotationRE parses a rotation entry's detail.
var rotationRE = regexp.MustCompile(`^old ed25519:([0-9a-f]{64}) new ed25519:([0-9a-f]{64})(?:;|$)`)

// GenesisRecord is the signed record of a chain's creation: when it was
// created, the hash of its first entry and the key that signed it, signed
// over "countersign.audit.genesis.v1|<created>|<hash>|<key>".
type GenesisRecord struct {
	Created string `json:"created"` // RFC 3339, UTC, whole seconds
	Hash    string `json:"hash"`    // the first entry's hash
	Key     string `json:"key"`     // hex Ed25519 public key
	Sig     string `json:"sig"`
}

func genesisMessage(created, hash, key string) []byte {
	return []byte("countersign.audit.genesis.v1|" + created + "|" + hash + "|" + key)
}

func signGenesis(key ed25519.PrivateKey, now time.Time, hash string) GenesisRecord {
	created := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	return GenesisRecord{Created: created, Hash: hash, Key: pub,
		Sig: hex.EncodeToString(ed25519.Sign(key, genesisMessage(created, hash, pub)))}
}

// verify reports whether the record is signed by the key it names.
func (g GenesisRecord) verify() (ed25519.PublicKey, bool) {
	pub, err := hex.DecodeString(g.Key)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, false
	}
	sig, err := hex.DecodeString(g.Sig)
	if err != nil || !ed25519.Verify(pub, genesisMessage(g.Created, g.Hash, g.Key), sig) {
		return nil, false
	}
	return pub, true
}

// putGenesis writes the genesis record and the first key of the index.
func putGenesis(tx kv.Tx, g GenesisRecord) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketAuditHead, []byte(keyGenesis), b); err != nil {
		return err
	}
	return tx.Put(bucketAuditKeys, kv.U64(1), []byte(g.Key))
}

// GenesisOf reads the genesis record. ok is false for a chain created
// before genesis records were kept, and for an empty store.
func GenesisOf(tx kv.Tx) (g GenesisRecord, ok bool, err error) {
	b, err := tx.Get(bucketAuditHead, []byte(keyGenesis))
	if err != nil || b == nil {
		return GenesisRecord{}, false, err
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return GenesisRecord{}, true, fmt.Errorf("audit genesis: %w", err)
	}
	return g, true, nil
}

// KeySpan is one signing key of the chain and the entries it signed.
type KeySpan struct {
	// PublicKey is the hex Ed25519 public key.
	PublicKey string `json:"public_key"`
	// From and To are the first and last sequence numbers it signed; To is
	// zero while it is the current key of an empty chain.
	From uint64 `json:"from_seq"`
	To   uint64 `json:"to_seq"`
}

// Keys lists the keys the chain has used, oldest first, from the index
// kept beside it (Verify checks the chain itself). A chain created before
// the index was kept has none recorded; current, the key now signing, is
// then listed for the whole chain.
func Keys(tx kv.Tx, current ed25519.PublicKey) ([]KeySpan, error) {
	h, _, err := HeadOf(tx)
	if err != nil {
		return nil, err
	}
	var out []KeySpan
	err = tx.Ascend(bucketAuditKeys, nil, nil, func(k, v []byte) error {
		if len(k) != 8 {
			return nil
		}
		from := kv.ParseU64(k)
		if n := len(out); n > 0 {
			out[n-1].To = from - 1
		}
		out = append(out, KeySpan{PublicKey: string(v), From: from, To: h.Seq})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		first := uint64(1)
		if h.Seq == 0 {
			first = 0
		}
		out = []KeySpan{{PublicKey: hex.EncodeToString(current), From: first, To: h.Seq}}
	}
	return out, nil
}

// RecordKey records pub as the key of a chain created before the key
// index was kept (the caller has checked that pub signs its head).
func RecordKey(tx kv.Tx, pub ed25519.PublicKey) error {
	return tx.Put(bucketAuditKeys, kv.U64(1), []byte(hex.EncodeToString(pub)))
}

// HasChain reports whether the store holds an audit chain (a head, rows, or
// a genesis record).
func HasChain(tx kv.Tx) (bool, error) {
	if _, ok, err := HeadOf(tx); ok || err != nil {
		return true, err
	}
	if _, ok, err := GenesisOf(tx); ok || err != nil {
		return true, err
	}
	return bucketHasKeys(tx, bucketAudit)
}

// Emptied reports whether the store holds state (a key in one of
// stateBuckets, which are written only with an audit entry) or a genesis
// record, but no audit chain: the chain was wiped.
func Emptied(tx kv.Tx, stateBuckets []string) (bool, error) {
	if _, ok, err := HeadOf(tx); ok || err != nil {
		return false, err
	}
	if rows, err := bucketHasKeys(tx, bucketAudit); rows || err != nil {
		return false, err
	}
	if _, ok, err := GenesisOf(tx); ok || err != nil {
		return ok, err
	}
	for _, b := range stateBuckets {
		if has, err := bucketHasKeys(tx, b); err != nil || has {
			return has, err
		}
	}
	return false, nil
}

// SignedBy reports whether the chain's newest head is signed by pub: the
// key a server must hold to go on appending. It is true for an empty chain.
func SignedBy(tx kv.Tx, pub ed25519.PublicKey) (bool, error) {
	h, ok, err := HeadOf(tx)
	if err != nil || !ok {
		return !ok, err
	}
	sig, err := hex.DecodeString(h.Sig)
	return err == nil && ed25519.Verify(pub, headMessage(h.Seq, h.Hash), sig), nil
}

// RotateKey appends the entry that hands the chain from the key old (whose
// private half may be lost) to newKey: its detail links the two public
// keys, and it and every later entry are signed by newKey. why is said in
// the detail after the keys.
func RotateKey(tx kv.Tx, newKey ed25519.PrivateKey, now time.Time, old ed25519.PublicKey, principal, why string) (Entry, error) {
	if len(old) != ed25519.PublicKeySize {
		return Entry{}, errors.New("audit: key rotation without the old public key")
	}
	newPub := newKey.Public().(ed25519.PublicKey)
	if newPub.Equal(old) {
		return Entry{}, errors.New("audit: key rotation to the same key")
	}
	detail := fmt.Sprintf("old ed25519:%x new ed25519:%x", []byte(old), []byte(newPub))
	if why != "" {
		detail += "; " + why
	}
	e, err := Append(tx, newKey, now, Entry{Principal: principal, Action: ActionKeyRotation, Detail: detail})
	if err != nil {
		return Entry{}, err
	}
	return e, tx.Put(bucketAuditKeys, kv.U64(e.Seq), []byte(hex.EncodeToString(newPub)))
}

// parseRotation returns the old and new keys a rotation entry names.
func parseRotation(detail string) (old, new ed25519.PublicKey, ok bool) {
	m := rotationRE.FindStringSubmatch(detail)
	if m == nil {
		return nil, nil, false
	}
	o, _ := hex.DecodeString(m[1])
	n, _ := hex.DecodeString(m[2])
	return o, n, true
}

func bucketHasKeys(tx kv.Tx, bucket string) (bool, error) {
	found := false
	err := tx.Ascend(bucket, nil, nil, func(_, _ []byte) error {
		found = true
		return kv.ErrStop
	})
	return found, err
}
