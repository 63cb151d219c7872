package web

import (
	"strings"
	"testing"
)

// TestSealedValues: a sealed value opens with its key and purpose only,
// and not at all once a byte of it is changed.
func TestSealedValues(t *testing.T) {
	key, other := LinkKey([]byte("seed-one-0123456789abcdef0123456")), LinkKey([]byte("seed-two-0123456789abcdef0123456"))
	s, err := newSealer(key, "oidc pending sign-in")
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.seal(pendingOIDC{State: "st", Nonce: "n", Next: "/ui/items/4"})
	if err != nil {
		t.Fatal(err)
	}
	var got pendingOIDC
	if !s.open(text, &got) || got.State != "st" || got.Nonce != "n" || got.Next != "/ui/items/4" {
		t.Fatalf("open(seal(v)) = %+v, want the value back", got)
	}
	if strings.Contains(text, "st") && strings.Contains(text, "/ui/items") {
		t.Errorf("the sealed text shows its content: %s", text)
	}
	otherKey, _ := newSealer(other, "oidc pending sign-in")
	otherPurpose, _ := newSealer(key, "something else")
	flipped := []byte(text)
	flipped[len(flipped)/2] ^= 1
	for name, c := range map[string]struct {
		s    *sealer
		text string
	}{
		"another key": {otherKey, text}, "another purpose": {otherPurpose, text},
		"a byte changed": {s, string(flipped)}, "cut": {s, text[:len(text)-4]}, "empty": {s, ""},
		"junk": {s, "not-base64!"}, "too long": {s, strings.Repeat("A", maxSealed+1)},
	} {
		if c.s.open(c.text, &pendingOIDC{}) {
			t.Errorf("%s: opened, want it refused", name)
		}
	}
}

// TestProviderErrors: a provider's error code is explained in our words;
// an unknown one, or free text, is not repeated.
func TestProviderErrors(t *testing.T) {
	for _, tc := range []struct{ in, logged, shows string }{
		{"access_denied", "access_denied", "declined"},
		{"login_required", "login_required", "(login_required)"},
		{"server_error", "server_error", "just now"},
		{"invalid_scope", "invalid_scope", "client registration"},
		{"Your account is locked. Call +1-555-0100", "unknown", "did not sign you in."},
	} {
		logged, msg := providerError(tc.in)
		if logged != tc.logged || !strings.Contains(msg, tc.shows) || (tc.logged == "unknown" && strings.Contains(msg, "555")) {
			t.Errorf("providerError(%q) = %q, %q; want %q and a message with %q", tc.in, logged, msg, tc.logged, tc.shows)
		}
	}
}
