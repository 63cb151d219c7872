package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/jwks"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

const audience = "https://countersign.hospital.example/mcp"

// stored is a principal store of two principals.
type stored map[string]bot.Principal

func (s stored) PrincipalNamed(_ context.Context, name string) (*bot.Principal, error) {
	if p, ok := s[name]; ok {
		return &p, nil
	}
	return nil, nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// provider starts a test OpenID provider and a verifier of its tokens.
func provider(t *testing.T) (*mockoidc.MockOIDC, *Verifier, *clock) {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	c := &clock{t: time.Now()}
	people, err := bot.NewDirectory([]bot.ChatPrincipal{{Name: "dr_smith", Role: policy.RoleMember, Web: "Dr.Smith@Hospital.example"}, {Name: "nurse_lee", Role: policy.RoleMember}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(Options{
		Issuer: m.Issuer(), Audience: audience, Claim: "email",
		People: people,
		Stored: stored{"ci-agent": {ID: "prin_ci", Name: "ci-agent", Role: policy.RoleAgent, Kind: "agent"}},
		Now:    c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, v, c
}

// token signs claims for subject email with the provider's key: issued
// now for audience, valid for an hour, unless changed by edit.
func token(t *testing.T, m *mockoidc.MockOIDC, email string, edit func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": m.Issuer(), "aud": []string{audience}, "sub": "u-1", "email": email, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	s, err := m.Keypair.SignJWT(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAnAccessTokenForThisResourceMapsToItsPrincipal(t *testing.T) {
	m, v, _ := provider(t)
	ctx := context.Background()
	c, err := v.Authenticate(ctx, token(t, m, "dr.smith@hospital.example", nil))
	if err != nil {
		t.Fatalf("a good token: %v", err)
	}
	if c.ID != "web:dr_smith" || c.Name != "dr_smith" || c.Kind != "person" || c.Role != policy.RoleMember || !c.AuthAt.IsZero() {
		t.Fatalf("caller %+v, want the configured person dr_smith (no fresh sign-in)", c)
	}
	// A stored principal by name: its kind stays (an agent never decides).
	c, err = v.Authenticate(ctx, token(t, m, "ci-agent", nil))
	if err != nil || c.ID != "prin_ci" || c.Kind != "agent" {
		t.Fatalf("a stored agent: %+v %v; want prin_ci, kind agent", c, err)
	}
	if refusal := c.MayDecide(policy.Decidable{Ref: "req_1"}); refusal == nil || refusal.Check != policy.CheckPerson {
		t.Fatalf("the agent's token: refusal %+v, want a %v refusal", refusal, policy.CheckPerson)
	}
}

func TestBadTokensAreRefusedWithTheChallenge(t *testing.T) {
	m, v, clk := provider(t)
	other, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	good := token(t, m, "dr.smith@hospital.example", nil)
	parts := strings.Split(good, ".")
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	forged, _ := other.SignJWT(jwt.MapClaims{"iss": m.Issuer(), "aud": audience, "email": "dr.smith@hospital.example", "exp": time.Now().Add(time.Hour).Unix()})
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": m.Issuer(), "aud": audience, "email": "dr.smith@hospital.example", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("secret"))
	for _, c := range []struct {
		name, token, want string
	}{
		{"another audience", token(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { c["aud"] = "https://other.example/mcp" }), "it was issued for another audience, not " + audience},
		{"expired", token(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "it has expired"},
		{"no expiry", token(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { delete(c, "exp") }), "it lacks a required claim (exp)"},
		{"another issuer", token(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), "it was issued by another issuer"},
		{"unsigned", unsigned, `its algorithm "none" is not accepted`},
		{"HMAC", hs, "its algorithm \"HS256\" is not accepted"},
		{"no subject claim", token(t, m, "", nil), "it carries no email claim"},
		{"unmapped", token(t, m, "nobody@hospital.example", nil), `email "nobody@hospital.example" is not mapped to a Countersign principal`},
		// A configured person with no web identity is not reached by name.
		{"a configured person without a web identity", token(t, m, "nurse_lee", nil), `email "nurse_lee" is not mapped to a Countersign principal`},
		{"garbage", "a.b.c", "it is not a JWT signed with an asymmetric key"},
	} {
		_, err := v.Authenticate(context.Background(), c.token)
		var oe *Error
		if !errors.As(err, &oe) || bot.KindOf(err) != bot.KindUnauthenticated || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an unauthenticated refusal saying %q", c.name, err, c.want)
			continue
		}
		if ch := oe.Challenge(); !strings.HasPrefix(ch, `Bearer resource_metadata="https://countersign.hospital.example/.well-known/oauth-protected-resource", error="invalid_token", error_description="`) {
			t.Errorf("%s: challenge %s, want it to start %s", c.name, ch, `Bearer resource_metadata="https://countersign.hospital.example/.well-known/oauth-protected-resource", error="invalid_token", error_description="`)
		}
	}
	// Signed by a key the issuer does not publish (a made-up kid): refused,
	// and a second one at once does not make the verifier fetch the keys
	// again.
	clk.Advance(jwks.DefaultMinInterval + time.Second)
	if _, err := v.Authenticate(context.Background(), forged); err == nil || !strings.Contains(err.Error(), "names a signing key") {
		t.Fatalf("forged: %v, want an error saying %q", err, "names a signing key")
	}
	forged2, _ := other.SignJWT(jwt.MapClaims{"iss": m.Issuer(), "aud": audience, "email": "x", "exp": time.Now().Add(time.Hour).Unix()})
	if _, err := v.Authenticate(context.Background(), forged2); err == nil || !strings.Contains(err.Error(), "names a signing key") {
		t.Fatalf("a second unknown key at once: %v, want an error saying %q", err, "names a signing key")
	}
}

// The issuer rotates its key: a token signed with the new key (a new kid)
// is verified after the key set is fetched again.
func TestKeyRotationIsFollowed(t *testing.T) {
	m, v, clk := provider(t)
	if _, err := v.Authenticate(context.Background(), token(t, m, "ci-agent", nil)); err != nil {
		t.Fatal(err)
	}
	next, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	m.Keypair = next
	clk.Advance(jwks.DefaultMinInterval + time.Second)
	if _, err := v.Authenticate(context.Background(), token(t, m, "ci-agent", nil)); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	m, v, _ := provider(t)
	if got := v.MetadataPaths(); len(got) != 2 || got[0] != "/.well-known/oauth-protected-resource" || got[1] != "/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("paths = %v, want [/.well-known/oauth-protected-resource /.well-known/oauth-protected-resource/mcp]", got)
	}
	rec := httptest.NewRecorder()
	v.MetadataHandler().ServeHTTP(rec, httptest.NewRequest("GET", MetadataPath, nil))
	var md map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("metadata: status %d, want 200 and JSON: %s", rec.Code, rec.Body)
	}
	if md["resource"] != audience || len(md["authorization_servers"].([]any)) != 1 || md["authorization_servers"].([]any)[0] != m.Issuer() {
		t.Fatalf("metadata = %v, want resource %s and the one authorization server %s", md, audience, m.Issuer())
	}
	// A missing credential: the challenge names the metadata, no error.
	_, err := Authenticator{Keys: noKeys{}, Verifier: v}.Authenticate(context.Background(), "")
	var oe *Error
	if !errors.As(err, &oe) || oe.Challenge() != `Bearer resource_metadata="https://countersign.hospital.example/.well-known/oauth-protected-resource"` {
		t.Fatalf("no credential: %v, want an *Error challenging %s", err, `Bearer resource_metadata="https://countersign.hospital.example/.well-known/oauth-protected-resource"`)
	}
}

type noKeys struct{}

func (noKeys) Authenticate(context.Context, string) (*bot.Caller, error) {
	return nil, bot.Errorf(bot.KindUnauthenticated, "Access denied: authentication required.")
}

// The issuer cannot be reached: every token is refused (never let
// through), and it is tried again later.
func TestAnUnreachableIssuerRefusesTokens(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	v, err := New(Options{Issuer: srv.URL, Audience: audience, Claim: "email"})
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := provider(t)
	if _, err := v.Authenticate(context.Background(), token(t, m, "x", nil)); err == nil || !strings.Contains(err.Error(), "signing keys of its issuer could not be fetched") {
		t.Fatalf("unreachable issuer: %v, want an error saying %q", err, "signing keys of its issuer could not be fetched")
	}
}
