package approvals

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
)

// KeyFile is the audit chain's signing key file (audit.signing_key) and
// what a start may do with it.
type KeyFile struct {
	// Path holds the key: the hex Ed25519 seed, one line.
	Path string
	// Rotate is serve's --new-signing-key: the key at Path (created when
	// missing) replaces the one that signs the chain, with a signed entry
	// linking the two public keys.
	Rotate bool
	// StateBuckets are the buckets written only in the same transaction
	// as an audit entry (Emptied): one of them holding data without a
	// chain means the chain was emptied, and nothing starts over it.
	StateBuckets []string
	// Principal is who a rotation's audit entry names.
	Principal string
	// Now is when a rotation happens (its entry's time).
	Now time.Time
}

// OpenSigningKey returns the audit signing key for db, a store open for
// writing: the signing key's whole lifecycle at a start. A new store gets
// a new key (created on first start). A store that already holds a chain
// gets only the key that signs it: a missing or different key file is
// refused, unless f.Rotate, which rotates to the key in the file (a new
// one when there is none) with a signed entry linking the old and the new
// public key. A chain from before the key index gets its key recorded.
// The errors name the setting (audit.signing_key) or the flag to change.
func OpenSigningKey(ctx context.Context, db kv.Store, f KeyFile) (ed25519.PrivateKey, error) {
	path := f.Path
	var hasChain, emptied bool
	var spans []KeySpan
	err := db.View(ctx, func(tx kv.Tx) error {
		var err error
		if emptied, err = Emptied(tx, f.StateBuckets); err != nil || emptied {
			return err
		}
		if hasChain, err = HasChain(tx); err != nil || !hasChain {
			return err
		}
		spans, err = Keys(tx, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	if emptied {
		return nil, errors.New("store.path: the store holds principals, requests or facts but no audit chain: the chain was emptied. " +
			"Countersign does not start a new chain over a wiped one. Restore the store from a backup, and run `countersign audit verify --config FILE`")
	}
	if !hasChain {
		return LoadSigningKey(path)
	}
	chainKey := spans[len(spans)-1].PublicKey // "" for a chain that never recorded its key
	named := "its newest head"
	if chainKey != "" {
		named = "key " + chainKey
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !f.Rotate {
		return nil, fmt.Errorf("audit.signing_key: no key at %s, but the store already holds an audit chain signed by %s. "+
			"Restore the key file from your backup and start again. If the key is lost, start once with "+
			"`countersign serve --config FILE --new-signing-key`: it creates a new key and appends a signed entry "+
			"linking the old public key to the new one (the old entries keep verifying with the old key; "+
			"auditors who pin keys must add the new one; see docs/audit.md, \"Key rotation\")", path, named)
	}
	key, err := LoadSigningKey(path)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	var signed bool
	if err := db.View(ctx, func(tx kv.Tx) error {
		signed, err = SignedBy(tx, pub)
		return err
	}); err != nil {
		return nil, err
	}
	switch {
	case signed && f.Rotate:
		return nil, fmt.Errorf("--new-signing-key: the key at %s already signs the audit chain; to retire it, move the file aside first (keep it until auditors have the new public key)", path)
	case signed:
		if chainKey == "" { // a chain from before the key index: record its key now
			err := db.Update(ctx, func(tx kv.Tx) error { return RecordKey(tx, pub) })
			return key, err
		}
		return key, nil
	case !f.Rotate:
		return nil, fmt.Errorf("audit.signing_key: the key at %s (public key %x) does not sign this store's audit chain (signed by %s); "+
			"point audit.signing_key at the chain's key, or start once with `countersign serve --config FILE --new-signing-key` "+
			"to rotate to this key with a signed entry in the chain (docs/audit.md, \"Key rotation\")", path, []byte(pub), named)
	case chainKey == "":
		return nil, fmt.Errorf("--new-signing-key: this chain was created before Countersign recorded its keys, so the old public key is unknown; restore the old key file and start once with it, then rotate")
	}
	old, _ := hex.DecodeString(chainKey)
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	err = db.Update(ctx, func(tx kv.Tx) error {
		_, err := RotateKey(tx, key, now, old, f.Principal, "rotated with --new-signing-key")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--new-signing-key: %w", err)
	}
	return key, nil
}

// ReadSigningKey reads the hex Ed25519 seed at path and never creates one:
// for commands that only use the key (web link), where a new key file would
// later stop serve, whose store is signed by another key.
func ReadSigningKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("audit.signing_key: no key at %s: start the server once (it creates the key), or point audit.signing_key at the key the store is signed with", path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit.signing_key: %w", err)
	}
	return parseSigningKey(path, b)
}

// LoadSigningKey reads the hex Ed25519 seed at path, creating it with mode
// 0600 when it does not exist.
func LoadSigningKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit.signing_key: create %s: %w", path, err)
		}
		if _, err := f.WriteString(hex.EncodeToString(seed) + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("audit.signing_key: write %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit.signing_key: %w", err)
	}
	return parseSigningKey(path, b)
}

// parseSigningKey decodes the content of a signing key file.
func parseSigningKey(path string, b []byte) (ed25519.PrivateKey, error) {
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("audit.signing_key: %s does not hold a hex Ed25519 seed of %d bytes", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// The shared store's record of the chain's public key (PinSigningKey).
const (
	bucketStoreMeta = "store_meta"
	keyPinnedPublic = "audit_pubkey"
)

// PinSigningKey records pub, the public half of the audit signing key, in
// a store that replicas share, on its first start, and refuses a key that
// differs from the one recorded: every replica appends to one chain, which
// verifies under one key.
func PinSigningKey(ctx context.Context, db kv.Store, pub ed25519.PublicKey) error {
	want := []byte(hex.EncodeToString(pub))
	return db.Update(ctx, func(tx kv.Tx) error {
		have, err := tx.Get(bucketStoreMeta, []byte(keyPinnedPublic))
		if err != nil {
			return err
		}
		if have == nil {
			return tx.Put(bucketStoreMeta, []byte(keyPinnedPublic), want)
		}
		if string(have) != string(want) {
			return fmt.Errorf("audit.signing_key: this key (public %.16s…) is not the one the database's audit chain is signed with (public %.16s…); give every replica the same key file", want, have)
		}
		return nil
	})
}

// CopyKeyFile gives the key file dst the key in the file src, for a copy
// of the store whose chain src's key signs: dst is written (mode 0600)
// when it does not exist, left alone when it holds the same key, and
// refused when it holds another (the copied chain verifies only under
// src's key). The same path is nothing to do.
func CopyKeyFile(src, dst string) error {
	if src == dst {
		return nil
	}
	want, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("the source's audit.signing_key: %w", err)
	}
	have, err := os.ReadFile(dst)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(dst, want, 0o600); err != nil {
			return fmt.Errorf("the target's audit.signing_key: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("the target's audit.signing_key: %w", err)
	}
	if strings.TrimSpace(string(have)) != strings.TrimSpace(string(want)) {
		return fmt.Errorf("the target's audit.signing_key %s holds another key than the source's %s; the copied chain verifies only under the source's key: point audit.signing_key at it", dst, src)
	}
	return nil
}
