package web

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestStepUpLinkTokens: a step-up link names one principal and one item,
// verifies with its key until it expires 5 minutes later, and is never
// taken for a sign-in link, nor a sign-in link for a step-up link.
func TestStepUpLinkTokens(t *testing.T) {
	key, other := LinkKey([]byte("seed-one-0123456789abcdef0123456")), LinkKey([]byte("seed-two-0123456789abcdef0123456"))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tok, err := MintStepUpLink(key, "c:dr_smith", 42, t0)
	if err != nil {
		t.Fatal(err)
	}
	c, item, err := parseStepUpLink(key, tok, t0.Add(LinkTTL-time.Second))
	if err != nil || c.Ref != "c:dr_smith" || item != 42 || c.Nonce == "" {
		t.Fatalf("a fresh step-up link: %+v #%d %v; want ref %q, item #42 and a nonce", c, item, err, "c:dr_smith")
	}
	if _, _, err := parseStepUpLink(key, tok, t0.Add(LinkTTL)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("at its expiry: %v, want expired", err)
	}
	if _, _, err := parseStepUpLink(other, tok, t0); err != errBadStepUpLink {
		t.Errorf("under another key: %v, want errBadStepUpLink", err)
	}
	// Neither kind of link passes for the other.
	if _, err := parseLink(key, tok, t0); err != errBadLink {
		t.Errorf("a step-up link accepted as a sign-in link: %v, want errBadLink", err)
	}
	signIn, _ := MintLink(key, "c:dr_smith", t0)
	if _, _, err := parseStepUpLink(key, signIn, t0); err != errBadStepUpLink {
		t.Errorf("a sign-in link accepted as a step-up link: %v, want errBadStepUpLink", err)
	}
	p64, sig, _ := strings.Cut(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(p64)
	for _, forged := range []string{
		strings.Replace(string(payload), "c:dr_smith", "c:admin", 1),
		strings.Replace(string(payload), "|42|", "|43|", 1), // another item
	} {
		if _, _, err := parseStepUpLink(key, base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig, t0); err != errBadStepUpLink {
			t.Errorf("forged payload %q: %v, want errBadStepUpLink", forged, err)
		}
	}
	for _, junk := range []string{"", ".", "x.y", strings.Repeat("a", 600)} {
		if _, _, err := parseStepUpLink(key, junk, t0); err != errBadStepUpLink {
			t.Errorf("parseStepUpLink(%q): %v, want errBadStepUpLink", junk, err)
		}
	}
}

// TestClaimTime: auth_time is read as a NumericDate; anything else is none.
func TestClaimTime(t *testing.T) {
	if at, ok := claimTime(float64(1796131200)); !ok || !at.Equal(time.Unix(1796131200, 0)) {
		t.Errorf("a number: %v %v, want %v true", at, ok, time.Unix(1796131200, 0))
	}
	for _, v := range []any{nil, "1796131200", float64(0), float64(-5), true} {
		if _, ok := claimTime(v); ok {
			t.Errorf("claimTime(%v) read a time, want none", v)
		}
	}
}
