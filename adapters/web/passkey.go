package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/countersign/countersign/kv"
)

// Passkeys: a person registers a passkey (WebAuthn) in the console, after
// a fresh sign-in at the identity provider, and then steps up with it to
// approve an item that needs a fresh authentication. A passkey step-up
// counts as the assurance "passkey" for that one item only (session.Passkey
// names it); every ceremony's challenge is kept in the session that began
// it, for one purpose and one item, and is used once. User verification
// is required at registration and at every use, the authenticator's sign
// count must move forward, and a principal the console refuses (revoked,
// suspended, deactivated by the directory) never reaches a passkey at all:
// resolve refuses the session first.

// Buckets of passkeys.
const (
	// bucketPasskeys: kv.Join(session ref, credential id) -> passkeyRecord JSON.
	bucketPasskeys = "web_passkeys"
	// bucketPasskeyIDs: credential id -> session ref (one principal each).
	bucketPasskeyIDs = "web_passkey_ids"
	// bucketPasskeyUsers: session ref -> the principal's WebAuthn user handle.
	bucketPasskeyUsers = "web_passkey_users"
)

// Passkeys configures passkeys (WebAuthn) for step-up: web.passkeys.
type Passkeys struct {
	// RPID is the relying party id: the console's host name, or a domain
	// it is under ("countersign.hospital.example", "localhost"). A
	// passkey works only on origins under it.
	RPID string
	// Origins are the origins a browser may report ("https://host[:port]");
	// empty: Options.PublicURL, else the request's own origin.
	Origins []string
	// DisplayName is the name the browser shows for the console (default
	// "Countersign").
	DisplayName string
}

// Bounds of passkeys.
const (
	// PasskeyRegisterWithin is how recent the OIDC sign-in of the session
	// must be to register a passkey in it.
	PasskeyRegisterWithin = 5 * time.Minute
	// passkeyCeremonyTTL is how long a begun ceremony's challenge is valid.
	passkeyCeremonyTTL = 3 * time.Minute
	// maxPasskeys is how many passkeys one principal may hold.
	maxPasskeys = 10
	// maxPasskeyLabel bounds a passkey's label.
	maxPasskeyLabel = 64
)

// passkeyRecord is a registered passkey as stored.
type passkeyRecord struct {
	Ref        string              `json:"ref"`  // the session ref of its principal
	Name       string              `json:"name"` // the principal's name when registered
	Label      string              `json:"label"`
	Created    time.Time           `json:"created"`
	LastUsed   time.Time           `json:"last_used,omitzero"`
	Credential webauthn.Credential `json:"credential"`
}

// idText is the credential id as the console names it (base64url).
func (p passkeyRecord) idText() string {
	return base64.RawURLEncoding.EncodeToString(p.Credential.ID)
}

// ceremony is a passkey ceremony begun in a session: its challenge and
// what it is for. It is taken out of the session by the request that
// finishes it, whatever the outcome, so it is used once.
type ceremony struct {
	Purpose string               `json:"purpose"` // ceremonyRegister or ceremonyStepUp
	Item    uint64               `json:"item,omitempty"`
	Origin  string               `json:"origin"`
	Label   string               `json:"label,omitempty"`
	Expires time.Time            `json:"expires"`
	Data    webauthn.SessionData `json:"data"`
}

const (
	ceremonyRegister = "register"
	ceremonyStepUp   = "step_up"
)

// passkeyStepUp is a session's last passkey step-up: for one item, at At.
type passkeyStepUp struct {
	Item  uint64    `json:"item"`
	At    time.Time `json:"at"`
	Label string    `json:"label"`
}

// passkeyUser is a principal as the WebAuthn library sees it.
type passkeyUser struct {
	handle []byte
	name   string
	creds  []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return u.handle }
func (u passkeyUser) WebAuthnName() string                       { return u.name }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.name }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// passkeyKey is a passkey's key in bucketPasskeys.
func passkeyKey(ref string, id []byte) []byte { return kv.Join([]byte(ref), id) }

