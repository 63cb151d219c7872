package bot

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/kv"
)

// bucketCallbackSecrets holds each principal's callback signing secret:
// principal id -> the secret, sealed (AES-256-GCM, the principal id as
// additional data) with a key derived from the audit signing key, which
// is kept beside the store, never in it. A copy of the store file alone
// therefore signs no callback; a row written before secrets were sealed
// (the secret's bytes as they are) keeps working and is sealed at the next
// start (SealCallbackSecrets). The bucket is apart from the principal
// records so that no listing of principals can show it.
const bucketCallbackSecrets = "callback_secrets"

// sealedPrefix starts a sealed secret; a plaintext secret (32 random
// bytes) starts with it by chance with probability 2^-112.
var sealedPrefix = []byte("\x00cs-sealed-v1\x00")

// ErrSecretSealedElsewhere is the error of a callback secret that was
// sealed under another audit signing key (the key was replaced with
// --new-signing-key): it cannot be read; rotate it.
var ErrSecretSealedElsewhere = errors.New("the callback secret was sealed with another audit signing key (the key was replaced): rotate it with `countersign keys rotate-callback-secret --name NAME` or the rotate_callback_secret tool")

// callbackAEAD is the cipher that seals callback secrets: AES-256-GCM
// under HMAC-SHA256(the signing key's seed, a fixed label).
func (b *Bot) callbackAEAD() (cipher.AEAD, error) {
	m := hmac.New(sha256.New, b.key.Seed())
	m.Write([]byte("countersign callback secrets v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealSecret seals secret for principal id.
func (b *Bot) sealSecret(id string, secret []byte) ([]byte, error) {
	aead, err := b.callbackAEAD()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append(bytes.Clone(sealedPrefix), nonce...)
	return aead.Seal(out, nonce, secret, []byte(id)), nil
}

// openSecret reads a stored secret of principal id: sealed, or a plaintext
// row from before secrets were sealed.
func (b *Bot) openSecret(id string, v []byte) ([]byte, error) {
	rest, sealed := bytes.CutPrefix(v, sealedPrefix)
	if !sealed {
		return bytes.Clone(v), nil
	}
	aead, err := b.callbackAEAD()
	if err != nil {
		return nil, err
	}
	if len(rest) < aead.NonceSize() {
		return nil, ErrSecretSealedElsewhere
	}
	secret, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, ErrSecretSealedElsewhere
	}
	return secret, nil
}

// NewCallbackSecret makes a new callback signing secret for principal id,
// replacing any it had, stores it sealed and returns it in the Standard
// Webhooks form ("whsec_" + base64 of 32 random bytes). It is shown once:
// callbacks of the principal's requests are signed with it from the next
// delivery on.
func (tx *Tx) NewCallbackSecret(id string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	sealed, err := tx.call.bot.sealSecret(id, b[:])
	if err != nil {
		return "", err
	}
	if err := tx.Put(bucketCallbackSecrets, []byte(id), sealed); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:]), nil
}

// CallbackSecretOf returns principal id's callback signing secret, or nil
// when it has none (a principal created before per-principal secrets), or
// ErrSecretSealedElsewhere.
func (b *Bot) CallbackSecretOf(tx kv.Tx, id string) ([]byte, error) {
	v, err := tx.Get(bucketCallbackSecrets, []byte(id))
	if err != nil || v == nil {
		return nil, err
	}
	return b.openSecret(id, v)
}

// SealCallbackSecrets seals every callback secret still stored as it is
// (written before secrets were sealed) and returns how many it sealed.
// serve calls it at start; running it again seals nothing.
func (b *Bot) SealCallbackSecrets(ctx context.Context) (int, error) {
	var n int
	err := b.store.Update(ctx, func(tx kv.Tx) error {
		n = 0
		type row struct{ id, secret []byte }
		var plain []row
		err := tx.Ascend(bucketCallbackSecrets, nil, nil, func(k, v []byte) error {
			if !bytes.HasPrefix(v, sealedPrefix) {
				plain = append(plain, row{bytes.Clone(k), bytes.Clone(v)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range plain {
			sealed, err := b.sealSecret(string(r.id), r.secret)
			if err != nil {
				return err
			}
			if err := tx.Put(bucketCallbackSecrets, r.id, sealed); err != nil {
				return err
			}
		}
		n = len(plain)
		return nil
	})
	return n, err
}

// PrincipalByName returns the one active (not revoked) principal called
// name: the one answer to "which stored principal is this name" for every
// command and tool that takes a name. None is a KindNotFound error; a name
// that two active principals share names neither, a KindConflict error
// that lists their ids, so that no command acts on a guess.
func PrincipalByName(tx kv.Tx, name string) (*Principal, error) {
	ps, err := ListPrincipals(tx)
	if err != nil {
		return nil, err
	}
	var found *Principal
	var ids []string
	for i := range ps {
		if ps[i].Name == name && !ps[i].Revoked {
			found = &ps[i]
			ids = append(ids, ps[i].ID)
		}
	}
	switch len(ids) {
	case 0:
		return nil, Errorf(KindNotFound, "no active principal is named '%s'; list_principals lists them", name)
	case 1:
		return found, nil
	}
	return nil, Errorf(KindConflict, "%d active principals are named '%s' (%s): a name two principals share names neither; revoke all but one (revoke_principal with its id)", len(ids), name, strings.Join(ids, ", "))
}

// RotateCallbackSecret replaces the callback signing secret of the
// principal called name (PrincipalByName) and audits it, with via ("" for
// the tool, "cli" for the command); it returns the principal and the new
// secret, shown once. Callbacks of its requests are signed with it from the
// next delivery on; the old one stops verifying.
func RotateCallbackSecret(tx *Tx, name, via string) (Principal, string, error) {
	p, err := PrincipalByName(tx, name)
	if err != nil {
		return Principal{}, "", err
	}
	secret, err := tx.NewCallbackSecret(p.ID)
	if err != nil {
		return Principal{}, "", err
	}
	what := fmt.Sprintf("%s %q", p.ID, p.Name)
	if via != "" {
		what += " via " + via
	}
	return *p, secret, tx.Audit("rotate_callback_secret", what)
}
