package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/countersign/countersign/config"
)

const oauthAudience = "https://countersign.hospital.example/mcp"

const oauthMetadataURL = "https://countersign.hospital.example/.well-known/oauth-protected-resource"

// oauthConfig: access tokens of the test provider at issuer, their
// preferred_username mapped to dr_smith (principals[].web) or to a stored
// principal of that name.
func oauthConfig(issuer string) string {
	return actionsConfig + `principals:
  - name: dr_smith
    role: member
    web: dr.smith@hospital.example
mcp:
  max_call_wait: 1s
  oauth:
    issuer: ` + issuer + `
    audience: ` + oauthAudience + `
    claim: preferred_username
`
}

// accessToken is a token of m for user, issued now for the audience and
// valid for an hour, unless edit changes its claims.
func accessToken(t *testing.T, m *mockoidc.MockOIDC, user string, edit func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": m.Issuer(), "aud": oauthAudience, "sub": "sub-" + user, "preferred_username": user, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	s, err := m.Keypair.SignJWT(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// post calls POST path with a bearer credential (none when "") and body.
func (e *testEnv) post(path, credential string, body any) (*http.Response, string) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", e.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// MCP authorization: Countersign is an OAuth 2.1 resource server beside
// its keys. A token of the configured issuer for this resource is
// accepted over MCP and the HTTP API and acts as its principal (a person
// approves; an agent's token never does); a token for another audience,
// expired, unsigned or signed by another key is refused with 401 and the
// WWW-Authenticate challenge RFC 6750 and RFC 9728 describe.
func TestOAuthTokensOverMCPAndHTTP(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	e := newTestEnv(t, oauthConfig(m.Issuer()))
	e.CreateKey("deploy-bot", "agent")
	key := e.CreateKey("ops", "admin")
	e.Start()

	// The metadata, at the root and path-suffixed.
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if resp.StatusCode != 200 || md["resource"] != oauthAudience || md["authorization_servers"].([]any)[0] != m.Issuer() {
			t.Fatalf("GET %s: %d %v; want 200, resource %q, authorization_servers[0] %q", path, resp.StatusCode, md, oauthAudience, m.Issuer())
		}
	}

	person := accessToken(t, m, "dr.smith@hospital.example", nil)
	agent := accessToken(t, m, "deploy-bot", nil)

	// The agent's token over MCP (a 2025-11-25 session: pending at once).
	cs := e.mcpSessionVersion(agent, "2025-11-25")
	text, r := mcpCall(t, cs, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}, "summary": "restart web"})
	id, _ := r.StructuredContent.(map[string]any)["request_id"].(string)
	if r.IsError || !strings.HasPrefix(id, "req_") || !strings.Contains(r.StructuredContent.(map[string]any)["requester"].(string), "deploy-bot [prin_") {
		t.Fatalf("confirm_action with the agent's token: %q %v; want success with a req_ id and a requester containing %q", text, r.StructuredContent, "deploy-bot [prin_")
	}
	// An agent's token never approves, over either surface.
	if text, r := mcpCall(t, cs, "approve_action", map[string]any{"request_id": id}); !r.IsError || !strings.Contains(text, "Access denied") {
		t.Fatalf("the agent's token approved over MCP: %q, want an error containing %q", text, "Access denied")
	}
	if resp, body := e.post("/v1/tools/approve_action", agent, map[string]any{"request_id": id}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the agent's token approving over HTTP: %d %s, want %d", resp.StatusCode, body, http.StatusForbidden)
	}
	// The person's token over HTTP decides, as dr_smith.
	resp, body := e.post("/v1/tools/approve_action", person, map[string]any{"request_id": id})
	if resp.StatusCode != 200 || !strings.Contains(body, `"confirmed_by":"dr_smith [web:dr_smith]"`) {
		t.Fatalf("the person's token over HTTP: %d %s, want 200 and %s", resp.StatusCode, body, `"confirmed_by":"dr_smith [web:dr_smith]"`)
	}
	// And over MCP.
	ps := e.mcpSession(person)
	if text := mcpOK(t, ps, "action_status", map[string]any{"request_id": id}); !strings.Contains(text, "approved") {
		t.Fatalf("the person's token over MCP: %q, want it to contain %q", text, "approved")
	}
	// Keys still work beside tokens.
	if resp, body := e.post("/v1/tools/verify_audit", key, map[string]any{}); resp.StatusCode != 200 {
		t.Fatalf("an API key: %d %s, want 200", resp.StatusCode, body)
	}

	other, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.SignJWT(jwt.MapClaims{"iss": m.Issuer(), "aud": oauthAudience, "preferred_username": "dr.smith@hospital.example", "exp": time.Now().Add(time.Hour).Unix()})
	parts := strings.Split(person, ".")
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	wantInvalid := `Bearer resource_metadata="` + oauthMetadataURL + `", error="invalid_token", error_description="`
	for _, c := range []struct {
		name, credential, challenge, says string
	}{
		{"no credential", "", `Bearer resource_metadata="` + oauthMetadataURL + `"`, "authentication required"},
		{"another audience", accessToken(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { c["aud"] = "https://other.example/mcp" }), wantInvalid + "it was issued for another audience", "another audience"},
		{"expired", accessToken(t, m, "dr.smith@hospital.example", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }), wantInvalid + "it has expired", "it has expired"},
		{"unsigned", unsigned, wantInvalid + `its algorithm 'none' is not accepted`, "is not accepted"},
		{"another key", forged, wantInvalid, "the bearer token was refused"},
		{"unknown API key", "cs_sk_nope", wantInvalid + "unknown or revoked API key", "unknown or revoked API key"},
	} {
		for _, path := range []string{"/v1/tools/verify_audit", "/mcp"} {
			body := any(map[string]any{})
			if path == "/mcp" {
				body = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}}
			}
			resp, text := e.post(path, c.credential, body)
			got := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(got, c.challenge) || !strings.Contains(text, c.says) {
				t.Errorf("%s on %s: %d, WWW-Authenticate %q, body %s; want 401, %q…, saying %q", c.name, path, resp.StatusCode, got, text, c.challenge, c.says)
			}
		}
	}
	// A refused token leaves no trace of itself in the log.
	if logs := e.logs.String(); strings.Contains(logs, parts[2]) {
		t.Fatalf("a token reached the log")
	}
}

func TestMCPOAuthConfigIsChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"mcp:\n  oauth: {audience: " + oauthAudience + "}\n", "mcp.oauth.issuer: required"},
		{"mcp:\n  oauth: {issuer: http://login.hospital.example, audience: " + oauthAudience + "}\n", "mcp.oauth.issuer: must be https (http only on a loopback address)"},
		{"mcp:\n  oauth: {issuer: https://login.hospital.example, audience: countersign.hospital.example}\n", "mcp.oauth.audience: not an absolute URL"},
		{"mcp:\n  oauth: {issuer: https://login.hospital.example, audience: \"https://cs.example/mcp#x\"}\n", "mcp.oauth.audience: must have no query or fragment"},
		{"mcp:\n  oauth: {issuer: https://login.hospital.example, audience: " + oauthAudience + ", claim: \"a b\"}\n", "mcp.oauth.claim"},
		{"mcp:\n  oauth: {issuer: https://login.hospital.example, audience: " + oauthAudience + ", jwks: x}\n", "jwks"},
	} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.yaml, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("mcp:\n  oauth: {issuer: https://login.hospital.example, audience: "+oauthAudience+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil || cfg.MCP.OAuth.Claim != "email" {
		t.Fatalf("defaults: %v %+v, want no error and claim %q", err, cfg, "email")
	}
}

// The YAML blocks of docs/mcp.md load as a configuration (with a store
// path of the test's own), so that the documented setup works pasted.
func TestMCPDocsConfigBlocksLoad(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatal("an unclosed yaml block in docs/mcp.md")
		}
		blocks++
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte("store:\n  path: "+filepath.Join(filepath.Dir(path), "cs.db")+"\n"+block), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err != nil {
			t.Errorf("docs/mcp.md yaml block %d does not load: %v\n%s", blocks, err, block)
		}
	}
	if blocks == 0 {
		t.Fatal("docs/mcp.md has no yaml block")
	}
}
