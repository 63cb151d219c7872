package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
)

// TestWebOIDCNeedsVerifiedEmail: with claim email, an ID token that does
// not say email_verified: true signs nobody in.
func TestWebOIDCNeedsVerifiedEmail(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: dr.smith@hospital.example}\n"+oidcConfig(m))
	e.env["OIDC_SECRET"] = m.ClientSecret
	e.Start()
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", Email: "dr.smith@hospital.example"}) // no email_verified claim
	c := webClient(t)
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/signin/oidc", nil)
	resp, _ = webDo(t, webClient(t), "GET", resp.Header.Get("Location"), nil)
	if resp, page := webDo(t, c, "GET", resp.Header.Get("Location"), nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "not verified") {
		t.Errorf("an ID token without email_verified answered %d:\n%s\nwant 403, not verified", resp.StatusCode, page)
	}
	if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after the unverified sign-in the inbox answered %d, want %d", resp.StatusCode, http.StatusSeeOther)
	}
}

// TestWebOIDCCookieHostPrefix: over https the sign-in's state cookie is a
// __Host- cookie (Secure, Path=/, no Domain), so a sibling subdomain cannot
// plant one; over plain http it cannot be, and is bound to the callback path.
func TestWebOIDCCookieHostPrefix(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	for _, tc := range []struct {
		public, name, path string
		secure             bool
	}{
		{"https://countersign.hospital.example", "__Host-countersign-oidc", "/", true},
		{"", "countersign_oidc", "/ui/oidc/", false},
	} {
		e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: dr.smith@hospital.example}\n"+
			"web:\n  public_url: \""+tc.public+"\"\n  oidc: {issuer: "+m.Issuer()+", client_id: "+m.ClientID+", client_secret_env: OIDC_SECRET}\n")
		e.env["OIDC_SECRET"] = m.ClientSecret
		e.Start()
		resp, _ := webDo(t, webClient(t), "GET", e.URL+"/ui/signin/oidc", nil)
		var got *http.Cookie
		for _, ck := range resp.Cookies() {
			if strings.Contains(ck.Name, "oidc") {
				got = ck
			}
		}
		if resp.StatusCode != http.StatusFound || got == nil || got.Name != tc.name || got.Path != tc.path || got.Secure != tc.secure || got.Domain != "" || !got.HttpOnly || got.SameSite != http.SameSiteLaxMode {
			t.Errorf("public_url %q: the sign-in cookie is %+v; want %s, Path=%s, Secure=%v, no Domain, HttpOnly, SameSite=Lax", tc.public, got, tc.name, tc.path, tc.secure)
		}
		e.Stop()
	}
}
