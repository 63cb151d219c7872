package config

import (
	"strings"
	"testing"
	"time"
)

// TestWebOptions: the console's options carry the web section's keys and
// the directory's people (each as the principal they sign in as, with
// their web identity); with OIDC the client secret is read from the
// variable named, and an unset one is an error naming the key and the
// variable, never a console that signs in with an empty secret.
func TestWebOptions(t *testing.T) {
	t.Parallel()
	c := &Config{Web: WebConfig{PublicURL: "https://cs.ward7.example", SessionTTL: 2 * time.Hour, RatePerMinute: 60, RateBurst: 10,
		OIDC: &WebOIDCConfig{Issuer: "https://sso.ward7.example", ClientID: "countersign", ClientSecretEnv: "OIDC_SECRET", Claim: "email"}},
		Principals: []PrincipalDecl{{Name: "dr_smith", Role: "member", Web: " smith@ward7.example ", Scopes: []string{"patient_42"}}}}
	o, err := c.Web.Options(func(k string) string { return map[string]string{"OIDC_SECRET": "s3cret"}[k] }, directoryOf(t, c))
	if err != nil {
		t.Fatalf("Options: %v", err)
	}
	if o.PublicURL != c.Web.PublicURL || o.SessionTTL != 2*time.Hour || o.RatePerMinute != 60 || o.RateBurst != 10 || o.Passkeys != nil {
		t.Errorf("options %+v, want the section's public_url, session_ttl, rates and no passkeys", o)
	}
	if o.OIDC == nil || o.OIDC.ClientSecret != "s3cret" || o.OIDC.Issuer != "https://sso.ward7.example" || o.OIDC.ClientID != "countersign" || o.OIDC.Claim != "email" {
		t.Errorf("OIDC %+v, want the section's, with the secret from $OIDC_SECRET", o.OIDC)
	}
	p, ok := o.People["dr_smith"]
	if !ok || p.ID != "web:dr_smith" || p.Kind != "person" || p.Web != "smith@ward7.example" || len(p.Scopes) != 1 {
		t.Errorf("people %+v, want dr_smith as web:dr_smith, a person, with the web identity trimmed and one scope", o.People)
	}
	_, err = c.Web.Options(func(string) string { return "" }, nil)
	if err == nil || !strings.Contains(err.Error(), "web.oidc.client_secret_env: the environment variable OIDC_SECRET is not set") {
		t.Errorf("no secret: %v, want web.oidc.client_secret_env and OIDC_SECRET named", err)
	}
}
