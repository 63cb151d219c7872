package approvals

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

// TestOpenSigningKeyLifecycle: a new store gets a new key file (0600); a
// store with a chain opens only with the key that signs it (a missing or
// other key is refused, naming the setting and the flag); Rotate moves the
// chain to the file's key with a signed entry, and refuses a key that
// already signs; a chain emptied under its state is refused.
func TestOpenSigningKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.key")
	f := KeyFile{Path: path, StateBuckets: []string{"state"}, Principal: "countersign [system]", Now: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}

	key, err := OpenSigningKey(ctx, db, f)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the new key file: %v %v, want mode 0600", st, err)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if err := RecordKey(tx, key.Public().(ed25519.PublicKey)); err != nil {
			return err
		}
		_, err := Append(tx, key, f.Now, Entry{Principal: "alice", Action: "remember", Detail: "x"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if again, err := OpenSigningKey(ctx, db, f); err != nil || !again.Equal(key) {
		t.Fatalf("reopening with the chain's key: %v, want the same key", err)
	}

	other := filepath.Join(dir, "other.key")
	wrong := f
	wrong.Path = other
	if _, err := OpenSigningKey(ctx, db, wrong); err == nil || !strings.Contains(err.Error(), "audit.signing_key: no key at "+other) || !strings.Contains(err.Error(), "--new-signing-key") {
		t.Fatalf("a missing key over a chain: %v, want the refusal naming audit.signing_key and --new-signing-key", err)
	}
	if _, err := LoadSigningKey(other); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSigningKey(ctx, db, wrong); err == nil || !strings.Contains(err.Error(), "does not sign this store's audit chain") {
		t.Fatalf("another key: %v, want it refused", err)
	}

	wrong.Rotate = true
	rotated, err := OpenSigningKey(ctx, db, wrong)
	if err != nil {
		t.Fatalf("rotating: %v", err)
	}
	var signed bool
	if err := db.View(ctx, func(tx kv.Tx) error {
		signed, err = SignedBy(tx, rotated.Public().(ed25519.PublicKey))
		return err
	}); err != nil || !signed {
		t.Fatalf("after the rotation the new key signs the chain: %v %v, want true", signed, err)
	}
	if _, err := OpenSigningKey(ctx, db, wrong); err == nil || !strings.Contains(err.Error(), "already signs the audit chain") {
		t.Fatalf("rotating to the key that signs: %v, want it refused", err)
	}

	wiped := openStore(t)
	if err := wiped.Update(ctx, func(tx kv.Tx) error { return tx.Put("state", []byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSigningKey(ctx, wiped, f); err == nil || !strings.Contains(err.Error(), "the chain was emptied") {
		t.Fatalf("state without a chain: %v, want the emptied chain refused", err)
	}
	if err := os.WriteFile(other, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSigningKey(other); err == nil || !strings.Contains(err.Error(), "does not hold a hex Ed25519 seed") {
		t.Fatalf("a garbled key file: %v", err)
	}
	if _, err := ReadSigningKey(filepath.Join(dir, "none.key")); err == nil || !strings.Contains(err.Error(), "start the server once") {
		t.Fatalf("ReadSigningKey of a missing file: %v, want it refused, not created", err)
	}
}
