package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// The JWKS attack, played against the real endpoints: tokens naming
// made-up key ids, each of which would make a naive verifier fetch the
// issuer's keys again. Both token checks (Teams' messaging endpoint, the
// MCP OAuth resource server) share adapters/jwks: every forged token is
// refused with 401, and the issuer's JWKS is read at most once more
// during the attack (once per 30 seconds at most), counted at the
// issuer.

const forgedTokens = 60

// TestTeamsForgedKeyIDsDoNotFloodTheIssuer: POST /teams/messages.
func TestTeamsForgedKeyIDsDoNotFloodTheIssuer(t *testing.T) {
	t.Parallel()
	e := newTeamsEnv(t)
	act := teamsClick("jwks-0", smithOID, smithMRI, teamsOps, "1", "refresh", map[string]string{"item": "1"}, e.fake.APIURL)
	if status, body := e.fake.Send(e.URL+"/teams/messages", act, e.fake.Sign(e.fake.Claims(time.Now()))); status != http.StatusOK {
		t.Fatalf("a genuine token answered %d %s, want %d", status, body, http.StatusOK)
	}
	before := e.fake.KeyFetches()
	if before < 1 {
		t.Fatalf("the genuine token was checked without reading the JWKS (%d reads, want at least 1)", before)
	}
	for i := range forgedTokens {
		tok := e.fake.ForgedKID(e.fake.Claims(time.Now()), fmt.Sprintf("forged-%d", i))
		if status, body := e.fake.Send(e.URL+"/teams/messages", act, tok); status != http.StatusUnauthorized || !strings.Contains(string(body), "signing key the issuer does not publish") {
			t.Fatalf("forged token %d answered %d %s, want 401 naming the unknown key", i, status, body)
		}
	}
	if n := e.fake.KeyFetches() - before; n > 1 {
		t.Fatalf("%d forged key ids made %d JWKS reads, want at most 1", forgedTokens, n)
	}
	if status, body := e.fake.Send(e.URL+"/teams/messages", act, e.fake.Sign(e.fake.Claims(time.Now()))); status != http.StatusOK {
		t.Fatalf("a genuine token after the attack answered %d %s, want %d", status, body, http.StatusOK)
	}
}

// TestOAuthForgedKeyIDsDoNotFloodTheIssuer: the HTTP API and MCP with
// mcp.oauth, against a local OpenID provider whose JWKS reads are
// counted.
func TestOAuthForgedKeyIDsDoNotFloodTheIssuer(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == mockoidc.JWKSEndpoint {
				reads.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	e := newTestEnv(t, oauthConfig(m.Issuer()))
	e.CreateKey("deploy-bot", "agent")
	e.Start()

	if resp, body := e.post("/v1/tools/pending_changes", accessToken(t, m, "deploy-bot", nil), map[string]any{}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a genuine token answered %d %s, want %d", resp.StatusCode, body, http.StatusOK)
	}
	before := reads.Load()
	if before < 1 {
		t.Fatalf("the genuine token was checked without reading the JWKS (%d reads, want at least 1)", before)
	}
	forger, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range forgedTokens {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": m.Issuer(), "aud": oauthAudience, "preferred_username": "deploy-bot", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
		// Made-up key ids, and the issuer's own key id over a forged
		// signature (which made the old key set fetch again every time).
		tok.Header["kid"] = fmt.Sprintf("forged-%d", i)
		if i%3 == 0 {
			tok.Header["kid"] = m.Keypair.Kid
		}
		raw, err := tok.SignedString(forger.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1/tools/pending_changes"
		if i%2 == 1 {
			path = "/mcp"
		}
		resp, body := e.post(path, raw, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) || strings.Contains(body, "deploy-bot [prin_") {
			t.Fatalf("forged token %d on %s answered %d %s (%s), want 401 invalid_token", i, path, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if n := reads.Load() - before; n > 1 {
		t.Fatalf("%d forged key ids made %d JWKS reads, want at most 1", forgedTokens, n)
	}
	if resp, body := e.post("/v1/tools/pending_changes", accessToken(t, m, "deploy-bot", nil), map[string]any{}); resp.StatusCode != http.StatusOK {
		t.Fatalf("a genuine token after the attack answered %d %s, want %d", resp.StatusCode, body, http.StatusOK)
	}
}
