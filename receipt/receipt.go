// Package receipt is the format of the signed receipt Countersign issues for
// an approved action request, shared by the server (which signs) and the Go
// client (which verifies offline). It imports only the standard library.
//
// A receipt is two base64url (RFC 4648 §5, no padding) strings joined by a
// dot:
//
//	base64url(payload) "." base64url(signature)
//
// payload is a JSON object (Payload). signature is the Ed25519 signature,
// with the deployment's audit signing key, of the bytes
//
//	"countersign-receipt-v1\n" + base64url(payload)
//
// that is, of the domain-separation prefix followed by the first part of the
// receipt exactly as transmitted, so a verifier never re-encodes JSON.
package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Prefix is the domain-separation prefix of the signed bytes: no other
// message signed with the audit key starts with it.
const Prefix = "countersign-receipt-v1\n"

// Version is the payload version this package writes and accepts.
const Version = 1

// Payload is what a receipt states.
type Payload struct {
	// V is the format version (1).
	V int `json:"v"`
	// Key is the hex SHA-256 of the signing public key, first 16 hex
	// digits: which deployment issued the receipt.
	Key string `json:"key"`
	// RequestID is the approved request (req_…).
	RequestID string `json:"request_id"`
	// Tool is the tool the approval is for.
	Tool string `json:"tool"`
	// ApprovedArgsSHA256 is ArgsHash(Tool, approved arguments).
	ApprovedArgsSHA256 string `json:"approved_args_sha256"`
	// ConfirmedBy names the approvers ("name [id]", comma-separated), or
	// the automatic policy for an auto-approved request.
	ConfirmedBy string `json:"confirmed_by"`
	// Grant is the standing grant that approved the request ("" for none).
	Grant string `json:"grant"`
	// IssuedAt and ExpiresAt are Unix seconds.
	IssuedAt  int64 `json:"issued_at"`
	ExpiresAt int64 `json:"expires_at"`
	// Round is the request's approval round: 0 (and absent) for its first
	// approval, n after it went back for a new decision n times because
	// the facts its approval rested on changed. A receipt of an earlier
	// round never redeems.
	Round int `json:"round,omitempty"`
	// Assurance is how the approval was authenticated: the weakest of
	// the deciding approvers' (api_key, chat, link, oidc, oidc_step_up,
	// passkey). Absent from receipts issued before decisions recorded it,
	// and from an approval by a grant or by policy.
	Assurance string `json:"assurance,omitempty"`
	// BreakGlass marks an approval its requester made themselves as
	// break-glass (break_glass: in config.yaml): no other person approved
	// it, and a review of it is open or done. Absent otherwise.
	BreakGlass bool `json:"break_glass,omitempty"`
}

// Errors a verification returns (wrapped with details).
var (
	ErrMalformed = errors.New("receipt is malformed")
	ErrSignature = errors.New("receipt signature does not verify with this deployment's key")
	ErrExpired   = errors.New("receipt has expired")
)

var b64 = base64.RawURLEncoding

// KeyID is the first 16 hex digits of the SHA-256 of pub.
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

// Sign encodes p and signs it with sign, a function returning the Ed25519
// signature of its argument (for example ed25519.Sign with the key bound).
func Sign(p Payload, sign func(msg []byte) []byte) (string, error) {
	p.V = Version
	raw, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	head := b64.EncodeToString(raw)
	sig := sign([]byte(Prefix + head))
	return head + "." + b64.EncodeToString(sig), nil
}

// Parse decodes a receipt's payload without verifying it.
func Parse(r string) (Payload, error) {
	head, _, ok := strings.Cut(strings.TrimSpace(r), ".")
	if !ok {
		return Payload{}, fmt.Errorf("%w: want base64url(payload).base64url(signature)", ErrMalformed)
	}
	raw, err := b64.DecodeString(head)
	if err != nil {
		return Payload{}, fmt.Errorf("%w: payload is not base64url: %v", ErrMalformed, err)
	}
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Payload{}, fmt.Errorf("%w: payload is not the receipt JSON: %v", ErrMalformed, err)
	}
	if p.V != Version {
		return Payload{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, p.V, Version)
	}
	if p.RequestID == "" || p.Tool == "" || len(p.ApprovedArgsSHA256) != 64 {
		return Payload{}, fmt.Errorf("%w: request_id, tool and approved_args_sha256 are required", ErrMalformed)
	}
	return p, nil
}

// Verify checks r's signature against pub and its expiry against now, and
// returns its payload.
func Verify(r string, pub ed25519.PublicKey, now time.Time) (Payload, error) {
	r = strings.TrimSpace(r)
	p, err := Parse(r)
	if err != nil {
		return Payload{}, err
	}
	if len(pub) != ed25519.PublicKeySize {
		return Payload{}, fmt.Errorf("%w: no valid public key given", ErrSignature)
	}
	head, sigText, _ := strings.Cut(r, ".")
	sig, err := b64.DecodeString(sigText)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Payload{}, fmt.Errorf("%w: signature is not a base64url Ed25519 signature", ErrMalformed)
	}
	if !ed25519.Verify(pub, []byte(Prefix+head), sig) {
		if p.Key != KeyID(pub) {
			return Payload{}, fmt.Errorf("%w: issued by key %s, this deployment's key is %s", ErrSignature, p.Key, KeyID(pub))
		}
		return Payload{}, fmt.Errorf("%w: it was altered after signing", ErrSignature)
	}
	if exp := time.Unix(p.ExpiresAt, 0); !now.Before(exp) {
		return Payload{}, fmt.Errorf("%w: it expired at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// Canonical re-encodes a JSON value with sorted object keys, no
// insignificant white space and no HTML escaping, keeping numbers as
// written: the form the server hashes.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// ArgsHash is the hex SHA-256 of the tool name, a NUL byte and the
// canonical form of args (a JSON value): approved_args_sha256.
func ArgsHash(tool string, args []byte) (string, error) {
	c, err := Canonical(args)
	if err != nil {
		return "", fmt.Errorf("arguments are not JSON: %w", err)
	}
	return HashCanonical(tool, c), nil
}

// HashCanonical is ArgsHash of arguments already in canonical form: the
// hex SHA-256 of the tool name, a NUL byte and canonicalArgs. It binds an
// approval to one exact call; the server stores it as args_sha256.
func HashCanonical(tool string, canonicalArgs []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonicalArgs)
	return hex.EncodeToString(h.Sum(nil))
}
