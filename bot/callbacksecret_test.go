package bot

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/kv"
)

// TestCallbackSecretsAreSealed: a callback secret is stored sealed under
// a key derived from the audit signing key, so the store alone does not
// give it away; it opens only for its own principal and key; a plaintext
// row of an older store keeps working and is sealed once.
func TestCallbackSecretsAreSealed(t *testing.T) {
	b := newTestBot(t)
	ctx := context.Background()
	var shown string
	if err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *Tx) error {
		var err error
		shown, err = tx.NewCallbackSecret("prin_a")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(shown, "whsec_"))
	if err != nil || len(secret) != 32 {
		t.Fatalf("shown secret %q: %v", shown, err)
	}
	raw := func(id string) []byte {
		var v []byte
		_ = b.store.View(ctx, func(tx kv.Tx) error {
			var err error
			v, err = tx.Get(bucketCallbackSecrets, []byte(id))
			return err
		})
		return v
	}
	if v := raw("prin_a"); bytes.Contains(v, secret) || !bytes.HasPrefix(v, sealedPrefix) {
		t.Fatalf("stored %x: the secret %x is readable from the store", v, secret)
	}
	read := func(b *Bot, id string) ([]byte, error) {
		var got []byte
		err := b.store.View(ctx, func(tx kv.Tx) error {
			var err error
			got, err = b.CallbackSecretOf(tx, id)
			return err
		})
		return got, err
	}
	if got, err := read(b, "prin_a"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("CallbackSecretOf = %x, %v; want the secret shown", got, err)
	}
	// Moved to another principal, or read with another signing key: refused.
	sealed := raw("prin_a")
	if err := b.store.Update(ctx, func(tx kv.Tx) error { return tx.Put(bucketCallbackSecrets, []byte("prin_b"), sealed) }); err != nil {
		t.Fatal(err)
	}
	if _, err := read(b, "prin_b"); !errors.Is(err, ErrSecretSealedElsewhere) {
		t.Fatalf("a sealed secret copied to another principal: %v, want ErrSecretSealedElsewhere", err)
	}
	other, err := New(Options{Store: b.store, SigningKey: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(other, "prin_a"); !errors.Is(err, ErrSecretSealedElsewhere) {
		t.Fatalf("read with another signing key: %v, want ErrSecretSealedElsewhere", err)
	}
	// A plaintext row (an older store) is read as it is, then sealed once.
	old := bytes.Repeat([]byte{0x5a}, 32)
	if err := b.store.Update(ctx, func(tx kv.Tx) error { return tx.Put(bucketCallbackSecrets, []byte("prin_old"), old) }); err != nil {
		t.Fatal(err)
	}
	if got, err := read(b, "prin_old"); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("a plaintext row: %x, %v", got, err)
	}
	if n, err := b.SealCallbackSecrets(ctx); err != nil || n != 1 {
		t.Fatalf("SealCallbackSecrets = %d, %v; want 1 sealed", n, err)
	}
	if n, err := b.SealCallbackSecrets(ctx); err != nil || n != 0 {
		t.Fatalf("SealCallbackSecrets again = %d, %v; want 0", n, err)
	}
	if v := raw("prin_old"); bytes.Contains(v, old) {
		t.Fatal("the plaintext row is still plaintext")
	}
	if got, err := read(b, "prin_old"); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("the sealed older secret: %x, %v", got, err)
	}
}
