package web

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestLinkTokens: a sign-in link verifies with its key until it expires,
// 5 minutes after it was minted, and not at all with another key or with
// its content changed (another principal, a later expiry).
func TestLinkTokens(t *testing.T) {
	key, other := LinkKey([]byte("seed-one-0123456789abcdef0123456")), LinkKey([]byte("seed-two-0123456789abcdef0123456"))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tok, err := MintLink(key, "c:dr_smith", t0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseLink(key, tok, t0.Add(LinkTTL-time.Second))
	if err != nil || c.Ref != "c:dr_smith" || c.Nonce == "" {
		t.Fatalf("a fresh link: %+v %v; want ref %q and a nonce", c, err, "c:dr_smith")
	}
	if _, err := parseLink(key, tok, t0.Add(LinkTTL)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a link at its expiry: %v, want expired", err)
	}
	if _, err := parseLink(other, tok, t0); err != errBadLink {
		t.Errorf("a link under another key: %v, want errBadLink", err)
	}
	p64, sig, _ := strings.Cut(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(p64)
	for _, forged := range []string{
		strings.Replace(string(payload), "c:dr_smith", "c:admin", 1),
		strings.Replace(string(payload), "|17", "|27", 1), // a later expiry
	} {
		if _, err := parseLink(key, base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig, t0); err != errBadLink {
			t.Errorf("forged payload %q: %v, want errBadLink", forged, err)
		}
	}
	for _, junk := range []string{"", ".", "x.y", strings.Repeat("a", 600)} {
		if _, err := parseLink(key, junk, t0); err != errBadLink {
			t.Errorf("parseLink(%q): %v, want errBadLink", junk, err)
		}
	}
	if tok2, _ := MintLink(key, "c:dr_smith", t0); tok2 == tok {
		t.Error("two links for the same person at the same time are equal")
	}
}
