package jwks

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// issuer is a local JWKS endpoint on 127.0.0.1 that counts its fetches.
type issuer struct {
	srv     *httptest.Server
	fetches atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{keys: map[string]*rsa.PrivateKey{}}
	is.rotate(t, "k1")
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		if is.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		b64 := base64.RawURLEncoding.EncodeToString
		var set []map[string]any
		for kid, k := range is.keys {
			set = append(set, map[string]any{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// rotate makes kid the issuer's only key.
func (is *issuer) rotate(t *testing.T, kid string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = map[string]*rsa.PrivateKey{kid: k}
}

func (is *issuer) key(kid string) *rsa.PrivateKey {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[kid]
}

func sign(t *testing.T, key *rsa.PrivateKey, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newKeys(t *testing.T, is *issuer, c *clock) *Keys {
	t.Helper()
	k, err := New(Options{Locate: URL(is.srv.URL), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func verify(k *Keys, token string) error {
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"})).Parse(token, k.Keyfunc(context.Background()))
	return err
}

// TestForgedKeyIDsFetchAtMostOncePerInterval plays the attack: a stream
// of tokens naming made-up key ids, each of which would make a naive
// verifier fetch the issuer's keys. At most one fetch per interval
// reaches the issuer, and a genuine token keeps verifying.
func TestForgedKeyIDsFetchAtMostOncePerInterval(t *testing.T) {
	is, c := newIssuer(t), &clock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	k := newKeys(t, is, c)
	good := sign(t, is.key("k1"), "k1")
	if err := verify(k, good); err != nil {
		t.Fatal(err)
	}
	forger, _ := rsa.GenerateKey(rand.Reader, 2048)
	for round := range 3 {
		before := is.fetches.Load()
		for i := range 200 {
			err := verify(k, sign(t, forger, fmt.Sprintf("forged-%d-%d", round, i)))
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("a forged kid: %v, want ErrUnknownKey", err)
			}
		}
		if n := is.fetches.Load() - before; n > 1 {
			t.Fatalf("round %d: 200 forged key ids made %d fetches, want at most 1 per interval", round, n)
		}
		if err := verify(k, good); err != nil {
			t.Fatalf("a genuine token during the attack: %v", err)
		}
		c.Advance(DefaultMinInterval)
	}
	// Forged tokens under the issuer's real kid fetch nothing.
	before := is.fetches.Load()
	for range 50 {
		if err := verify(k, sign(t, forger, "k1")); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			t.Fatalf("a forged signature under a known kid: %v, want jwt.ErrTokenSignatureInvalid", err)
		}
	}
	if n := is.fetches.Load() - before; n != 0 {
		t.Fatalf("forged signatures under a known kid made %d fetches, want 0", n)
	}
}

// TestRotationAndCacheLifetime: a new key id is followed once the
// interval has passed; keys are fetched again after MaxAge, so a
// withdrawn key stops verifying; an issuer that is down leaves the cached
// keys standing, and with none cached a token is refused as unavailable.
func TestRotationAndCacheLifetime(t *testing.T) {
	is, c := newIssuer(t), &clock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	k := newKeys(t, is, c)
	old := sign(t, is.key("k1"), "k1")
	if err := verify(k, old); err != nil {
		t.Fatal(err)
	}
	is.rotate(t, "k2")
	fresh := sign(t, is.key("k2"), "k2")
	if err := verify(k, fresh); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a new kid within the interval of the first fetch: %v, want ErrUnknownKey (no fetch yet)", err)
	}
	c.Advance(DefaultMinInterval)
	if err := verify(k, fresh); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	// k1 was withdrawn: the last fetch replaced the cache, so it no
	// longer verifies.
	if err := verify(k, old); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a withdrawn key: %v, want ErrUnknownKey", err)
	}
	// Cache lifetime: within MaxAge no fetch, after it one.
	before := is.fetches.Load()
	c.Advance(DefaultMaxAge - time.Minute)
	if err := verify(k, fresh); err != nil || is.fetches.Load() != before {
		t.Fatalf("within MaxAge: %v, %d fetches, want none", err, is.fetches.Load()-before)
	}
	c.Advance(2 * time.Minute)
	is.down.Store(true)
	if err := verify(k, fresh); err != nil {
		t.Fatalf("the issuer down after MaxAge: %v, want the cached key to stand", err)
	}
	if n := is.fetches.Load() - before; n != 1 {
		t.Fatalf("after MaxAge: %d fetches, want 1", n)
	}
	// Nothing cached and the issuer down: unavailable, and tried again
	// only after the interval.
	k2 := newKeys(t, is, c)
	before = is.fetches.Load()
	for range 20 {
		if err := verify(k2, fresh); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("no keys, issuer down: %v, want ErrUnavailable", err)
		}
	}
	if n := is.fetches.Load() - before; n != 1 {
		t.Fatalf("20 tokens while the issuer is down made %d fetches, want 1", n)
	}
	is.down.Store(false)
	c.Advance(DefaultMinInterval)
	if err := verify(k2, fresh); err != nil {
		t.Fatalf("the issuer back: %v", err)
	}
}

// TestAKeyOfTheWrongTypeIsRefused: an HMAC token "signed" with the RSA
// public key as its secret, or alg none, never verifies.
func TestAKeyOfTheWrongTypeIsRefused(t *testing.T) {
	is, c := newIssuer(t), &clock{t: time.Now()}
	k := newKeys(t, is, c)
	for _, alg := range []jwt.SigningMethod{jwt.SigningMethodHS256, jwt.SigningMethodNone} {
		tok := jwt.NewWithClaims(alg, jwt.MapClaims{"sub": "x"})
		tok.Header["kid"] = "k1"
		var secret any = []byte("k1")
		if alg == jwt.SigningMethodNone {
			secret = jwt.UnsafeAllowNoneSignatureType
		}
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		_, err = jwt.NewParser().Parse(s, k.Keyfunc(context.Background()))
		if err == nil {
			t.Errorf("a %s token verified, want it refused", alg.Alg())
		}
	}
}
