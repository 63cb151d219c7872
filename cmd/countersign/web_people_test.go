package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/web"
	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/kv"
	"github.com/oauth2-proxy/mockoidc"
)

// TestWebOnlyPeopleSignIn plays an agent's sign-in to the console: a
// principal with role agent under principals: (through a sign-in link and
// through OIDC), a stored principal of kind person with role agent, and the
// open session of a person whose role became agent, are all refused.
func TestWebOnlyPeopleSignIn(t *testing.T) {
	t.Parallel()
	m := startMockOIDC(t)
	e := newTestEnv(t, "principals:\n  - {name: dr_smith, role: member, web: dr.smith@hospital.example}\n  - {name: ci_bot, role: agent, web: ci@hospital.example}\n"+oidcConfig(m))
	e.env["OIDC_SECRET"] = m.ClientSecret
	e.CreateKey("robo", "agent", "--kind", "person")
	roboID := storedID(t, e, "robo")
	e.Start()
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, err := approvals.ReadSigningKey(cfg.Audit.SigningKey)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.cli("web", "link", "--config", e.cfg, "--name", "ci_bot"); err == nil || strings.Contains(out, "/ui/signin/link") {
		t.Errorf("`web link --name ci_bot` (role agent) printed %q, %v; want a refusal", out, err)
	}
	for _, ref := range []string{"c:ci_bot", "p:" + roboID} {
		tok, err := web.MintLink(web.LinkKey(key.Seed()), ref, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c := webClient(t)
		if resp, _ := webDo(t, c, "POST", e.URL+"/ui/signin/link", url.Values{"t": {tok}}); resp.StatusCode == http.StatusOK {
			t.Errorf("a sign-in link for %s (role agent) signed in", ref)
		}
		if resp, _ := webDo(t, c, "GET", e.URL+"/ui/", nil); resp.StatusCode == http.StatusOK {
			t.Errorf("after the link for %s the inbox answered 200", ref)
		}
	}
	// OIDC: the provider vouches for ci_bot's address.
	m.QueueUser(&mockoidc.MockUser{Subject: "u-ci", Email: "ci@hospital.example", EmailVerified: true})
	c := webClient(t)
	resp, _ := webDo(t, c, "GET", e.URL+"/ui/signin/oidc", nil)
	resp, _ = webDo(t, webClient(t), "GET", resp.Header.Get("Location"), nil)
	if resp, page := webDo(t, c, "GET", resp.Header.Get("Location"), nil); resp.StatusCode == http.StatusOK && strings.Contains(page, "Signed in") {
		t.Errorf("ci_bot (role agent) signed in through OIDC")
	}

	// A person's open session, after their role became agent.
	smith := signInHTTP(t, e, "dr_smith")
	if resp, _ := webDo(t, smith, "GET", e.URL+"/ui/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("dr_smith's inbox: %d, want %d", resp.StatusCode, http.StatusOK)
	}
	e.Stop()
	rewriteConfig(t, e.cfg, "{name: dr_smith, role: member,", "{name: dr_smith, role: agent,")
	run := e.again()
	run.Start()
	// The jar sends the cookie to the new port too (cookies ignore ports).
	if resp, _ := webDo(t, smith, "GET", run.URL+"/ui/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the open session of dr_smith, now role agent, answered %d; want 303 to the sign-in page", resp.StatusCode)
	}
}

func rewriteConfig(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("config has no %q", old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// storedID is the id of the stored principal name (the server stopped).
func storedID(t *testing.T, e *testEnv, name string) string {
	t.Helper()
	db := e.openTestStore()
	defer db.Close()
	id := ""
	err := db.View(context.Background(), func(tx kv.Tx) error {
		ps, err := bot.ListPrincipals(tx)
		for _, p := range ps {
			if p.Name == name {
				id = p.ID
			}
		}
		return err
	})
	if err != nil || id == "" {
		t.Fatalf("no stored principal %s: %v", name, err)
	}
	return id
}
