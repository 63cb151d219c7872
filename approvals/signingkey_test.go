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
		t.Fatalf("a garbled key file: %v, want an error saying %q", err, "does not hold a hex Ed25519 seed")
	}
	if _, err := ReadSigningKey(filepath.Join(dir, "none.key")); err == nil || !strings.Contains(err.Error(), "start the server once") {
		t.Fatalf("ReadSigningKey of a missing file: %v, want it refused, not created", err)
	}
}

// TestPinSigningKey: the first key is recorded; the same key passes again;
// another key is refused, naming both public keys' starts and the fix.
func TestPinSigningKey(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	a := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 1
	b := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	for i, c := range []struct {
		pub     ed25519.PublicKey
		refused bool
	}{{a, false}, {a, false}, {b, true}} {
		err := PinSigningKey(ctx, db, c.pub)
		if got := err != nil; got != c.refused {
			t.Fatalf("pin %d: err %v, want refused=%v", i, err, c.refused)
		}
		if c.refused && !strings.Contains(err.Error(), "give every replica the same key file") {
			t.Fatalf("pin %d: %q, want it to say how to fix it", i, err)
		}
	}
}

// TestCopyKeyFile: a missing target gets the source's key (0600); a target
// with the same key (other whitespace) is left alone; a target with another
// key is refused and kept; a missing source is an error that names it.
func TestCopyKeyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.key")
	if err := os.WriteFile(src, []byte("aa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		have    string // the target's content; "" for no file
		wantErr string
		want    string // the target's content after
	}{
		{"no target", "", "", "aa\n"},
		{"same key", "aa", "", "aa"},
		{"another key", "bb\n", "holds another key than the source's", "bb\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst.key")
			if c.have != "" {
				if err := os.WriteFile(dst, []byte(c.have), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := CopyKeyFile(src, dst)
			if (c.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("CopyKeyFile: %v, want error %q", err, c.wantErr)
			}
			got, err := os.ReadFile(dst)
			if err != nil || string(got) != c.want {
				t.Fatalf("the target holds %q (%v), want %q", got, err, c.want)
			}
			if st, _ := os.Stat(dst); st.Mode().Perm() != 0o600 {
				t.Fatalf("the target's mode is %v, want 0600", st.Mode().Perm())
			}
		})
	}
	if err := CopyKeyFile(filepath.Join(dir, "none.key"), filepath.Join(dir, "dst.key")); err == nil || !strings.Contains(err.Error(), "the source's audit.signing_key") {
		t.Fatalf("a missing source: %v, want an error naming it", err)
	}
}
