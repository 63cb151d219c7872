package bot

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
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
		t.Fatalf("shown secret %q decodes to %d bytes, %v; want 32 bytes", shown, len(secret), err)
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
		t.Fatalf("stored %x, want it sealed (prefix %x) and without the secret %x", v, sealedPrefix, secret)
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
		t.Fatalf("a plaintext row: %x, %v; want %x", got, err, old)
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
		t.Fatalf("the sealed older secret: %x, %v; want %x", got, err, old)
	}
}

// TestRotateCallbackSecretByName: a name is the one active principal of
// that name (PrincipalByName): a revoked namesake is skipped, nobody is
// not found, and a name two active principals share names neither, so no
// secret of theirs is replaced. A rotation replaces the secret (the old one
// no longer opens) and is audited with how it was asked for (via cli).
func TestRotateCallbackSecretByName(t *testing.T) {
	b := newTestBot(t)
	ctx := context.Background()
	now := b.Now()
	ids := map[string]string{}
	if err := b.Update(ctx, b.SystemCall(now), func(tx *Tx) error {
		for _, n := range []string{"ward_bot", "old_bot", "old_bot", "twin", "twin"} {
			p, _, err := CreatePrincipal(tx, now, n, policy.RoleAgent, "agent", nil)
			if err != nil {
				return err
			}
			if n == "old_bot" && ids[n] == "" {
				p.Revoked = true // the first old_bot: revoked, so the second is the one
				if err := SavePrincipal(tx, p); err != nil {
					return err
				}
			}
			ids[n] = p.ID // old_bot: the active one
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	secretOf := func(id string) []byte {
		var got []byte
		_ = b.store.View(ctx, func(tx kv.Tx) error {
			var err error
			got, err = b.CallbackSecretOf(tx, id)
			return err
		})
		return got
	}
	for _, tc := range []struct {
		name, via string
		wantKind  Kind // 0: rotated
	}{
		{"ward_bot", "cli", 0}, {"old_bot", "", 0}, {"nobody", "", KindNotFound}, {"twin", "cli", KindConflict},
	} {
		before := secretOf(ids[tc.name])
		var p Principal
		var shown string
		err := b.Update(ctx, b.SystemCall(now), func(tx *Tx) error {
			var err error
			p, shown, err = RotateCallbackSecret(tx, tc.name, tc.via)
			return err
		})
		if tc.wantKind != 0 {
			if KindOf(err) != tc.wantKind || shown != "" {
				t.Errorf("rotate %s: %q, %v (kind %v), want kind %v and no secret", tc.name, shown, err, KindOf(err), tc.wantKind)
			}
			continue
		}
		after := secretOf(p.ID)
		if err != nil || p.ID != ids[tc.name] || !strings.HasPrefix(shown, "whsec_") || after == nil || bytes.Equal(before, after) {
			t.Errorf("rotate %s: %s %q %v, want %s with a new secret", tc.name, p.ID, shown, err, ids[tc.name])
		}
	}
	if s := secretOf(ids["twin"]); s != nil {
		t.Errorf("a twin's secret was set by a rotation that named both")
	}
	var audit bytes.Buffer
	if _, err := approvals.Export(ctx, b.store, &audit); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{ids["ward_bot"] + ` \"ward_bot\" via cli`, ids["old_bot"] + ` \"old_bot\"`} {
		if !strings.Contains(audit.String(), want) {
			t.Errorf("the audit does not record the rotation %s:\n%s", want, audit.String())
		}
	}
	if strings.Contains(audit.String(), ids["old_bot"]+` \"old_bot\" via`) {
		t.Errorf("the tool's rotation is audited with a via it was not asked for:\n%s", audit.String())
	}
}
