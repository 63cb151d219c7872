package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// A sealed value is kept by the browser instead of the store: JSON
// encrypted and authenticated with AES-256-GCM under a key derived from
// the link key for one purpose, so that only this server (or a replica
// with the same signing key) can make or read one, and one made for a
// purpose never passes for another. It is how a request without a session
// keeps state (a started OIDC sign-in) without a durable write.

// maxSealed bounds a sealed value's text, under a browser's 4096-byte
// cookie limit with the cookie's name and attributes.
const maxSealed = 3000

type sealer struct {
	aead    cipher.AEAD
	purpose []byte
}

func newSealer(linkKey []byte, purpose string) (*sealer, error) {
	m := hmac.New(sha256.New, linkKey)
	m.Write([]byte("countersign web sealed v1\x00" + purpose))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, purpose: []byte(purpose)}, nil
}

// seal returns v sealed, as cookie-safe text.
func (s *sealer) seal(v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, s.purpose)), nil
}

// open reads text sealed by seal into v; false when it is not one of ours
// (altered, truncated, another purpose or key).
func (s *sealer) open(text string, v any) bool {
	if text == "" || len(text) > maxSealed {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return false
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], s.purpose)
	if err != nil {
		return false
	}
	return json.Unmarshal(plain, v) == nil
}