// loadPasskeys returns ref's passkeys, oldest key first.
func loadPasskeys(tx kv.Tx, ref string) ([]passkeyRecord, error) {
	var out []passkeyRecord
	err := kv.Prefix(tx, bucketPasskeys, append([]byte(ref), 0), func(_, v []byte) error {
		var p passkeyRecord
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("web: a stored passkey: %w", err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// allPasskeys returns every principal's passkeys (an admin's list).
func allPasskeys(tx kv.Tx) ([]passkeyRecord, error) {
	var out []passkeyRecord
	err := tx.Ascend(bucketPasskeys, nil, nil, func(_, v []byte) error {
		var p passkeyRecord
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("web: a stored passkey: %w", err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// savePasskey stores p (new or updated).
func savePasskey(tx kv.Tx, p passkeyRecord) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketPasskeyIDs, p.Credential.ID, []byte(p.Ref)); err != nil {
		return err
	}
	return tx.Put(bucketPasskeys, passkeyKey(p.Ref, p.Credential.ID), b)
}

// errNoPasskey: the passkey is not (or no longer) registered.
var errNoPasskey = errors.New("web: no such passkey")

// removePasskey deletes ref's passkey id and returns it.
func removePasskey(tx kv.Tx, ref string, id []byte) (passkeyRecord, error) {
	b, err := tx.Get(bucketPasskeys, passkeyKey(ref, id))
	if err != nil {
		return passkeyRecord{}, err
	}
	if b == nil {
		return passkeyRecord{}, errNoPasskey
	}
	var p passkeyRecord
	if err := json.Unmarshal(b, &p); err != nil {
		return passkeyRecord{}, err
	}
	if err := tx.Delete(bucketPasskeys, passkeyKey(ref, id)); err != nil {
		return passkeyRecord{}, err
	}
	return p, tx.Delete(bucketPasskeyIDs, id)
}

// passkeyHandle returns ref's WebAuthn user handle, creating a random one
// when create is set and there is none (nil otherwise).
func passkeyHandle(tx kv.Tx, ref string, create bool) ([]byte, error) {
	h, err := tx.Get(bucketPasskeyUsers, []byte(ref))
	if err != nil || h != nil || !create {
		return h, err
	}
	tok, err := randomToken(32)
	if err != nil {
		return nil, err
	}
	h = []byte(tok)
	return h, tx.Put(bucketPasskeyUsers, []byte(ref), h)
}

// passkeyUserOf is ref's WebAuthn user: its handle and its passkeys.
func passkeyUserOf(tx kv.Tx, ref, name string, create bool) (passkeyUser, []passkeyRecord, error) {
	handle, err := passkeyHandle(tx, ref, create)
	if err != nil {
		return passkeyUser{}, nil, err
	}
	recs, err := loadPasskeys(tx, ref)
	if err != nil {
		return passkeyUser{}, nil, err
	}
	u := passkeyUser{handle: handle, name: name}
	for _, p := range recs {
		u.creds = append(u.creds, p.Credential)
	}
	return u, recs, nil
}

// relyingParty is the WebAuthn relying party for a ceremony at origin.
func (h *Handler) relyingParty(origin string) (*webauthn.WebAuthn, error) {
	pk := h.o.Passkeys
	name := pk.DisplayName
	if name == "" {
		name = "Countersign"
	}
	return webauthn.New(&webauthn.Config{
		RPID:          pk.RPID,
		RPDisplayName: name,
		RPOrigins:     []string{origin},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationRequired,
		},
		AttestationPreference: protocol.PreferNoAttestation,
	})
}

// passkeyOrigin is the origin a ceremony must come from, or why it may
// not happen at this origin.
func (h *Handler) passkeyOrigin(origin string) (string, string) {
	allowed := h.o.Passkeys.Origins
	if len(allowed) == 0 && h.o.PublicURL != "" {
		allowed = []string{h.o.PublicURL}
	}
	if len(allowed) == 0 {
		return origin, ""
	}
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimRight(a, "/"), origin) {
			return origin, ""
		}
	}
	return "", fmt.Sprintf("Passkeys work only at %s (web.passkeys.origins), and this page is at %s. Open the console there and try again.", strings.Join(allowed, ", "), origin)
}

// ValidatePasskeys checks passkey options as New takes them, with the
// console's public URL (the origin when pk names none).
func ValidatePasskeys(pk *Passkeys, publicURL string) error {
	if strings.TrimSpace(pk.RPID) == "" {
		return errors.New("rp_id is required: the console's host name, for example countersign.hospital.example")
	}
	if err := protocol.ValidateRPID(pk.RPID); err != nil {
		return fmt.Errorf("rp_id %q is not a domain name (%v); use the console's host name, for example countersign.hospital.example", pk.RPID, err)
	}
	origins := pk.Origins
	if len(origins) == 0 && publicURL != "" {
		origins = []string{publicURL}
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("origin %q is not an origin; use scheme, host and port only, for example https://countersign.hospital.example", o)
		}
		if host := strings.ToLower(u.Hostname()); host != strings.ToLower(pk.RPID) && !strings.HasSuffix(host, "."+strings.ToLower(pk.RPID)) {
			return fmt.Errorf("origin %s is not under the relying party id %s: browsers refuse a passkey there; set rp_id to its host name or a domain it is under", o, pk.RPID)
		}
	}
	return nil
}

// takeCeremony removes the session's ceremony in tx and returns it
// (nil: none), so that its challenge is used once whatever follows.
func takeCeremony(tx kv.Tx, tok string) (*session, *ceremony, error) {
	s, err := sessionIn(tx, tok)
	if err != nil || s == nil {
		return s, nil, err
	}
	c := s.Ceremony
	if c == nil {
		return s, nil, nil
	}
	s.Ceremony = nil
	return s, c, putSession(tx, tok, s)
}

// sessionIn reads the session of tok in tx (nil: none).
func sessionIn(tx kv.Tx, tok string) (*session, error) {
	b, err := tx.Get(bucketSessions, tokenKey(tok))
	if err != nil || b == nil {
		return nil, err
	}
	s := &session{}
	return s, json.Unmarshal(b, s)
}

// putSession writes s as the session of tok in tx.
func putSession(tx kv.Tx, tok string, s *session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Put(bucketSessions, tokenKey(tok), b)
}

// passkeyCount is how many passkeys ref holds.
func (h *Handler) passkeyCount(ctx context.Context, ref string) (int, error) {
	n := 0
	err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
		n = 0
		return kv.Prefix(tx, bucketPasskeys, append([]byte(ref), 0), func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

// sameCredential reports whether a and b name one credential.
func sameCredential(a, b []byte) bool { return len(a) > 0 && bytes.Equal(a, b) }
