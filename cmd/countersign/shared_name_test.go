package main

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// TestANameTwoPrincipalsShareNamesNeither plays a key rotation's overlap
// (a second principal created with a person's name, the old one not yet
// revoked) against the real store file and the real server: `web link
// --name` and `keys rotate-callback-secret --name` on the store, and the
// web_link and rotate_callback_secret tools over HTTP, each refuse the
// name and act on neither (before, the link went to whichever id sorted
// last, and the rotation to whichever sorted first). Once the old one is
// revoked, the link is the new principal's.
func TestANameTwoPrincipalsShareNamesNeither(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	admin := e.CreateKey("boss", "admin")
	e.CreateKey("dr_out", "member", "--kind", "person")
	oldID := storedID(t, e, "dr_out")
	e.CreateKey("dr_out", "member", "--kind", "person")
	newID := ""
	func() {
		db := e.openTestStore()
		defer db.Close()
		if err := db.View(context.Background(), func(tx kv.Tx) error {
			ps, err := bot.ListPrincipals(tx)
			for _, p := range ps {
				if p.Name == "dr_out" && p.ID != oldID {
					newID = p.ID
				}
			}
			return err
		}); err != nil || newID == "" {
			t.Fatalf("the second dr_out: id %q, %v; want a principal named dr_out besides %s", newID, err, oldID)
		}
	}()

	const refused = "2 active principals are named 'dr_out'"
	if out, err := e.webLinkCLI("--name", "dr_out"); err == nil || !strings.Contains(err.Error(), refused) || out != "" {
		t.Errorf("web link --name dr_out with two active dr_out: printed %q, %v; want no link and %q", out, err, refused)
	}
	if out, err := e.cli("keys", "rotate-callback-secret", "--config", e.cfg, "--name", "dr_out"); err == nil || !strings.Contains(err.Error(), refused) || strings.Contains(out, "whsec_") {
		t.Errorf("keys rotate-callback-secret --name dr_out: printed %q, %v; want no secret and %q", out, err, refused)
	}

	e.Start()
	for _, tool := range []string{"web_link", "rotate_callback_secret"} {
		if r := e.Call(admin, tool, map[string]any{"name": "dr_out"}); r.Status != 409 || !strings.Contains(r.Error, refused) || strings.Contains(r.Raw, "whsec_") || strings.Contains(r.Raw, "/ui/signin/link") {
			t.Errorf("%s for dr_out with two active: %d %s; want 409 and %q", tool, r.Status, r.Raw, refused)
		}
	}
	e.MustOK(admin, "revoke_principal", map[string]any{"principal_id": oldID})
	r := e.MustOK(admin, "web_link", map[string]any{"name": "dr_out"})
	tok, _ := r.Data["token"].(string)
	payload, err := base64.RawURLEncoding.DecodeString(strings.SplitN(tok, ".", 2)[0])
	if err != nil || !strings.Contains(string(payload), "|p:"+newID+"|") {
		t.Errorf("the link once the old dr_out is revoked carries %q (%v), want the new principal %s", payload, err, newID)
	}
}
