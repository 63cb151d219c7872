package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, 32)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func issue(t *testing.T, key ed25519.PrivateKey, exp time.Time) string {
	t.Helper()
	h, err := ArgsHash("deploy", []byte(`{"service":"api","version":"1.2"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Sign(Payload{Key: KeyID(key.Public().(ed25519.PublicKey)), RequestID: "req_1", Tool: "deploy",
		ApprovedArgsSHA256: h, ConfirmedBy: "alice [prin_a]", IssuedAt: exp.Add(-time.Hour).Unix(), ExpiresAt: exp.Unix()},
		func(m []byte) []byte { return ed25519.Sign(key, m) })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestVerify(t *testing.T) {
	t.Parallel()
	key, other := testKey(1), testKey(2)
	pub := key.Public().(ed25519.PublicKey)
	now := time.Unix(1_800_000_000, 0)
	good := issue(t, key, now.Add(time.Minute))
	head, sig, _ := strings.Cut(good, ".")
	p, _ := Parse(good)
	p.Tool = "drop_database"
	tampered := p
	raw := mustJSON(t, tampered)
	cases := []struct {
		name    string
		r       string
		pub     ed25519.PublicKey
		want    error
		message string
	}{
		{"good", good, pub, nil, ""},
		{"wrong key", good, other.Public().(ed25519.PublicKey), ErrSignature, "issued by key"},
		{"other deployment", issue(t, other, now.Add(time.Minute)), pub, ErrSignature, "issued by key"},
		{"tampered payload", base64.RawURLEncoding.EncodeToString(raw) + "." + sig, pub, ErrSignature, "altered"},
		{"tampered signature", head + "." + flip(sig), pub, ErrSignature, ""},
		{"expired", issue(t, key, now), pub, ErrExpired, "expired at"},
		{"no dot", head, pub, ErrMalformed, ""},
		{"garbage", "!!.!!", pub, ErrMalformed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Verify(c.r, c.pub, now)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), c.message) {
				t.Errorf("err = %q, want it to mention %q", err, c.message)
			}
			if c.want == nil && (got.RequestID != "req_1" || got.Tool != "deploy" || got.ConfirmedBy != "alice [prin_a]") {
				t.Errorf("payload = %+v, want RequestID %q, Tool %q, ConfirmedBy %q", got, "req_1", "deploy", "alice [prin_a]")
			}
		})
	}
}

func TestArgsHashCanonical(t *testing.T) {
	t.Parallel()
	a, err := ArgsHash("deploy", []byte(`{"version":"1.2", "service":"api"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ArgsHash("deploy", []byte(`{"service":"api","version":"1.2"}`))
	c, _ := ArgsHash("deploy", []byte(`{"service":"api","version":"1.3"}`))
	d, _ := ArgsHash("rollback", []byte(`{"service":"api","version":"1.2"}`))
	if a != b || a == c || a == d {
		t.Errorf("hashes: reordered same = %v, changed value differs = %v, other tool differs = %v; want all true", a == b, a != c, a != d)
	}
	if _, err := ArgsHash("deploy", []byte(`{`)); err == nil {
		t.Error(`ArgsHash("deploy", "{") err = nil, want an error for invalid JSON`)
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

func mustJSON(t *testing.T, p Payload) []byte {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCanonicalKeepsNumbersAndOrdersKeys: the canonical form the server
// hashes keeps numbers as written (no float rounding of 2.50 or of a
// 20-digit integer), sorts keys at every depth, escapes no HTML, and
// refuses more than one value.
func TestCanonicalKeepsNumbersAndOrdersKeys(t *testing.T) {
	t.Parallel()
	a, err := Canonical([]byte(` {"b": [1, 2.50, {"z": 1, "a": "<&>"}], "a": 12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":12345678901234567890,"b":[1,2.50,{"a":"<&>","z":1}]}`; string(a) != want {
		t.Fatalf("Canonical = %s, want %s", a, want)
	}
	c, _ := Canonical([]byte(`{"a":12345678901234567891,"b":[1,2.50,{"z":1,"a":"<&>"}]}`))
	if HashCanonical("t", a) == HashCanonical("t", c) {
		t.Fatal("a changed 20-digit number kept the hash")
	}
	if h, _ := ArgsHash("t", []byte(`{"b":[1,2.50,{"a":"<&>","z":1}],"a":12345678901234567890}`)); h != HashCanonical("t", a) {
		t.Fatal("ArgsHash and HashCanonical disagree on the same arguments")
	}
	if _, err := Canonical([]byte(`{} {}`)); err == nil {
		t.Fatal("Canonical(`{} {}`) err = nil, want an error for two values")
	}
}

// TestAssuranceField: a receipt states how its approval was
// authenticated; one without it (issued before decisions recorded it, or
// approved by a grant) is byte for byte the payload earlier versions
// signed, and verifies as before.
func TestAssuranceField(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	sign := func(m []byte) []byte { return ed25519.Sign(priv, m) }
	now := time.Unix(1_800_000_000, 0)
	p := Payload{Key: KeyID(priv.Public().(ed25519.PublicKey)), RequestID: "req_0123456789abcdef", Tool: "restart_service",
		ApprovedArgsSHA256: strings.Repeat("ab", 32), ConfirmedBy: "dr_smith [U0123ABC]", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()}
	old, err := Sign(p, sign)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(old, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(head)
	want := `{"v":1,"key":"` + p.Key + `","request_id":"req_0123456789abcdef","tool":"restart_service","approved_args_sha256":"` + strings.Repeat("ab", 32) + `","confirmed_by":"dr_smith [U0123ABC]","grant":"","issued_at":1800000000,"expires_at":1800003600}`
	if string(raw) != want {
		t.Fatalf("a receipt without assurance signs\n%s\nwant the earlier payload\n%s", raw, want)
	}
	if got, err := Verify(old, priv.Public().(ed25519.PublicKey), now); err != nil || got.Assurance != "" {
		t.Fatalf("Verify(the earlier receipt) = %+v, %v, want no error and empty Assurance", got, err)
	}
	p.Assurance = "oidc_step_up"
	rec, err := Sign(p, sign)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(rec, priv.Public().(ed25519.PublicKey), now)
	if err != nil || got.Assurance != "oidc_step_up" {
		t.Fatalf("Verify(a receipt with assurance) = %+v, %v, want no error and Assurance %q", got, err, "oidc_step_up")
	}
}
