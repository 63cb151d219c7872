package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Buckets of the web console.
const (
	bucketSessions  = "web_sessions"   // sha256(session token) -> session JSON
	bucketLinksUsed = "web_links_used" // link nonce -> expiry (unix seconds, big-endian)
	// bucketOIDC held started OIDC sign-ins (state -> JSON) before they
	// moved into a sealed cookie (oidc.go); nothing writes it now, and
	// Prune deletes what an older version left.
	bucketOIDC = "web_oidc"
)

// LinkTTL is how long a one-time sign-in link is valid.
const LinkTTL = 5 * time.Minute

// Person is a principal declared in the configuration who may sign in.
type Person struct {
	// Principal is the person as configured: Name, Role and Scopes (its
	// ID and Kind are set when it signs in).
	bot.Principal
	Web string // the OIDC claim value that signs in as this person
}

// PeopleOf are the configured people of d, by name, as the console signs
// them in (Options.People).
func PeopleOf(d *bot.Directory) map[string]Person {
	out := map[string]Person{}
	for _, p := range d.People() {
		out[p.Name] = Person{Principal: p.WebPrincipal(), Web: strings.TrimSpace(p.Web)}
	}
	return out
}

// session is the server-side record of a signed-in browser.
type session struct {
	Ref     string    `json:"ref"` // c:<name> (configured person) or p:<principal id> (stored)
	Name    string    `json:"name"`
	CSRF    string    `json:"csrf"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Via     string    `json:"via"` // link or oidc
	// AuthAt is the ID token's auth_time of an OIDC sign-in (when the
	// person last authenticated at the provider), AuthMethod "oidc"; zero
	// for a link. Step-up checks it (bot.Caller.AuthAt).
	AuthAt     time.Time `json:"auth_at,omitzero"`
	AuthMethod string    `json:"auth_method,omitempty"`
	// Groups are the ID token's groups claim of an OIDC sign-in: approver
	// groups (groups: in config.yaml) the provider asserts; none for a
	// link. The one decision rule reads them as bot.Caller.Groups.
	Groups []string `json:"groups,omitempty"`
	// Ceremony is the passkey ceremony begun in this session, used once
	// (passkey.go); Passkey is its last passkey step-up, for one item.
	Ceremony *ceremony      `json:"ceremony,omitempty"`
	Passkey  *passkeyStepUp `json:"passkey,omitempty"`
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func tokenKey(tok string) []byte {
	sum := sha256.Sum256([]byte(tok))
	return []byte(hex.EncodeToString(sum[:]))
}

// errSignIn is a sign-in refusal shown to the person as it is.
type errSignIn struct{ msg string }

func (e errSignIn) Error() string { return e.msg }

// LinkKey derives the key that signs sign-in links from the audit signing
// key's seed, so that `countersign web link` can mint a link while the server
// runs, and a new signing key invalidates every outstanding link.
func LinkKey(seed []byte) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte("countersign web sign-in link v1"))
	return m.Sum(nil)
}

// MintLink returns a one-time sign-in token for ref ("c:<name>" or
// "p:<principal id>") valid until now+LinkTTL.
func MintLink(key []byte, ref string, now time.Time) (string, error) {
	return MintItemLink(key, ref, 0, now, LinkTTL)
}

// MaxItemLinkTTL is the longest an item's sign-in link (MintItemLink) may
// last.
const MaxItemLinkTTL = 24 * time.Hour

// MintItemLink returns a one-time sign-in token for ref, like MintLink,
// that lands on item's page (item 0: the inbox) and is valid until
// now+ttl (at most MaxItemLinkTTL): an email sent to an approver carries
// one, and is read later than a chat answer. It is the same link: signed
// with the same key, used once, refused for whom bot.CheckSignIn
// refuses; for a person with a single sign-on identity while the console
// has OIDC, it leads to the identity provider instead of signing in.
func MintItemLink(key []byte, ref string, item uint64, now time.Time, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxItemLinkTTL {
		return "", fmt.Errorf("a sign-in link lasts between 1s and %s, not %s", MaxItemLinkTTL, ttl)
	}
	nonce, err := randomToken(16)
	if err != nil {
		return "", err
	}
	payload := fmt.Sprintf("v1|%s|%d|%s", ref, now.Add(ttl).Unix(), nonce)
	if item > 0 {
		payload += fmt.Sprintf("|%d", item)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// linkClaims is a verified link's content.
type linkClaims struct {
	Ref     string
	Expires time.Time
	Nonce   string
	Item    uint64 // the item the link lands on; 0 the inbox
}

var errBadLink = errSignIn{"This sign-in link is not valid: it is incomplete, altered, or was made with another key. Ask for a new one: type /countersign web in Slack or Discord, or ask an admin to run `countersign web link`."}

// parseLink checks a link's signature and expiry (not whether it was used).
func parseLink(key []byte, tok string, now time.Time) (linkClaims, error) {
	p64, s64, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 512 {
		return linkClaims{}, errBadLink
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil {
		return linkClaims{}, errBadLink
	}
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	if !hmac.Equal(sig, m.Sum(nil)) {
		return linkClaims{}, errBadLink
	}
	parts := strings.Split(string(payload), "|")
	if (len(parts) != 4 && len(parts) != 5) || parts[0] != "v1" {
		return linkClaims{}, errBadLink
	}
	var exp int64
	if _, err := fmt.Sscan(parts[2], &exp); err != nil {
		return linkClaims{}, errBadLink
	}
	c := linkClaims{Ref: parts[1], Expires: time.Unix(exp, 0), Nonce: parts[3]}
	if len(parts) == 5 {
		n, err := strconv.ParseUint(parts[4], 10, 64)
		if err != nil || n == 0 {
			return linkClaims{}, errBadLink
		}
		c.Item = n
	}
	if !now.Before(c.Expires) {
		return linkClaims{}, errSignIn{"This sign-in link has expired: a link from chat lasts 5 minutes, one in an email as long as email.link_ttl says. Ask for a new one: type /countersign web in Slack or Discord, or ask an admin to run `countersign web link`."}
	}
	return c, nil
}

var errLinkUsed = errSignIn{"This sign-in link was already used: each link signs in once. Ask for a new one: type /countersign web in Slack or Discord, or ask an admin to run `countersign web link`."}

// consumeLink marks the link's nonce used in tx; a second use is refused.
func consumeLink(tx kv.Tx, c linkClaims) error {
	v, err := tx.Get(bucketLinksUsed, []byte(c.Nonce))
	if err != nil {
		return err
	}
	if v != nil {
		return errLinkUsed
	}
	return tx.Put(bucketLinksUsed, []byte(c.Nonce), kv.U64(uint64(c.Expires.Unix())))
}

// resolve turns a session's principal reference into the caller it acts as,
// checking on every request that the principal still exists and may sign
// in (bot.CheckSignIn: not revoked, a person, not the role agent), so a
// principal that was revoked or became an agent is refused at once.
func (h *Handler) resolve(ctx context.Context, ref string) (*bot.Caller, error) {
	kind, id, _ := strings.Cut(ref, ":")
	var p bot.Principal
	switch kind {
	case "c":
		c, ok := h.o.People[id]
		if !ok {
			return nil, errSignIn{fmt.Sprintf("%s is no longer a principal in Countersign's configuration, so it cannot sign in.", id)}
		}
		p = c.Principal // the directory's (PeopleOf): web:NAME
	case "p":
		var stored *bot.Principal
		err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
			var err error
			stored, err = bot.LoadPrincipal(tx, id)
			return err
		})
		if err != nil {
			return nil, err
		}
		if stored == nil {
			return nil, errSignIn{"This principal has been removed, so it cannot sign in. Ask a Countersign admin."}
		}
		p = *stored
	default:
		return nil, errBadLink
	}
	if r := bot.CheckSignIn(p); r != nil {
		return nil, errSignIn{r.Message}
	}
	if msg, err := h.suspended(ctx, p.Name); err != nil || msg != "" {
		if err != nil {
			return nil, err
		}
		return nil, errSignIn{msg}
	}
	return &bot.Caller{Principal: p, Surface: "web"}, nil
}

// newSession stores a session for ref and returns its token.
func (h *Handler) newSession(ctx context.Context, caller *bot.Caller, ref, via string, st signInState) (string, error) {
	tok, err := randomToken(32)
	if err != nil {
		return "", err
	}
	csrf, err := randomToken(24)
	if err != nil {
		return "", err
	}
	now := h.o.Bot.Now()
	s := session{Ref: ref, Name: caller.Name, CSRF: csrf, Created: now, Expires: now.Add(h.o.SessionTTL), Via: via}
	if !st.AuthAt.IsZero() {
		s.AuthAt, s.AuthMethod = st.AuthAt, via
	}
	s.Groups = st.Groups
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	if err := h.o.Bot.Store().Update(ctx, func(tx kv.Tx) error {
		return tx.Put(bucketSessions, tokenKey(tok), b)
	}); err != nil {
		return "", err
	}
	if err := h.o.Bot.Chat().Audit(ctx, caller, bot.Space{}, "web_sign_in", fmt.Sprintf("web: %s signed in via %s%s", caller.Name, via, st.auditNote())); err != nil {
		return "", err
	}
	return tok, nil
}

// loadSession returns the live session of tok, or nil.
func (h *Handler) loadSession(ctx context.Context, tok string) (*session, error) {
	if tok == "" || len(tok) > 128 {
		return nil, nil
	}
	var s *session
	err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
		b, err := tx.Get(bucketSessions, tokenKey(tok))
		if err != nil || b == nil {
			return err
		}
		s = &session{}
		return json.Unmarshal(b, s)
	})
	if err != nil {
		return nil, err
	}
	if s == nil || !h.o.Bot.Now().Before(s.Expires) {
		return nil, nil
	}
	return s, nil
}

// endSession deletes the session of tok.
func (h *Handler) endSession(ctx context.Context, tok string) error {
	return h.o.Bot.Store().Update(ctx, func(tx kv.Tx) error { return tx.Delete(bucketSessions, tokenKey(tok)) })
}

// csrfOK compares the form's token with the session's in constant time.
func csrfOK(s *session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(s.CSRF), []byte(got)) == 1
}

// Prune is a sweep step: it deletes every expired session, used link
// nonce and leftover OIDC record, in transactions of at most
// bot.RetentionBatch deletions each, going through each bucket once from
// the start to the end (so one sweep leaves nothing expired, however many
// there are).
func (h *Handler) Prune(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for _, bucket := range []string{bucketSessions, bucketLinksUsed, bucketOIDC} {
		var after []byte // the last key looked at; nil: from the start
		for {
			if err := ctx.Err(); err != nil {
				return total, err
			}
			var dead [][]byte
			var last []byte
			more := false
			err := h.o.Bot.View(ctx, func(tx kv.Tx) error {
				dead, last, more = nil, nil, false
				var from []byte
				if after != nil {
					from = append(bytes.Clone(after), 0) // the smallest key after it
				}
				return tx.Ascend(bucket, from, nil, func(k, v []byte) error {
					if len(dead) >= bot.RetentionBatch {
						more = true
						return kv.ErrStop
					}
					last = bytes.Clone(k)
					if expiredValue(bucket, v, now) {
						dead = append(dead, last)
					}
					return nil
				})
			})
			if err != nil {
				return total, err
			}
			if len(dead) > 0 {
				var n int
				if err := h.o.Bot.Store().Update(ctx, func(tx kv.Tx) error {
					n = 0
					for _, k := range dead {
						// Read again: only what is still expired goes.
						v, err := tx.Get(bucket, k)
						if err != nil {
							return err
						}
						if v == nil || !expiredValue(bucket, v, now) {
							continue
						}
						if err := tx.Delete(bucket, k); err != nil {
							return err
						}
						n++
					}
					return nil
				}); err != nil {
					return total, err
				}
				total += n
			}
			if !more {
				break
			}
			after = last
		}
	}
	return total, nil
}

func expiredValue(bucket string, v []byte, now time.Time) bool {
	if bucket == bucketLinksUsed {
		return len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < now.Unix()
	}
	var rec struct {
		Expires time.Time `json:"expires"`
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return true
	}
	return !now.Before(rec.Expires)
}

// isSignIn reports whether err is a refusal to show as it is.
func isSignIn(err error) (string, bool) {
	var e errSignIn
	if errors.As(err, &e) {
		return e.msg, true
	}
	return "", false
}
